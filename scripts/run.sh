#!/usr/bin/env bash
# partita's main job on built-in defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -p partita-cli
exec target/release/partita demo "$@"

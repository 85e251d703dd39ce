#!/usr/bin/env bash
# partita's main job on built-in defaults: `partita demo` boots paper 001's video-surveillance system (a recorder
# partition and the routing I/O partition in a 1500 us frame on CPU 0, a native monitoring node), measures the
# monitor's frame requests, prints the response-time table, writes results/demo/ and tears everything down.
# Extra arguments are passed to `partita demo` (e.g. --count 10000). Needs root (namespaces, cgroups).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -p partita-cli
exec target/release/partita demo "$@"

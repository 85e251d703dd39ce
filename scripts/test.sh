#!/usr/bin/env bash
# The whole test suite: setup, release build, every crate's unit and integration tests.
# Integration tests need root (network namespaces, cgroups); they run as root on the team's machines and in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PARTITA_PYTHON="$PWD/target/pyenv/bin/python"
cargo build --release --workspace --bins
# One test thread per binary: the tests build namespaces and bridges and measure timing; 2 cores.
cargo test --release --workspace -- --test-threads=1

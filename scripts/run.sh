#!/usr/bin/env bash
# partita's main job on built-in defaults: for now the request/response benchmark of the foundation — raw UDP,
# partita's DDS and Cyclone's ddsperf, 1 KiB, 10,000 operations each, on a private loopback — printing the
# table shaped like paper 001's. Extra arguments are passed to `partita bench rr`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -p partita-cli
exec target/release/partita bench rr --transport udp,dds,ddsperf --size 1KiB --count 10000 --warmup 1000 "$@"

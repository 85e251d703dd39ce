#!/usr/bin/env bash
# The whole test suite: setup, release build, then every crate's unit and integration tests, run inside a
# network namespace of their own (only loopback, plus whatever the tests build themselves), while a guard
# captures on the machine's default interface and fails the run if any DDS (RTPS) packet or any packet of
# partita's 198.18.0.0/15 range shows up there.
# Integration tests need root (network namespaces, cgroups); they run as root on the team's machines and in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PARTITA_PYTHON="$PWD/target/pyenv/bin/python"
cargo build --release --workspace --bins
cargo test --release --workspace --no-run

guard_pcap=target/network-guard.pcap
guard_pid=
default_if=$(ip route show default 2>/dev/null | awk '{for (i=1;i<NF;i++) if ($i=="dev") {print $(i+1); exit}}')
if [[ -n $default_if ]]; then
  tcpdump -i "$default_if" -n -U -w "$guard_pcap" 'udp[8:4] = 0x52545053 or net 198.18.0.0/15' 2>/dev/null &
  guard_pid=$!
  sleep 1
fi

set +e
# One test thread per binary: the tests build namespaces and bridges and measure timing; 2 cores.
unshare --net -- bash -c 'ip link set lo up && exec cargo test --release --offline --workspace -- --test-threads=1'
rc=$?
set -e

if [[ -n $guard_pid ]]; then
  sleep 1
  kill "$guard_pid" 2>/dev/null || true
  wait "$guard_pid" 2>/dev/null || true
  leaked=$(tcpdump -r "$guard_pcap" -n 2>/dev/null | wc -l)
  if [[ $leaked -ne 0 ]]; then
    echo "network guard: $leaked DDS or 198.18.0.0/15 packets seen on the default interface $default_if:" >&2
    tcpdump -r "$guard_pcap" -n 2>/dev/null | head -20 >&2
    exit 1
  fi
  echo "network guard: no DDS or 198.18.0.0/15 packet on the default interface $default_if"
fi
exit $rc

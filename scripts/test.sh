#!/usr/bin/env bash
# The whole test suite: setup, release build, then every crate's unit and integration tests, run inside a
# network namespace of their own (only loopback, plus whatever the tests build themselves), while a guard
# captures on the machine's default interface and fails the run if any DDS (RTPS) packet or any packet of
# partita's 198.18.0.0/15 range shows up there.
# Integration tests need root (network namespaces, cgroups); they run as root on the team's machines and in CI.
#
#   scripts/test.sh           the whole suite (what CI runs)
#   scripts/test.sh --quick   unit tests and the fast integration tests: no VM, no benchmark, no whole-paper run,
#                             no other DDS implementation (a few minutes once built; for day-to-day work)
#
# At the end the suite prints how long each test binary took (the slowest first): where its time goes.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
# The quick tier: every crate's unit tests, and these integration tests (package:test).
QUICK_TESTS=(
  partita-system:validation partita-system:examples partita-router-config:generated
  partita-schedule:optimised_files
  partita-dds:keyhash partita-dds:pubsub partita-dds:discovery_forward partita-dds:listener_unwind
  partita-router:batching partita-router:keyed_and_durable partita-router:mirroring partita-router:protection
  partita-router:ring partita-router:reload
  partita-supervisor:check_then_up partita-supervisor:cleanup partita-supervisor:dds_in_partitions
  partita-supervisor:freezing partita-supervisor:isolation partita-supervisor:network
  partita-supervisor:supervisor_signal partita-supervisor:supervisor_up partita-supervisor:time_overrun
  partita-supervisor:attacks partita-supervisor:space_attacks partita-supervisor:ports
  partita-system:channels partita-ports:ports partita-apex:services partita-apex:modes partita-apex:hello_pair
  partita-ports-c:c_program
  partita-system:modes partita-ports:control partita-apex:control partita-programs:partition
  partita-cli:check partita-cli:check_is_what_up_builds partita-cli:supervisor_cli partita-cli:up
  partita-cli:recorder_ring partita-cli:status_topic partita-cli:trace partita-cli:web partita-cli:route_watch
  partita-cli:router_reload
)
selection=(--workspace)
if [[ -n $quick ]]; then
  selection=(--workspace --lib --bins)
  quick_args=()
  for t in "${QUICK_TESTS[@]}"; do quick_args+=(-p "${t%%:*}" --test "${t##*:}"); done
fi
# How long each phase takes, printed at the end beside the slowest test binaries.
phases=()
phase() { phases+=("$(printf '%8d s  %s' "$((SECONDS - phase_start))" "$1")"); phase_start=$SECONDS; }
phase_start=$SECONDS
scripts/setup.sh
phase "setup (scripts/setup.sh)"
export PARTITA_PYTHON="$PWD/target/pyenv/bin/python"
if [[ -n $quick ]]; then
  cargo build --release --workspace --bins
  phase "build: the binaries"
  cargo test --release "${selection[@]}" --no-run
  cargo test --release "${quick_args[@]}" --no-run
  phase "build: the tests"
else
  # The binaries and every test target in one cargo run, so that test crates compile while the last binaries
  # link (two runs in a row leave the cores idle between them); `cargo test --no-run` then finds them built.
  cargo build --release --workspace --bins --tests
  cargo test --release "${selection[@]}" --no-run
  phase "build: the binaries and the tests"
fi

# What a crashed earlier run left (namespaces, links, cgroups, state of systems whose supervisor is gone) is
# removed first: tests that build systems of fixed names, and tests that check nothing was left, must start clean.
# Systems that are up are left alone.
target/release/partita down

guard_pcap=target/network-guard.pcap
guard_pid=
default_if=$(ip route show default 2>/dev/null | awk '{for (i=1;i<NF;i++) if ($i=="dev") {print $(i+1); exit}}')
if [[ -n $default_if ]]; then
  rm -f "$guard_pcap"
  tcpdump -i "$default_if" -n -U -w "$guard_pcap" 'udp[8:4] = 0x52545053 or net 198.18.0.0/15' 2>/dev/null &
  guard_pid=$!
  # The capture has started once tcpdump wrote the file's header (5 s at most).
  for _ in $(seq 50); do [[ -s $guard_pcap ]] && break; sleep 0.1; done
fi

# The suite takes a few minutes; a test that hangs must fail the run with a trace, not hold it until CI's limit.
limit=${PARTITA_TEST_TIMEOUT:-1500}

# Descendants of a pid (processes this script started), from one snapshot of the process table.
descendants() {
  ps -e -o pid=,ppid= | awk -v root="$1" '
    { parent[$1] = $2 }
    END { for (p in parent) for (q = parent[p]; q != ""; q = parent[q]) if (q == root) { print p; break } }'
}

# Shortly before the limit: which tests are still running, and where every thread of each test binary waits.
watchdog() {
  local s lead=$((limit > 60 ? limit - 30 : limit / 2))
  sleep "$lead" & s=$!
  trap 'kill $s 2>/dev/null; exit 0' TERM
  wait "$s"
  echo "test watchdog: the suite is still running after $lead s; what runs now:" >&2
  for p in $(descendants "$1"); do
    args=$({ tr '\0' ' ' < "/proc/$p/cmdline"; } 2>/dev/null) || continue
    echo "  pid $p: $args" >&2
    if [[ $args == */target/release/deps/* ]] && command -v gdb >/dev/null; then
      gdb -batch -p "$p" -ex 'thread apply all bt' 2>/dev/null | grep -E '^(Thread|#)' | head -300 >&2
    fi
  done
}

set +e
# One test thread per binary: the tests build namespaces and bridges and measure timing; 2 cores.
# timeout ends the whole process group it starts (unshare, cargo and the test binaries) at the limit. bash
# starts a background command with SIGINT and SIGQUIT ignored; env gives the tests their default handling back.
suite_log=target/test-suite.log
run_tests='cargo test --release --offline --no-fail-fast "${selection[@]}" -- --test-threads=1'
[[ -n $quick ]] && run_tests+=' && cargo test --release --offline --no-fail-fast "${quick_args[@]}" -- --test-threads=1'
env --default-signal=INT,QUIT timeout --kill-after=20 "$limit" \
  unshare --net -- bash -c "ip link set lo up && $(declare -p selection quick_args 2>/dev/null); $run_tests" \
  > >(tee "$suite_log") 2>&1 &
suite=$!
# timeout runs in a process group of its own, out of reach of the terminal's Ctrl-C: pass it on.
interrupted=
trap 'interrupted=1; kill -TERM "$suite" 2>/dev/null' INT TERM
watchdog "$suite" &
watch=$!
wait "$suite"
rc=$?
# wait returns early when a trapped signal arrives; then wait for the suite to end.
while kill -0 "$suite" 2>/dev/null; do wait "$suite"; rc=$?; done
trap - INT TERM
kill "$watch" 2>/dev/null
wait "$watch" 2>/dev/null
if [[ -n $interrupted || $rc -eq 124 || $rc -eq 137 ]]; then
  [[ -n $interrupted ]] && echo "test.sh: interrupted; the suite was stopped" >&2
  [[ -z $interrupted ]] && echo "test watchdog: the suite did not finish within $limit s (PARTITA_TEST_TIMEOUT) and was stopped" >&2
  # The stopped tests could not clean up: remove what they left (namespaces, links, cgroups) by name.
  target/release/partita down >&2 || true
  [[ -n $interrupted ]] && rc=130
fi
set -e
phase "the tests (in their namespace)"
{ echo "where the time went:"; printf '%s\n' "${phases[@]}"; } >&2

# Where the time went: each test binary's own figure ("finished in"), the slowest first.
awk '/Running (unittests )?[^ ]+ \(/ { bin = $NF; gsub(/[()]/, "", bin); sub(/.*\//, "", bin); sub(/-[0-9a-f]+$/, "", bin) } /^test result:/ { for (i = 1; i <= NF; i++) if ($i == "in") { t = $(i + 1); sub(/s$/, "", t); printf "%8.1f s  %s\n", t, bin } }' "$suite_log" \
  | sort -rn | head -15 | sed '1i test binaries, slowest first:' >&2 || true

if [[ -n $guard_pid ]]; then
  # tcpdump -U writes each packet as it comes; a moment for the last ones.
  sleep 0.2
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

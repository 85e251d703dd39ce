#!/usr/bin/env bash
# The DBE's Cyclone agent beside Cyclone's own tool, ddsperf, in one run: both pairs on loopback in a network
# namespace of their own, ping on CPU 0 and pong on CPU 1, SCHED_FIFO 50 (the benchmarks' real-time setup),
# interleaved per size and repeat; prints the round-trip p50 and mean of each and their ratio.
#   scripts/dbe-reference.sh [SIZES] [REPEATS]      (default: "64 1024 16384" and 3; needs root)
# ddsperf reports half round trips per second (mean and percentiles of each second); they are doubled and the
# first second is dropped as warm-up. ddsperf's KS topic counts a 12-byte fixed part in its size.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${1:-"64 1024 16384"}
repeats=${2:-3}
partita=$PWD/target/release/partita
[[ -x $partita ]] || { echo "dbe-reference: build partita first (cargo build --release -p partita-cli)" >&2; exit 2; }
command -v ddsperf >/dev/null || { echo "dbe-reference: ddsperf missing (scripts/setup.sh installs cyclonedds-tools)" >&2; exit 2; }
exec unshare --net -- bash -s "$partita" "$sizes" "$repeats" <<'INNER'
set -euo pipefail
partita=$1; sizes=$2; repeats=$3
ip link set lo up
export CYCLONEDDS_URI='<CycloneDDS><Domain id="any"><General><Interfaces><NetworkInterface name="lo"/></Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>20</MaxAutoParticipantIndex><Peers><Peer address="127.0.0.1"/></Peers></Discovery></Domain></CycloneDDS>'
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for size in $sizes; do
  for r in $(seq 1 "$repeats"); do
    # partita's Cyclone agent (the DBE's), 10,000 round trips after 1,000 warm-up.
    chrt -f 50 taskset -c 1 "$partita" app dbe-agent --impl cyclone --role pong --topic ref$r > /dev/null 2>&1 & pong=$!
    chrt -f 50 taskset -c 0 "$partita" app dbe-agent --impl cyclone --role ping --topic ref$r --sizes "$size" --count 10000 --warmup 1000 2>/dev/null \
      | python3 -c 'import json,sys,statistics as s
for l in sys.stdin:
    if l.startswith("DBE ") and "\"rtt\"" in l:
        v=sorted(json.loads(l[4:])["rtt_ns"]); print(v[len(v)//2]/1e3, s.mean(v)/1e3)' > "$out/agent-$size-$r"
    wait $pong || true
    # ddsperf waitset ping/pong (Debian's cyclonedds-tools), 4 s.
    chrt -f 50 taskset -c 1 ddsperf -i 7 pong waitset > /dev/null 2>&1 & pong=$!
    chrt -f 50 taskset -c 0 ddsperf -i 7 -D 4 -Qminmatch:1 -Qinitwait:10 ping size "$size" waitset 2>&1 \
      | python3 -c 'import re,sys
rows=[]
for l in sys.stdin:
    m=dict(re.findall(r"(mean|50%|cnt) ([0-9.]+)", l))
    if "cnt" in m and float(m["cnt"])>0: rows.append((float(m["50%"]),float(m["mean"]),float(m["cnt"])))
rows=rows[1:]; n=sum(c for _,_,c in rows)
print(2*sum(p*c for p,_,c in rows)/n, 2*sum(a*c for _,a,c in rows)/n)' > "$out/ddsperf-$size-$r"
    kill $pong 2>/dev/null || true; wait $pong 2>/dev/null || true
  done
done
printf '| size B | repeat | agent p50 µs | ddsperf p50 µs | agent/ddsperf p50 | agent mean µs | ddsperf mean µs | agent/ddsperf mean |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for size in $sizes; do
  for r in $(seq 1 "$repeats"); do
    read -r ap am < "$out/agent-$size-$r"; read -r dp dm < "$out/ddsperf-$size-$r"
    python3 -c "print('| $size | $r | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |' % ($ap, $dp, $ap/$dp, $am, $dm, $am/$dm))"
  done
done
INNER

#!/usr/bin/env bash
# What partita's partition programs weigh on this machine: each binary's size without debug information, a VM
# guest's base initramfs, and the resident memory of the built-in system's partitions while it runs. Root (it
# brings the built-in system up on partita's own bridges, 198.18.0.0/15, and takes it down).
#
#   scripts/footprint.sh [BIN_DIR]     BIN_DIR: where partita and its small binaries are (default target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== binaries (strip --strip-debug), bytes"
for b in partita partita-route partita-recorder partita-monitor partita-vm-runner partita-guest; do
  if [[ -x $bin/$b ]]; then
    strip --strip-debug -o "$tmp/$b" "$bin/$b"
    printf '%12d  %s\n' "$(stat -c %s "$tmp/$b")" "$b"
  else
    printf '%12s  %s\n' "-" "$b (not built)"
  fi
done

echo "== a VM guest's base initramfs"
"$bin/partita" vm image 2>&1 | tail -1

echo "== resident memory of the built-in system's partitions (partita up, 8 s after it is up)"
"$bin/partita" up > "$tmp/up.log" 2>&1 &
up=$!
for _ in $(seq 60); do grep -q 'is up' "$tmp/up.log" && break; sleep 1; done
sleep 8
for cg in /sys/fs/cgroup/unified/partita/video-surveillance/* /sys/fs/cgroup/partita/video-surveillance/*; do
  [[ -f $cg/cgroup.procs ]] || continue
  while read -r pid; do
    rss=$(awk '/^VmRSS/ {print $2, $3}' "/proc/$pid/status" 2>/dev/null || true)
    printf '%-10s %s  %s\n' "$(basename "$cg")" "$rss" "$(tr '\0' ' ' < "/proc/$pid/cmdline" | cut -c1-70)"
  done < "$cg/cgroup.procs"
done
kill -INT "$up"
wait "$up" || true

#!/usr/bin/env bash
# The eBPF observer's own cost per program (ns per run of Q, I, D, C): fio reads 4 KiB at random at
# QD32 (io_uring, O_DIRECT) while `ioshare observe --cost` watches the device (kernel BPF run-time
# statistics, switched off again when observe exits). Several binaries are measured in turn, so a
# before/after comparison is interleaved (the figures swing with other users of a shared machine).
#
# Usage: scripts/observe-cost.sh TARGET SECONDS BIN...
#   TARGET   `loop`: a loop device (mq-deadline) over a 1 GiB file in /dev/shm, made and removed here;
#            or a file this script may create and read (2 GiB, written once if missing), e.g. on vda
#   SECONDS  seconds per measurement
#   BIN      ioshare binaries (for example target/release/ioshare and a copy of an older build)
# Root, fio, jq (scripts/setup.sh installs them).
set -euo pipefail

if [[ $# -lt 3 ]]; then
  echo "usage: $0 loop|FILE SECONDS BIN...: give a target, a duration and at least one ioshare binary" >&2
  exit 1
fi
target=$1 secs=$2
shift 2
dev='' backing='' out=''
cleanup() {
  [[ -n $out ]] && rm -f "$out"
  [[ -n $dev ]] && losetup -d "$dev"
  [[ -n $backing ]] && rm -f "$backing"
  return 0
}
trap cleanup EXIT
if [[ $target == loop ]]; then
  backing=$(mktemp /dev/shm/ioshare-observe-cost.XXXXXX)
  truncate -s 1G "$backing"
  dev=$(losetup --find --show --direct-io=on "$backing")
  echo mq-deadline >"/sys/block/$(basename "$dev")/queue/scheduler"
  dd if=/dev/zero of="$dev" bs=1M count=1024 oflag=direct status=none
  file=$dev watch=$dev
else
  file=$target
  [[ -f $file ]] || fio --name=fill --filename="$file" --size=2G --rw=write --bs=1M --direct=1 >/dev/null
  watch=$(df --output=source "$file" | tail -1)
fi
out=$(mktemp)
for bin in "$@"; do
  fio --name=cost --filename="$file" --size=1G --rw=randread --bs=4k --iodepth=32 --ioengine=io_uring --direct=1 \
    --time_based --runtime=$((secs + 2)) --output-format=terse >/dev/null &
  sleep 1
  "$bin" observe --device "$watch" --cost --interval "$secs" --duration "$secs" --json >"$out"
  wait
  printf '%s: ' "$bin"
  tail -1 "$out" | jq -r '[.snapshot.cost.programs[] | .run_time_ns / ([.runs, 1] | max)]
    | "ns per run Q \(.[0] | round)  I \(.[1] | round)  D \(.[2] | round)  C \(.[3] | round)  (sum \(add | round))"'
done

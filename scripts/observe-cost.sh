#!/usr/bin/env bash
# The eBPF observer's cost, two ways.
#
# `programs`: ns per run of each stage's program (Q, I, D, C) while fio reads 4 KiB at random at QD32
# (io_uring, O_DIRECT) and `ioshare observe --cost` watches the device (kernel BPF run-time statistics,
# switched off again when observe exits), at each detail, binary after binary, so a before/after
# comparison is interleaved (the figures swing with other users of a shared machine). `queue` is the
# agent's detail (Q alone); its IOs are counted at Q, so its ns per IO are per bio queued.
#
# `iops`: the bench's own measure, `ioshare bench --scenario overhead --observe --no-kernel` (the
# saturating QD32 reader with the observer attached and detached in turns of 100 ms) on TARGET,
# ROUNDS times at each detail, the details interleaved; prints each run's attached/detached figure and
# IO-thread CPU per IO, then their median and range per detail. DETAILS (default `light full`) picks
# the details, e.g. DETAILS=light for long runs of the default alone.
#
# Usage: scripts/observe-cost.sh programs TARGET SECONDS BIN...
#        scripts/observe-cost.sh iops ROUNDS SECONDS BIN [TARGET]
#   TARGET   `loop` (the default for `iops`): a loop device (mq-deadline) over a 1 GiB file in /dev/shm,
#            made and removed here; or a file this script may create and read (2 GiB, written once if
#            missing), e.g. on vda
#   SECONDS  seconds per measurement (`iops`: the bench's --duration)
#   BIN      ioshare binaries (for example target/release/ioshare and a copy of an older build)
# Root, fio, jq (scripts/setup.sh installs them).
set -euo pipefail

usage="usage: $0 programs loop|FILE SECONDS BIN... | $0 iops ROUNDS SECONDS BIN [loop|FILE]"
if [[ $# -lt 4 || ($1 != programs && $1 != iops) ]]; then
  echo "$usage: give a mode, a target or a round count, a duration and an ioshare binary" >&2
  exit 1
fi
mode=$1
shift
dev='' backing='' out=''
cleanup() {
  [[ -n $out ]] && rm -f "$out"
  [[ -n $dev ]] && losetup -d "$dev"
  [[ -n $backing ]] && rm -f "$backing"
  return 0
}
trap cleanup EXIT

# A loop device over a zeroed 1 GiB file in /dev/shm, with mq-deadline: sets $dev and $backing.
make_loop() {
  backing=$(mktemp /dev/shm/ioshare-observe-cost.XXXXXX)
  truncate -s 1G "$backing"
  dev=$(losetup --find --show --direct-io=on "$backing")
  echo mq-deadline >"/sys/block/$(basename "$dev")/queue/scheduler"
  dd if=/dev/zero of="$dev" bs=1M count=1024 oflag=direct status=none
}

# The target named `loop` or a file: sets $file (what to read) and $watch (its disk).
open_target() {
  if [[ $1 == loop ]]; then
    make_loop
    file=$dev watch=$dev
  else
    file=$1
    [[ -f $file ]] || fio --name=fill --filename="$file" --size=2G --rw=write --bs=1M --direct=1 >/dev/null
    watch=$(df --output=source "$file" | tail -1)
  fi
}

if [[ $mode == programs ]]; then
  target=$1 secs=$2
  shift 2
  open_target "$target"
  out=$(mktemp)
  for bin in "$@"; do
    for detail in light queue full; do
      fio --name=cost --filename="$file" --size=1G --rw=randread --bs=4k --iodepth=32 --ioengine=io_uring \
        --direct=1 --time_based --runtime=$((secs + 2)) --output-format=terse >/dev/null &
      sleep 1
      "$bin" observe --device "$watch" --detail "$detail" --cost --interval "$secs" --duration "$secs" --json >"$out"
      wait
      printf '%s %s: ' "$bin" "$detail"
      tail -1 "$out" | jq -r '.snapshot as $s
        | ([$s.entries[].stages[3].ios] | add // 0) as $c | ([$s.entries[].stages[0].ios] | add // 0) as $q
        | (if $c > 0 then $c else $q end) as $ios
        | [$s.cost.programs[] | if .runs > 0 then (.run_time_ns / .runs | round | tostring) else "-" end] as $r
        | "ns per run Q \($r[0])  I \($r[1])  D \($r[2])  C \($r[3])  ns per IO \(
            if $ios > 0 then ([$s.cost.programs[].run_time_ns] | add / $ios | round) else "-" end)"'
    done
  done
  exit 0
fi

rounds=$1 secs=$2 bin=$3
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "$usage: ROUNDS '$rounds' must be a positive whole number, like 3" >&2
  exit 1
fi
open_target "${4:-loop}"
read -ra details <<<"${DETAILS:-light full}"
out=$(mktemp)
declare -A ratios cpus
for ((r = 1; r <= rounds; r++)); do
  # Alternate which detail goes first, so a drift of the machine over time favours neither.
  order=("${details[@]}")
  ((r % 2 == 0)) && order=($(printf '%s\n' "${details[@]}" | tac))
  for detail in "${order[@]}"; do
    # The bench exits non-zero when a scenario misses one of its targets; the note is read either way.
    IOSHARE_OBSERVE_DETAIL=$detail "$bin" bench --scenario overhead --observe --no-kernel --target "$file" \
      --duration "$secs" --json >"$out" || true
    note=$(jq -r '[.. | strings | select(startswith("observe overhead:"))][0] // ""' "$out")
    ratio=$(sed -n 's/.*all [0-9]* windows \([0-9.]*\)% ± \([0-9.]*\)%.*/\1/p' <<<"$note")
    cpu=$(sed -n 's/.*while attached \([-+0-9]*\) ns.*/\1/p' <<<"$note")
    if [[ -z $ratio ]]; then
      echo "round $r $detail: the bench gave no observe overhead note (is this root with BTF?)" >&2
      exit 1
    fi
    echo "round $r $detail: attached/detached ${ratio}%, IO thread CPU per IO ${cpu:-?} ns  ($note)"
    ratios[$detail]+="$ratio "
    cpus[$detail]+="${cpu:-} "
  done
done
# Median and range of a list of numbers.
summary() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {
  m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "median %g (%g to %g, %d runs)", m, v[1], v[NR], NR }'; }
for detail in "${details[@]}"; do
  echo "$detail: IOPS attached/detached % $(summary <<<"${ratios[$detail]}"); IO thread CPU per IO ns $(summary <<<"${cpus[$detail]}")"
done

#!/usr/bin/env bash
# Total throughput of IOCost's device-depth option (`iocost+qd`) against no control, measured
# interleaved: the device of a shared machine swings between runs (no control alone ranged from
# 18.8k to 78.6k IOPS 5 s apart), so one pair of runs judges nothing. Each round is one
# `ioshare bench --scenario proportional` invocation, which runs none, iocost and iocost+qd back to
# back on the same calibration; the figure is the median over rounds of that round's
# iocost+qd total ÷ none total, per weights and queue depth.
#
# Usage: scripts/qd-total.sh TARGET [ROUNDS] [DURATION_S]
#   TARGET    file or block device to read (never written), e.g. a 2 GiB file you created
#   ROUNDS    rounds per case (default 5)
#   DURATION  seconds per run (default 5)
# Needs jq (scripts/setup.sh installs it) and a release build (cargo build --release -p ioshare).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 TARGET [ROUNDS] [DURATION_S]: give a file or block device to read" >&2
  exit 1
fi
target=$1
rounds=${2:-5}
duration=${3:-5}
bin=$(dirname "$0")/../target/release/ioshare
command -v jq >/dev/null || { echo "$0: jq is missing: apt-get install jq" >&2; exit 1; }
[[ -x $bin ]] || { echo "$0: $bin is missing: cargo build --release -p ioshare" >&2; exit 1; }

printf '%-7s %-4s %-44s %-8s %s\n' weights QD 'per-round qd/none total (qd ratio)' median 'qd ratio range'
for weights in 200,100 400,100 100,200; do
  for qd in 32 64; do
    totals=() ratios=()
    for ((r = 0; r < rounds; r++)); do
      json=$("$bin" bench --scenario proportional --no-kernel --target "$target" --json \
        --weights "$weights" --iodepth "$qd" --duration "$duration" 2>/dev/null) || true
      read -r total ratio < <(jq -r '.scenarios[0].runs as $r
        | ($r[] | select(.controller == "none") | .device.iops) as $none
        | ($r[] | select(.controller == "iocost+qd")) as $q
        | "\($q.device.iops / $none) \($q.tenants[0].iops / $q.tenants[1].iops)"' <<<"$json")
      totals+=("$total") ratios+=("$ratio")
    done
    median=$(printf '%s\n' "${totals[@]}" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
    list=$(for i in "${!totals[@]}"; do printf '%.2f(%.2f) ' "${totals[$i]}" "${ratios[$i]}"; done)
    range=$(printf '%s\n' "${ratios[@]}" | sort -g | sed -n '1p;$p' | xargs printf '%.3f-%.3f')
    printf '%-7s %-4s %-44s %-8.2f %s\n' "$weights" "$qd" "$list" "$median" "$range"
  done
done

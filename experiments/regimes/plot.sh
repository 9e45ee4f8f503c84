#!/usr/bin/env bash
# Regenerates the regime map's tables and plots (experiments/REGIMES.md) in this folder from the
# stored compares (data/*.json of data.tar.xz: snip show --compare ID --json) and the from-scratch
# runs paired by seed (data/runs/*.jsonl: the step lines of snip train --json). Needs
# /usr/bin/python3 with python3-matplotlib (scripts/setup.sh installs it).
#   bash experiments/regimes/plot.sh [DATA_DIR]   (default: data.tar.xz, unpacked to a temporary folder)
set -euo pipefail
cd "$(dirname "$0")"
if [ $# -ge 1 ]; then
  D="$1"
else
  unpacked="$(mktemp -d)"
  trap 'rm -rf "$unpacked"' EXIT
  tar -xJf data.tar.xz -C "$unpacked"
  D="$unpacked/data"
fi
R="$D/runs"
pairs=()
# from scratch, 405 steps (plans re-made every 50 steps), and 2,000 steps (every 100), 3 seeds
for steps in 405 2000; do
  group=""
  [ "$steps" = 2000 ] && group="2000 steps: "
  for s in 1337 1338 1339; do
    for arm in adaptive-snip adaptive-min-err adaptive-hawq uniform-fp4; do
      pairs+=(--pair "${group}scratch-$arm:$R/tiny-scratch-${steps}steps-bf16-seed$s.jsonl:$R/tiny-scratch-${steps}steps-$arm-seed$s.jsonl")
    done
  done
done
/usr/bin/python3 ../plot_regimes.py "$D" --out . \
  --curve small-tensor-rho0.75-all-baselines-oracle-overlap --curve tiny-scratch-tensor-rho0.75-400steps-all-baselines \
  "${pairs[@]}" --pair-reference scratch-adaptive-snip --pair-reference "2000 steps: scratch-adaptive-snip"

#!/usr/bin/env bash
# Regenerates the regime map's tables and plots (experiments/REGIMES.md) from the stored
# compares (data/*.json: snip show --compare ID --json) and the from-scratch runs paired by seed
# (data/runs/*.jsonl: the step lines of snip train --json).
set -euo pipefail
cd "$(dirname "$0")"
R=data/runs
pairs=()
for s in 1337 1338 1339; do
  pairs+=(--pair "scratch-adaptive-snip:$R/X-tiny-scratch-bf16-s$s.jsonl:$R/X-tiny-scratch-adaptive-s$s.jsonl")
  pairs+=(--pair "scratch-adaptive-min-err:$R/X-tiny-scratch-bf16-s$s.jsonl:$R/X-tiny-scratch-min-err-s$s.jsonl")
  pairs+=(--pair "scratch-adaptive-hawq:$R/X-tiny-scratch-bf16-s$s.jsonl:$R/X-tiny-scratch-hawq-s$s.jsonl")
  pairs+=(--pair "scratch-uniform-fp4:$R/X-tiny-scratch-bf16-s$s.jsonl:$R/X-tiny-scratch-fp4-s$s.jsonl")
done
# the same designs over 2,000 steps (plans re-made every 100 steps)
for s in 1337 1338 1339; do
  for arm in adaptive min-err hawq fp4; do
    case $arm in
      adaptive) label=adaptive-snip ;;
      fp4) label=uniform-fp4 ;;
      *) label=adaptive-$arm ;;
    esac
    pairs+=(--pair "2000 steps: scratch-$label:$R/Y-tiny-scratch-bf16-s$s.jsonl:$R/Y-tiny-scratch-$arm-s$s.jsonl")
  done
done
/usr/bin/python3 ../plot_regimes.py data --out . --curve A-tensor-r75 --curve F-tiny-scratch-tensor \
  "${pairs[@]}" --pair-reference scratch-adaptive-snip --pair-reference "2000 steps: scratch-adaptive-snip"

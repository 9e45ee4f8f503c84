#!/bin/bash
# The price of planning for Megatron's pipeline layout (docs/CLI.md, "Pipeline parallelism"):
# predicted ΣQ of the best plan that is the same on every pipeline chunk against the best plan
# without that tie, for small and medium, q/k/v and gate/up tied in both.
#   bash experiments/pipeline_tie.sh WORKDIR   (trains both models briefly, ~15 min on 2 cores; needs jq)
set -euo pipefail
snip=${SNIP:-snip}
dir=${1:?usage: pipeline_tie.sh WORKDIR}
mkdir -p "$dir"
for model in small medium; do
  steps=300; [ "$model" = medium ] && steps=200
  if [ ! -f "$dir/$model.stats.json" ]; then
    "$snip" train --preset "$model" --steps "$steps" --db "$dir/runs.db" --out "$dir/$model.ckpt" >/dev/null
    "$snip" collect --checkpoint "$dir/$model.ckpt" --db "$dir/runs.db" --out "$dir/$model.stats.json" >/dev/null
  fi
done
echo "model,blocks,pipeline,virtual,budget,q_untied,q_tied,increase_pct"
for model in small medium; do
  blocks=6; [ "$model" = medium ] && blocks=8
  for layout in "2 1" "3 1" "2 2" "4 1" "2 3" "6 1" "8 1"; do
    read -r pp vp <<<"$layout"
    (( blocks % (pp * vp) == 0 )) || continue
    for budget in 0.5 0.75 0.9; do
      "$snip" solve --stats "$dir/$model.stats.json" --budget "$budget" --ties \
        --pipeline-parallel "$pp" --virtual-stages "$vp" --json |
        jq -r --arg m "$model" --arg b "$blocks" --arg p "$pp" --arg v "$vp" --arg r "$budget" \
          '[$m, $b, $p, $v, $r, .untied_predicted_q, .predicted_q,
            ((.predicted_q / .untied_predicted_q - 1) * 1000 | round / 10)] | @csv'
    done
  done
done

#!/usr/bin/env bash
# Re-runs the experiments of the regime map (experiments/REGIMES.md, indexed in
# experiments/README.md) with this checkout's `snip`. Each compare cell is one paired, replicated
# `snip compare` stored in the database and written as `snip show --compare ID --json` to
# OUT/NAME.json; each from-scratch run writes the step lines of `snip train --json` to
# OUT/runs/NAME.jsonl. The checkpoints a cell starts from are trained first, once, into WORK.
#
#   experiments/regimes/run.sh --db FILE [--work DIR] [--out DIR] NAME...
#   experiments/regimes/run.sh --list
#
# NAME: a cell or run of --list, a checkpoint (ck-small, ck-medium, ...), a group (cells,
# scratch-runs, checkpoints) or all. Options and environment:
#   --db FILE    (or SNIP_EXPERIMENT_DB) the experiment database the runs and compares are stored in
#   --work DIR   (or SNIP_EXPERIMENT_WORK; default: DB's folder/ck) checkpoints and tokenizers
#   --out DIR    where the JSON goes (default: WORK/data); to replace the committed data, pack the
#                folder as experiments/regimes/data.tar.xz (README), then run experiments/regimes/plot.sh
#   SNIP         the snip binary (default: build/app/snip of this checkout)
# The committed data came from earlier builds (REGIMES.md, "Machine, load and budget of compute"):
# a re-run repeats the design, not the bits. The oracle of today's `snip` measures on validation
# batches after the evaluation's, so the *-oracle-overlap cells re-run as their disjoint twins.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
SNIP="${SNIP:-$root/build/app/snip}"
db="${SNIP_EXPERIMENT_DB:-}"
work="${SNIP_EXPERIMENT_WORK:-}"
out=""
list=0
names=()

# name | checkpoint | `snip compare` options after --checkpoint (in the order they first ran)
CELLS='
small-tensor-rho0.75-all-baselines-oracle-overlap              ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines random,min-err,hawq,uniform-fp4 --oracle --oracle-batches 16
small-snip-tiles-rho0.75-uniform-fp4                           ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe snip --budget 0.75 --baselines uniform-fp4
tiny-scratch-tensor-rho0.75-400steps-all-baselines             ck-tiny-s5      --steps 400 --cooldown 10 --eval-batches 8 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines random,min-err,hawq,uniform-fp4
small-tensor-rho0.5-random-min-err-hawq                        ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.5 --baselines random,min-err,hawq
small-channel-rho0.75-uniform-fp4                              ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe channel --budget 0.75 --baselines uniform-fp4
small-tensor-rho0.9-random-min-err-hawq                        ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.9 --baselines random,min-err,hawq
small-blockrow-rho0.75-uniform-fp4                             ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe block:row --budget 0.75 --baselines uniform-fp4
small-mx-rho0.75-uniform-fp4                                   ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe mx --budget 0.75 --baselines uniform-fp4
small-nvfp4-rho0.75-uniform-fp4                                ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe nvfp4 --budget 0.75 --baselines uniform-fp4
small-block16-rho0.75-uniform-fp4                              ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe block:16 --budget 0.75 --baselines uniform-fp4
small-tensor-sr-rho0.75-uniform-fp4                            ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor:sr --budget 0.75 --baselines uniform-fp4
small-tensor-rho0.5-min-err-oracle-overlap                     ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.5 --baselines min-err --oracle --oracle-batches 16
small-sp4096-tensor-rho0.75-min-err-uniform-fp4                ck-small-sp     --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines min-err,uniform-fp4
small-sp4096-tensor-rho0.75-random-hawq                        ck-small-sp     --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines random,hawq
medium-tensor-rho0.75-min-err-uniform-fp4                      ck-medium       --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines min-err,uniform-fp4
small-sp4096-tensor-rho0.75-min-err-oracle-overlap             ck-small-sp     --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines min-err --oracle --oracle-batches 16
small-tensor-rho0.9-min-err-oracle-overlap                     ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.9 --baselines min-err --oracle --oracle-batches 16
medium-tensor-rho0.75-random-hawq                              ck-medium       --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines random,hawq
small-snip-tiles-rho0.75-min-err-oracle-overlap                ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --budget 0.75 --baselines min-err --oracle --oracle-batches 16 --recipe snip
small-channel-rho0.75-min-err-oracle-overlap                   ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --budget 0.75 --baselines min-err --oracle --oracle-batches 16 --recipe channel
small-mx-rho0.75-min-err-oracle-overlap                        ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --budget 0.75 --baselines min-err --oracle --oracle-batches 16 --recipe mx
small-nvfp4-rho0.75-min-err-oracle-overlap                     ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --budget 0.75 --baselines min-err --oracle --oracle-batches 16 --recipe nvfp4
small-tensor-sr-rho0.75-min-err-oracle-overlap                 ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --budget 0.75 --baselines min-err --oracle --oracle-batches 16 --recipe tensor:sr
small-blockrow-rho0.75-min-err-oracle-overlap                  ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --budget 0.75 --baselines min-err --oracle --oracle-batches 16 --recipe block:row
medium-tensor-rho0.75-min-err-oracle-overlap                   ck-medium       --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --budget 0.75 --baselines min-err --oracle --oracle-batches 16 --recipe tensor
small-tensor-rho0.75-all-baselines-oracle                      ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines random,min-err,hawq,uniform-fp4 --oracle --oracle-batches 16
small-block32-rho0.75-uniform-fp4                              ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe block:32 --budget 0.75 --baselines uniform-fp4
small-block64-rho0.75-uniform-fp4                              ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe block:64 --budget 0.75 --baselines uniform-fp4
small-block128-rho0.75-uniform-fp4                             ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe block:128 --budget 0.75 --baselines uniform-fp4
medium-tensor-rho0.75-K6-all-baselines-oracle                  ck-medium       --steps 40 --cooldown 10 --eval-batches 4 --replicates 6 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines random,min-err,hawq,uniform-fp4 --oracle --oracle-batches 16
small-sp4096-tensor-rho0.75-min-err-oracle                     ck-small-sp     --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines min-err --oracle --oracle-batches 16
small-sp2048-tensor-rho0.75-all-baselines-oracle               ck-small-sp2048 --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines random,min-err,hawq,uniform-fp4 --oracle --oracle-batches 16
small-tensor-rho0.75-200steps-min-err-uniform-fp4-oracle       ck-small        --steps 200 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines min-err,uniform-fp4 --oracle --oracle-batches 16
small-tensor-rho0.5-min-err-oracle                             ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.5 --baselines min-err --oracle --oracle-batches 16
small-tensor-rho0.9-min-err-oracle                             ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.9 --baselines min-err --oracle --oracle-batches 16
small-snip-tiles-rho0.75-min-err-oracle                        ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe snip --budget 0.75 --baselines min-err --oracle --oracle-batches 16
small-mx-rho0.75-min-err-oracle                                ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe mx --budget 0.75 --baselines min-err --oracle --oracle-batches 16
small-channel-sr-rho0.75-uniform-fp4                           ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe channel:sr --budget 0.75 --baselines uniform-fp4
small-blockrow-sr-rho0.75-uniform-fp4                          ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe block:row:sr --budget 0.75 --baselines uniform-fp4
small-block32-sr-rho0.75-uniform-fp4                           ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe block:32:sr --budget 0.75 --baselines uniform-fp4
small-channel-rho0.75-min-err-oracle                           ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe channel --budget 0.75 --baselines min-err --oracle --oracle-batches 16
small-blockrow-rho0.75-min-err-oracle                          ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe block:row --budget 0.75 --baselines min-err --oracle --oracle-batches 16
small-nvfp4-rho0.75-min-err-oracle                             ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe nvfp4 --budget 0.75 --baselines min-err --oracle --oracle-batches 16
small-tensor-sr-rho0.75-min-err-oracle                         ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor:sr --budget 0.75 --baselines min-err --oracle --oracle-batches 16
small-block16-rho0.75-min-err-oracle                           ck-small        --steps 40 --cooldown 10 --eval-batches 4 --replicates 3 --lambdas 0.1 --seeds 1 --recipe block:16 --budget 0.75 --baselines min-err --oracle --oracle-batches 16
medium-tensor-rho0.5-K6-min-err-oracle                         ck-medium       --steps 40 --cooldown 10 --eval-batches 4 --replicates 6 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.5 --baselines min-err --oracle --oracle-batches 16
medium-seed2-tensor-rho0.75-K6-min-err-hawq-uniform-fp4-oracle ck-medium-s2    --steps 40 --cooldown 10 --eval-batches 4 --lambdas 0.1 --seeds 1 --replicates 6 --recipe tensor --budget 0.75 --baselines min-err,hawq,uniform-fp4 --oracle --oracle-batches 16
tiny-scratch-tensor-rho0.75-400steps-min-err-oracle            ck-tiny-s5      --steps 400 --cooldown 10 --eval-batches 8 --replicates 3 --lambdas 0.1 --seeds 1 --recipe tensor --budget 0.75 --baselines min-err --oracle --oracle-batches 16
small-block16-sr-rho0.75-uniform-fp4                           ck-small        --steps 40 --cooldown 10 --eval-batches 4 --lambdas 0.1 --seeds 1 --replicates 3 --recipe block:16:sr --budget 0.75 --baselines uniform-fp4
small-block64-sr-rho0.75-uniform-fp4                           ck-small        --steps 40 --cooldown 10 --eval-batches 4 --lambdas 0.1 --seeds 1 --replicates 3 --recipe block:64:sr --budget 0.75 --baselines uniform-fp4
small-block128-sr-rho0.75-uniform-fp4                          ck-small        --steps 40 --cooldown 10 --eval-batches 4 --lambdas 0.1 --seeds 1 --replicates 3 --recipe block:128:sr --budget 0.75 --baselines uniform-fp4
medium-tensor-rho0.9-K6-min-err-oracle                         ck-medium       --steps 40 --cooldown 10 --eval-batches 4 --lambdas 0.1 --seeds 1 --replicates 6 --recipe tensor --budget 0.9 --baselines min-err --oracle --oracle-batches 16
medium-channel-rho0.75-min-err-uniform-fp4-oracle              ck-medium       --steps 40 --cooldown 10 --eval-batches 4 --lambdas 0.1 --seeds 1 --replicates 3 --recipe channel --budget 0.75 --baselines min-err,uniform-fp4 --oracle --oracle-batches 16
per-role-small-tensor-rho0.75-150steps                         ck-small-tensor --steps 150 --replicates 3 --lambdas 0.1 --recipe tensor --budget 0.75 --baselines uniform-fp4,fp4-fprop-only,fp4-dgrad-only,fp4-wgrad-only
per-role-small-nvfp4-rho0.75-150steps                          ck-small-tensor --steps 150 --replicates 3 --lambdas 0.1 --recipe nvfp4 --budget 0.75 --baselines uniform-fp4,fp4-fprop-only,fp4-dgrad-only,fp4-wgrad-only
per-role-small-mx-rho0.75-150steps                             ck-small-tensor --steps 150 --replicates 3 --lambdas 0.1 --recipe mx --budget 0.75 --baselines uniform-fp4,fp4-fprop-only,fp4-dgrad-only,fp4-wgrad-only
per-role-small-tensor-rho0.33-150steps-snip-per-role           ck-small-tensor --steps 150 --replicates 3 --lambdas 0.1 --recipe tensor --budget 0.3333 --per-role --baselines fp4-fprop-only,fp4-dgrad-only,fp4-wgrad-only
per-role-small-tensor-rho0.33-150steps-snip-per-role-lambdas   ck-small-tensor --steps 150 --replicates 3 --lambdas 0.1,1,10 --recipe tensor --budget 0.3333 --per-role --baselines fp4-fprop-only
per-role-small-tensor-rho0.75-150steps-snip-per-role           ck-small-tensor --steps 150 --replicates 3 --lambdas 0.1 --recipe tensor --budget 0.75 --per-role --baselines uniform-fp4
per-role-medium-tensor-rho0.75-150steps                        ck-medium-tensor --steps 150 --replicates 3 --lambdas 0.1 --recipe tensor --budget 0.75 --baselines uniform-fp4,fp4-fprop-only,fp4-dgrad-only,fp4-wgrad-only
'

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "run.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --db) [ $# -ge 2 ] || die "--db needs a file"; db="$2"; shift 2 ;;
    --work) [ $# -ge 2 ] || die "--work needs a folder"; work="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out="$2"; shift 2 ;;
    --list) list=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) names+=("$1"); shift ;;
  esac
done

cell_names() { printf '%s\n' "$CELLS" | awk 'NF {print $1}'; }
scratch_names() {
  local steps s arm
  for steps in 405 2000; do
    for s in 1337 1338 1339; do
      for arm in bf16 adaptive-snip uniform-fp4 adaptive-min-err adaptive-hawq; do
        echo "tiny-scratch-${steps}steps-$arm-seed$s"
      done
    done
  done
  # The gradient-noise rule (METHOD.md section 10): re-plan only when a layer's FP4 noise ratio
  # crosses sqrt(3) (-noise), and the same with FP4 forbidden below it (-floor).
  for s in 1337 1338 1339; do
    for arm in adaptive-snip-noise adaptive-snip-floor; do echo "tiny-scratch-2000steps-$arm-seed$s"; done
    for arm in bf16 uniform-fp4 adaptive-snip adaptive-snip-noise adaptive-snip-floor; do
      echo "small-scratch-1000steps-$arm-seed$s"
    done
  done
}
checkpoint_names() { printf '%s\n' ck-small ck-tiny-s5 ck-small-sp ck-medium ck-small-sp2048 ck-medium-s2 ck-small-tensor ck-medium-tensor; }

if [ "$list" = 1 ]; then
  echo "# checkpoints"; checkpoint_names
  echo "# compare cells (OUT/NAME.json)"; cell_names
  echo "# from-scratch runs (OUT/runs/NAME.jsonl)"; scratch_names
  exit 0
fi
[ ${#names[@]} -gt 0 ] || { usage; exit 2; }
[ -n "$db" ] || die "give the experiment database: --db FILE or SNIP_EXPERIMENT_DB"
[ -x "$SNIP" ] || die "no snip binary at $SNIP (build with bash scripts/build.sh, or set SNIP)"
mkdir -p "$(dirname "$db")"
db="$(cd "$(dirname "$db")" && pwd)/$(basename "$db")"
work="${work:-$(dirname "$db")/ck}"
out="${out:-$work/data}"
mkdir -p "$work" "$out/runs"

log() { echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $*" >&2; }

# A checkpoint folder, trained unless WORK already has it.
checkpoint() {
  local name="$1" dir="$work/$1"
  [ -f "$dir/trainer_state.json" ] && return 0
  log "checkpoint $name"
  case "$name" in
    ck-small) "$SNIP" train --preset small --steps 500 --batch-size 4 --seq-len 128 --precision bf16 --save-every 100 \
      --out "$dir" --db "$db" --name "$name" ;;
    ck-tiny-s5) "$SNIP" train --preset tiny --steps 5 --batch-size 8 --seq-len 64 --precision bf16 --warmup 20 \
      --out "$dir" --db "$db" --name "$name" ;;
    ck-medium) "$SNIP" train --preset medium --steps 500 --batch-size 4 --seq-len 128 --precision bf16 --save-every 100 \
      --out "$dir" --db "$db" --name "$name" ;;
    ck-medium-s2) "$SNIP" train --preset medium --steps 500 --batch-size 4 --seq-len 128 --precision bf16 --save-every 100 \
      --seed 2 --out "$dir" --db "$db" --name "$name" ;;
    ck-small-sp) vocabulary_checkpoint 4096 "$name" ;;
    ck-small-sp2048) vocabulary_checkpoint 2048 "$name" ;;
    ck-small-tensor) "$SNIP" train --preset small --steps 200 --batch-size 8 --seq-len 128 --recipe tensor \
      --out "$dir" --db "$db" --name "$name" ;;
    ck-medium-tensor) "$SNIP" train --preset medium --steps 200 --batch-size 8 --seq-len 128 --recipe tensor \
      --out "$dir" --db "$db" --name "$name" ;;
    *) die "unknown checkpoint $name" ;;
  esac
}

# The `small` shape with a SentencePiece vocabulary of V pieces trained on the bundled corpus.
vocabulary_checkpoint() {
  local v="$1" name="$2"
  checkpoint ck-small
  [ -f "$work/sp$v.model" ] || "$SNIP" tokenizer train --vocab-size "$v" --out "$work/sp$v"
  /usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["vocab_size"] = int(sys.argv[2]); json.dump(c, open(sys.argv[3], "w"), indent=2)' \
    "$work/ck-small/config.json" "$v" "$work/small-sp$v.json"
  "$SNIP" train --config "$work/small-sp$v.json" --tokenizer "$work/sp$v.model" --steps 500 --batch-size 4 \
    --seq-len 128 --precision bf16 --save-every 100 --out "$work/$name" --db "$db" --name "$name"
}

# One compare cell: the compare, then its stored table as JSON.
cell() {
  local name="$1" line ck args id json
  line="$(printf '%s\n' "$CELLS" | awk -v n="$name" '$1 == n')"
  read -r _ ck args <<<"$line"
  checkpoint "$ck"
  log "compare $name"
  # shellcheck disable=SC2086  # the options are words
  json="$("$SNIP" compare --db "$db" --json --checkpoint "$work/$ck" $args)"
  id="$(printf '%s' "$json" | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["compare_id"])')"
  "$SNIP" show --db "$db" --compare "$id" --json >"$out/$name.json.tmp"
  mv "$out/$name.json.tmp" "$out/$name.json"
  echo "$out/$name.json (compare $id)"
}

# One from-scratch run: <preset>-scratch-<steps>steps-<arm>-seed<seed>.
scratch_run() {
  local name="$1" preset rest steps arm seed every
  preset="${name%%-scratch-*}"
  rest="${name#*-scratch-}"
  steps="${rest%%steps-*}"
  rest="${rest#*steps-}"
  arm="${rest%-seed*}"
  seed="${rest##*-seed}"
  every=50
  [ "$steps" -ge 1000 ] && every=100
  local how=()
  case "$arm" in
    bf16) how=(--precision bf16) ;;
    uniform-fp4) how=(--precision fp4) ;;
    adaptive-snip | adaptive-min-err | adaptive-hawq) how=(--method "${arm#adaptive-}" --budget 0.75 --replan-every "$every") ;;
    adaptive-snip-noise) how=(--method snip --budget 0.75 --replan-every "$every" --replan-when noise) ;;
    adaptive-snip-floor) how=(--method snip --budget 0.75 --replan-every "$every" --replan-when noise --noise-floor 1.7320508) ;;
    *) die "unknown run $name" ;;
  esac
  log "train $name"
  "$SNIP" train --preset "$preset" --steps "$steps" --batch-size 8 --seq-len 64 --warmup 20 --recipe tensor --seed "$seed" \
    "${how[@]}" --json --out "$work/$name" --db "$db" --name "$name" |
    /usr/bin/python3 -c 'import json, sys
for line in sys.stdin:
    j = json.loads(line)
    keep = {k: j[k] for k in ("step", "train_loss", "val_loss", "fp4_fraction") if j.get(k) is not None}
    print(json.dumps(keep))' >"$out/runs/$name.jsonl.tmp"
  mv "$out/runs/$name.jsonl.tmp" "$out/runs/$name.jsonl"
  echo "$out/runs/$name.jsonl"
}

run_one() {
  local name="$1"
  if checkpoint_names | grep -qx -- "$name"; then checkpoint "$name"
  elif cell_names | grep -qx -- "$name"; then cell "$name"
  elif scratch_names | grep -qx -- "$name"; then scratch_run "$name"
  else die "unknown name $name (see --list)"
  fi
}

for n in "${names[@]}"; do
  case "$n" in
    all) for x in $(checkpoint_names) $(cell_names) $(scratch_names); do run_one "$x"; done ;;
    checkpoints) for x in $(checkpoint_names); do run_one "$x"; done ;;
    cells) for x in $(cell_names); do run_one "$x"; done ;;
    scratch-runs) for x in $(scratch_names); do run_one "$x"; done ;;
    *) run_one "$n" ;;
  esac
done

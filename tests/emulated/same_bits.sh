#!/usr/bin/env bash
# Same bits on every CPU: a short FP4, FP8 and BF16 training (with a resume in the middle) on an
# emulated Haswell (qemu-x86_64 -cpu Haswell: AVX2 + FMA, no AVX-512) must write the checkpoint
# bytes that native runs write on every instruction-set tier this CPU has (SNIP_ISA), and the
# emulated CPU's automatic dispatch must pick the avx2 tier by itself.
# Usage: same_bits.sh QEMU SNIP
set -euo pipefail
qemu="$1"
snip="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export OPENBLAS_CORETYPE=Haswell  # OpenBLAS's FP32 GEMMs on one kernel everywhere (ours are under test)
unset SNIP_ISA SNIP_QGEMM
emulated() { "$qemu" -cpu Haswell "$snip" "$@" 2>/dev/null; }

info="$(emulated info)"
if ! grep -q "^instruction-set tier: avx2 (the CPU's best)" <<<"$info"; then
  echo "FAIL: on the emulated Haswell the automatic dispatch did not pick avx2:" >&2
  echo "$info" >&2
  exit 1
fi

# A tier this CPU lacks is refused, naming its best.
if above="$(SNIP_ISA=avx512 "$qemu" -cpu Haswell "$snip" info 2>&1)"; then
  echo "FAIL: SNIP_ISA=avx512 was accepted on the emulated Haswell" >&2
  exit 1
fi
if ! grep -q "its best tier is avx2" <<<"$above"; then
  echo "FAIL: SNIP_ISA=avx512 on the emulated Haswell did not name its best tier: $above" >&2
  exit 1
fi

native_tiers="$("$snip" info | sed -n 's/^instruction-set tier: \([a-z0-9]*\).*/\1/p')"
all=(portable avx2 avx512 avx512vnni avx512bf16)
tiers=()
for t in "${all[@]}"; do
  tiers+=("$t")
  [ "$t" = "$native_tiers" ] && break
done

# A constant learning rate: 2 steps then a resume to 4 is the trajectory of 4 steps straight.
args=(--preset tiny --batch-size 2 --seq-len 32 --no-db --seed 7 --schedule constant --warmup 0)
status=0
for precision in fp4 fp8 bf16; do
  # Emulated: 2 steps, then a resume to 4.
  emulated train "${args[@]}" --precision "$precision" --steps 2 --out "emu-$precision" >/dev/null
  emulated train --resume "emu-$precision" --steps 4 --no-db >/dev/null
  for t in "${tiers[@]}"; do
    SNIP_ISA="$t" "$snip" train "${args[@]}" --precision "$precision" --steps 4 --out "native-$precision-$t" \
      >/dev/null 2>&1
    for f in model.safetensors optimizer.safetensors; do
      if ! cmp -s "emu-$precision/$f" "native-$precision-$t/$f"; then
        echo "FAIL: $precision: $f differs between the emulated Haswell (avx2, resumed at step 2) and native SNIP_ISA=$t" >&2
        status=1
      fi
    done
  done
  echo "$precision: emulated avx2 (train 2 + resume to 4) = native ${tiers[*]}: $([ $status = 0 ] && echo same bytes || echo DIFFERENT)"
done
exit $status

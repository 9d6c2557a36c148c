#!/bin/sh
# make demo: a realistic BF16 base/target pair (~1% of values change, as between
# two RL steps), encoded, validated, applied and compared byte for byte, then
# patched in place as a rollout worker would.
set -eu
dcr=${1:-build/dcr}
size=${DEMO_SIZE:-256M}
work=$(mktemp -d "${TMPDIR:-/tmp}/dcr-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

echo "== 1. sample pair: $size of BF16 weights, one Adam-like step changing ~1% of values"
$dcr synth "$work/base.safetensors" "$work/target.safetensors" --size "$size" --rate 0.01 --seed 42

echo "== 2. encode"
$dcr encode "$work/base.safetensors" "$work/target.safetensors" -o "$work/step.dcr" \
  --meta base_step=41 --meta target_step=42 -v

echo "== 3. validate (structure, checksums, every chunk; applies to base; produces target)"
$dcr validate "$work/step.dcr" --base "$work/base.safetensors" --target "$work/target.safetensors"

echo "== 4. apply"
$dcr apply "$work/base.safetensors" "$work/step.dcr" -o "$work/rebuilt.safetensors"
cmp "$work/rebuilt.safetensors" "$work/target.safetensors"
echo "rebuilt target is byte-identical to the target"

echo "== 5. applying again to the result is a no-op (a retried job succeeds)"
$dcr apply "$work/rebuilt.safetensors" "$work/step.dcr" -o "$work/again.safetensors"
cmp "$work/again.safetensors" "$work/target.safetensors"

echo "== 6. a wrong base (one byte changed) is refused, and nothing is written"
cp "$work/base.safetensors" "$work/wrong-base.safetensors"
printf '\377' | dd of="$work/wrong-base.safetensors" bs=1 conv=notrunc status=none \
  seek=$(($(wc -c < "$work/base.safetensors") - 100))
if $dcr apply "$work/wrong-base.safetensors" "$work/step.dcr" -o "$work/wrong.safetensors" 2>"$work/err"; then
  echo "error: applying to the wrong base succeeded" >&2; exit 1
fi
sed 's/^/   /' "$work/err"
[ ! -e "$work/wrong.safetensors" ] && echo "   (no output file left behind)"

echo "== 7. on the worker: patch the checkpoint in place (only changed chunks are written,"
echo "   through a crash-safe journal), then once more, as a retried job would"
cp "$work/base.safetensors" "$work/worker.safetensors"
$dcr apply --in-place "$work/worker.safetensors" "$work/step.dcr"
$dcr apply --in-place "$work/worker.safetensors" "$work/step.dcr"
cmp "$work/worker.safetensors" "$work/target.safetensors"
echo "   state ids (dcr id): the worker's checkpoint is now the bundle's target"
$dcr id "$work/worker.safetensors" "$work/target.safetensors" | sed "s|$work/|   |"

echo "== 8. a whole model directory (format 1.1): the same pair saved as 4 shards with index,"
echo "   config and tokenizer files, the target re-sharded; one bundle, one state id"
python3 "$(dirname "$0")/../tests/mkset.py" "$work/base.safetensors" "$work/model-base" --shards 4
python3 "$(dirname "$0")/../tests/mkset.py" "$work/target.safetensors" "$work/model-target" --shards 4 --reverse
$dcr encode "$work/model-base" "$work/model-target" -o "$work/model.dcr"
$dcr apply "$work/model-base" "$work/model.dcr" -o "$work/model-out"
diff -r "$work/model-out" "$work/model-target" && echo "   model-out is model-target, file for file"
$dcr id "$work/model-out" "$work/target.safetensors" | sed "s|$work/|   |"

echo "== 9. summary"
target=$(wc -c < "$work/target.safetensors")
bundle=$(wc -c < "$work/step.dcr")
awk -v t="$target" -v b="$bundle" 'BEGIN {
  printf "target %d bytes, bundle %d bytes: %.3f%% of the target (%.0fx smaller)\n", t, b, 100*b/t, t/b }'
$dcr inspect "$work/step.dcr" | sed -n '1,4p;$p'

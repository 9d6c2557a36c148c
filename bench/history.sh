#!/usr/bin/env bash
# history.sh - extraction time from a history archive against its keyframe
# interval (SPEC.md §19; README "History archives").
#
#   bash bench/history.sh [DCR] [--size 64M] [--steps 100] [--every "0 50 20 10 5"]
#                         [--runs 3] [--dir DIR]
#
# Makes a run of STEPS steps of a SIZE BF16 model (dcr synth for step 0; then
# each step moves about 1% of the BF16 values by one unit in the last place, with
# Debian's python3-numpy), encodes each step's bundle, and for each keyframe
# interval K (0: the first keyframe only) creates a tar archive of the run with
# --keyframe-every K. Reports, per K: the archive's size, the time to create it,
# and the median wall time of `dcr history extract` for the worst step (the last
# one with K-1 bundles after its keyframe; every bundle for K = 0) and for a step
# that is a keyframe. Needs about SIZE x (STEPS / K + 2) of disk for the smallest K.
set -eu
DCR=build/dcr
SIZE=64M STEPS=100 EVERY="0 50 20 10 5" RUNS=3 DIR=
while [ $# -gt 0 ]; do
  case $1 in
    --size) SIZE=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --every) EVERY=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    -*) echo "history.sh: unknown option $1" >&2; exit 2 ;;
    *) DCR=$1; shift ;;
  esac
done
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
[ -n "$DIR" ] || DIR=$(mktemp -d "${TMPDIR:-/tmp}/dcr-history-bench.XXXXXX")
mkdir -p "$DIR"
cd "$DIR"
echo "# dcr history bench: $SIZE BF16, $STEPS steps, $(nproc) CPUs, $(date -u +%Y-%m-%d)"

"$DCR" synth s0.safetensors unused.safetensors --size "$SIZE" --rate 0.01 --seed 7 -q -f
rm -f unused.safetensors
cp s0.safetensors prev.safetensors
for i in $(seq 1 "$STEPS"); do
  /usr/bin/python3 - prev.safetensors next.safetensors "$i" <<'PY'
import struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
start = 8 + struct.unpack("<Q", raw[:8])[0]
v = np.frombuffer(raw, dtype=np.uint16, offset=start).copy()
rng = np.random.default_rng(int(sys.argv[3]))
at = rng.choice(v.size, size=v.size // 100, replace=False)
v[at] += rng.choice(np.array([1, 0xFFFF], dtype=np.uint16), size=at.size)  # +-1 ULP, wrapping as bits
open(sys.argv[2], "wb").write(raw[:start] + v.tobytes())
PY
  "$DCR" encode -q prev.safetensors next.safetensors -o "b$i.dcr" --meta "step=$i" --meta run_id=bench -f
  mv next.safetensors prev.safetensors
done
cp prev.safetensors last.safetensors
bundles=$(for i in $(seq 1 "$STEPS"); do printf 'b%d.dcr ' "$i"; done)
echo "# bundles: $(du -cb b*.dcr | tail -n 1 | cut -f1) bytes in all; step $STEPS's checkpoint: $(stat -c %s last.safetensors) bytes"

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
timed() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }

[ -z "$EVERY" ] || printf '| K | archive | create | extract the worst step | extract a keyframe step |\n|---|---|---|---|---|\n'
for k in $EVERY; do
  every=()
  [ "$k" -gt 0 ] && every=(--keyframe-every "$k")
  rm -f run.tar
  # shellcheck disable=SC2086
  c=$(timed "$DCR" history create run.tar --keyframe s0.safetensors $bundles "${every[@]}" -q --no-sync)
  size=$(stat -c %s run.tar)
  worst=$((k > 0 ? (STEPS + 1) / k * k - 1 : STEPS))
  last=$(for r in $(seq 1 "$RUNS"); do timed "$DCR" history extract run.tar --step "$worst" -o x.safetensors -f -q --no-sync; done | median)
  [ "$worst" != "$STEPS" ] || cmp -s x.safetensors last.safetensors || { echo "history.sh: step $STEPS differs (K=$k)" >&2; exit 1; }
  key=$((k > 0 ? (STEPS / k) * k : 0))
  kt=$(for r in $(seq 1 "$RUNS"); do timed "$DCR" history extract run.tar --step "$key" -o y.safetensors -f -q --no-sync; done | median)
  printf '| %s | %s MiB | %.2f s | %.2f s (step %d: %d bundles) | %.2f s (step %d) |\n' "${k/#0/none}" \
    "$(echo "scale=1; $size / 1048576" | bc)" "$c" "$last" "$worst" $((k > 0 ? k - 1 : STEPS)) "$kt" "$key"
done
rm -f run.tar x.safetensors y.safetensors

# The cost of adding a step (SPEC.md §19.6): the run appended one step at a time,
# to a .tar (in place: the new members and the index slot), and to a .tar.zst and
# a .zip (which are rewritten each time, as any archive was before appends in place). Bytes
# written are the processes' write(2) bytes (wchar in /proc/PID/io, children's
# counted into the shell that waits for them), with fsync as by default.
echo
echo "# history append, one step at a time (every 1 step's bundle: $(stat -c %s b1.dcr) bytes)"
printf '| container | archive at the end | written a step (median) | written / bundle | time a step (median) |\n|---|---|---|---|---|\n'
for c in tar tar.zst zip; do
  rm -f "run.$c"
  "$DCR" history create "run.$c" --keyframe s0.safetensors -q
  : > "steps.$c"
  for i in $(seq 1 "$STEPS"); do
    bash -c 'w0=$(awk "/^wchar/ {print \$2}" /proc/$$/io); t0=$(date +%s%N)
             "$1" history append "$2" "$3" -q || exit 1
             t1=$(date +%s%N); w1=$(awk "/^wchar/ {print \$2}" /proc/$$/io)
             echo "$((w1 - w0)) $(( (t1 - t0) / 1000000 )) $(stat -c %s "$3")"' _ "$DCR" "run.$c" "b$i.dcr" >> "steps.$c"
  done
  "$DCR" history extract "run.$c" --step "$STEPS" -o z.safetensors -f -q
  cmp -s z.safetensors last.safetensors || { echo "history.sh: step $STEPS of run.$c differs" >&2; exit 1; }
  w=$(cut -d' ' -f1 "steps.$c" | median)
  ms=$(cut -d' ' -f2 "steps.$c" | median)
  ratio=$(awk '{ print $1 / $3 }' "steps.$c" | median)
  printf '| %s | %s MiB | %s MiB | %.2f | %d ms |\n' "$c" "$(echo "scale=1; $(stat -c %s "run.$c") / 1048576" | bc)" \
    "$(echo "scale=2; $w / 1048576" | bc)" "$ratio" "$ms"
done
rm -f run.tar run.tar.zst run.zip z.safetensors steps.tar steps.tar.zst steps.zip

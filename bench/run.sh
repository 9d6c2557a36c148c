#!/bin/bash
# bench/run.sh - dcr against its peers on the same generated BF16 pairs, in one run.
#
#   bench/run.sh [--sizes "256M 2G"] [--rates "0.01 0.03 0.05"] [--runs 3] [--slow-runs 1]
#                [--slow-rates "0.01"] [--set-size 2G] [--set-shards 8]
#                [--train-params 16M] [--train-lrs "1.2e-6 4.5e-6"] [--train-pretrain 100]
#                [--only-train]
#
# For each pair it measures bundle size, encode and apply time (median of --runs,
# with min and max; the slow zstd -19 peer uses --slow-runs, and runs only at the
# --slow-rates, default all: minutes per 256 MiB pair here) and peak RSS, for:
#   dcr (all cores and 1 thread), zstd -3 --patch-from, zstd -19 --long=31
#   --patch-from, xdelta3 -9, XOR of the whole file then zstd -3 (Fireworks' ARC2),
# dcr's in-place apply (--verify full and chunk) beside its copy apply,
# with two I/O ceilings (cp of the target; dd of as many zeros into a new file),
# reports throughput as a fraction of this machine's memcpy bandwidth, and adds
# `dcr bench` on the same pair for validate speeds. Then real training pairs:
# bench/train.c pre-trains a --train-params Llama-shaped model with AdamW and
# fine-tunes it one step at each --train-lrs (about 1% and 3% of BF16 values
# change at the defaults), and each published step-0 -> step-1 pair is measured
# against dcr and the fast peers (--only-train: this section alone). Then a sharded model (a
# --set-size pair laid out by tests/mkset.py as --set-shards shards with index,
# config and tokenizer files): the checkpoint set against one bundle per member
# file, sharded the same way, and re-sharded (another order, a tensor moved to
# another shard). Inputs sit in the page cache
# (each is read once before timing). Output: markdown on stdout; progress on
# stderr. Peers come from Debian's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes="256M"; rates="0.01 0.03 0.05"; runs=3; slow_runs=1; slow_rates=""; set_size=2G; set_shards=8
train_params=16M; train_lrs="1.2e-6 4.5e-6"; train_pretrain=100; only_train=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --slow-runs) slow_runs=$2; shift 2 ;;
    --slow-rates) slow_rates=$2; shift 2 ;;
    --set-size) set_size=$2; shift 2 ;;
    --set-shards) set_shards=$2; shift 2 ;;
    --train-params) train_params=$2; shift 2 ;;
    --train-lrs) train_lrs=$2; shift 2 ;;
    --train-pretrain) train_pretrain=$2; shift 2 ;;
    --only-train) only_train=1; sizes=""; shift ;;
    *) echo "usage: bench/run.sh [--sizes LIST] [--rates LIST] [--runs N] [--slow-runs N] [--slow-rates LIST] [--set-size SIZE] [--set-shards N] [--train-params N] [--train-lrs LIST] [--train-pretrain N] [--only-train]" >&2; exit 2 ;;
  esac
done
[ -n "$slow_rates" ] || slow_rates=$rates

need=""
command -v zstd >/dev/null || need="$need zstd"
command -v xdelta3 >/dev/null || need="$need xdelta3"
[ -x /usr/bin/time ] || need="$need time"
if [ -n "$need" ]; then
  echo "bench: installing$need" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
fi
make -s all >&2
dcr=build/dcr
work=$(mktemp -d "${TMPDIR:-/tmp}/dcr-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/xorfiles" bench/xorfiles.c
cc -O2 -o "$work/memcpy_bw" bench/memcpy_bw.c
cc -O2 -pthread -o "$work/train" bench/train.c -lm
bw=$("$work/memcpy_bw")
threads=$(nproc)

# time_runs N PREP CMD... -> "median min max peak_rss_kib" over N runs (seconds).
# Before each run, untimed, PREP (a shell command) runs and dirty pages are written
# back: replacing a file whose pages are still dirty, or writing past the kernel's
# dirty limits, costs a run the writeback of the ones before it.
time_runs() {
  local n=$1 prep=$2; shift 2
  local t rss=0 ts=()
  for _ in $(seq "$n"); do
    sh -c "$prep"
    sync
    /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" || {
      echo "bench: failed: $*" >&2; cat "$work/err" >&2; exit 1; }
    read -r t r < "$work/time"
    ts+=("$t"); [ "$r" -gt "$rss" ] && rss=$r
  done
  printf '%s\n' "${ts[@]}" | sort -g | awk -v rss="$rss" '
    { v[NR] = $1 } END { printf "%s %s %s %d\n", v[int((NR + 1) / 2)], v[1], v[NR], rss }'
}
# time_cmd N OUT CMD...: CMD writes OUT, which each run starts without.
time_cmd() { local n=$1 out=$2; shift 2; time_runs "$n" "rm -f '$out'" "$@"; }
# time_in_place N BASE WORK CMD...: CMD patches WORK, which each run starts as a
# fresh copy of BASE.
time_in_place() { local n=$1 base=$2 w=$3; shift 3; time_runs "$n" "cp '$base' '$w'" "$@"; }

row() { # name size_bytes target_bytes enc(4) app(4) changed
  awk -v name="$1" -v b="$2" -v t="$3" -v em="$4" -v en="$5" -v ex="$6" -v er="$7" \
      -v am="$8" -v an="$9" -v ax="${10}" -v ar="${11}" -v ch="${12}" -v bw="$bw" 'BEGIN {
    gb = t / 1e9
    enc = em > 0 ? sprintf("%.2f (%.2f–%.2f) s, %.2f GB/s = %.1f%% of memcpy", em, en, ex, gb / em, 100 * gb / em / bw) : "n/a"
    app = am > 0 ? sprintf("%.2f (%.2f–%.2f) s, %.2f GB/s = %.1f%% of memcpy", am, an, ax, gb / am, 100 * gb / am / bw) : "n/a"
    printf "| %s | %.0f | %.3f%% | %.2f | %s | %d MiB | %s | %d MiB |\n", name, b, 100 * b / t,
      (ch > 0 ? b / ch : 0), enc, er / 1024, app, ar / 1024 }'
}

# dcr_rows BASE TARGET TARGET_BYTES CHANGED THREADS: dcr's own row, encode and copy
# apply timed on THREADS threads, the output compared with TARGET; leaves the
# bundle in $work/x.dcr.
# With a sixth argument, the bundle is made with `--format` that version (1.1:
# without DELTA_CLASSED, the dcr of before format 1.2).
dcr_rows() {
  local b=$1 t=$2 tbytes=$3 changed=$4 th=$5 fmt=${6:-} e a name="dcr (--threads $th)"
  local opt=()
  [ -z "$fmt" ] || { opt=(--format "$fmt"); name="dcr --format $fmt (--threads $th)"; }
  e=$(time_cmd "$runs" "$work/x.dcr" $dcr encode "$b" "$t" -o "$work/x.dcr" -f -q --threads "$th" "${opt[@]}")
  a=$(time_cmd "$runs" "$work/out" $dcr apply "$b" "$work/x.dcr" -o "$work/out" -f -q --no-sync --threads "$th")
  cmp "$work/out" "$t"
  row "$name" "$(stat -c %s "$work/x.dcr")" "$tbytes" $e $a "$changed"
}

echo "## dcr benchmark — $(date -u +%Y-%m-%d), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), memcpy $bw GB/s"
echo
echo "Median of $runs runs (min–max); zstd -19 median of $slow_runs, at rates $slow_rates only. Peak RSS from /usr/bin/time. dcr $($dcr --version | cut -d' ' -f2); zstd $(zstd --version | sed -n "s/.* v\([0-9.]*\).*/\1/p"); xdelta3 $(xdelta3 -V 2>&1 | head -1 | awk "{print \$3}" | tr -d ,)."
for size in $sizes; do
  for rate in $rates; do
    b="$work/base.st" t="$work/target.st"
    echo "bench: $size at $rate: generating" >&2
    $dcr synth "$b" "$t" --size "$size" --rate "$rate" --seed 7 -q -f
    cat "$b" "$t" > /dev/null
    tbytes=$(stat -c %s "$t")
    changed=$($dcr encode "$b" "$t" -o "$work/x.dcr" -f -v 2>&1 | sed -n 's/.*; \([0-9]*\) of [0-9]* elements changed.*/\1/p')
    echo
    echo "### $size BF16 pair, $rate change rate ($changed of $((tbytes / 2)) elements changed; target $tbytes bytes)"
    echo
    echo "| method | bytes | % of target | bytes per changed element | encode | encode peak RSS | apply | apply peak RSS |"
    echo "|---|---|---|---|---|---|---|---|"
    for th in "$threads" 1; do
      echo "bench: dcr --threads $th" >&2
      dcr_rows "$b" "$t" "$tbytes" "$changed" "$th"
      for level in full chunk; do
        echo "bench: dcr apply --in-place --verify $level --threads $th" >&2
        a=$(time_in_place "$runs" "$b" "$work/w" $dcr apply --in-place "$work/w" "$work/x.dcr" -q --no-sync --verify "$level" --threads "$th")
        cmp "$work/w" "$t"
        row "dcr apply --in-place --verify $level (--threads $th)" "$(stat -c %s "$work/x.dcr")" "$tbytes" 0 0 0 0 $a "$changed"
      done
    done
    echo "bench: dcr --format 1.1" >&2
    dcr_rows "$b" "$t" "$tbytes" "$changed" "$threads" 1.1
    # zstd 1.5 refuses --patch-from inputs over 2 GB ("Can't handle files larger than 2 GB")
    if [ "$tbytes" -gt 2147483648 ] || [ "$(stat -c %s "$b")" -gt 2147483648 ]; then
      echo "| zstd --patch-from | n/a: zstd $(zstd --version | sed -n "s/.* v\([0-9.]*\).*/\1/p") refuses files over 2 GB | | | | | | |"
    else
      echo "bench: zstd -3 --patch-from" >&2
      e=$(time_cmd "$runs" "$work/z3" zstd -q -f -3 --patch-from="$b" "$t" -o "$work/z3")
      a=$(time_cmd "$runs" "$work/out" zstd -q -f -d --patch-from="$b" "$work/z3" -o "$work/out")
      cmp "$work/out" "$t"
      row "zstd -3 --patch-from" "$(stat -c %s "$work/z3")" "$tbytes" $e $a "$changed"
      if [[ " $slow_rates " == *" $rate "* ]]; then
        echo "bench: zstd -19 --long=31 --patch-from" >&2
        e=$(time_cmd "$slow_runs" "$work/z19" zstd -q -f -19 --long=31 --patch-from="$b" "$t" -o "$work/z19")
        a=$(time_cmd "$slow_runs" "$work/out" zstd -q -f -d --long=31 --patch-from="$b" "$work/z19" -o "$work/out")
        cmp "$work/out" "$t"
        row "zstd -19 --long=31 --patch-from" "$(stat -c %s "$work/z19")" "$tbytes" $e $a "$changed"
      fi
    fi
    echo "bench: xdelta3 -9" >&2
    e=$(time_cmd "$runs" "$work/xd" xdelta3 -9 -f -e -s "$b" "$t" "$work/xd")
    a=$(time_cmd "$runs" "$work/out" xdelta3 -f -d -s "$b" "$work/xd" "$work/out")
    cmp "$work/out" "$t"
    row "xdelta3 -9" "$(stat -c %s "$work/xd")" "$tbytes" $e $a "$changed"
    echo "bench: XOR + zstd -3" >&2
    e=$(time_cmd "$runs" "$work/xz" sh -c "'$work/xorfiles' '$b' '$t' | zstd -q -3 -f -o '$work/xz'")
    a=$(time_cmd "$runs" "$work/out" sh -c "zstd -q -d -c '$work/xz' > '$work/x'; '$work/xorfiles' '$b' '$work/x' > '$work/out'")
    cmp "$work/out" "$t"
    row "XOR + zstd -3 (ARC2-style)" "$(stat -c %s "$work/xz")" "$tbytes" $e $a "$changed"
    echo "bench: I/O ceilings" >&2
    e=$(time_cmd "$runs" "$work/copy" cp "$t" "$work/copy")
    row "cp of the target (in-kernel copy)" "$tbytes" "$tbytes" $e 0 0 0 0 "$changed"
    e=$(time_cmd "$runs" "$work/copy" dd if=/dev/zero of="$work/copy" bs=4M count=$((tbytes >> 22)) status=none)
    row "dd bs=4M of zeros (page-cache write)" "$(((tbytes >> 22) << 22))" "$tbytes" $e 0 0 0 0 "$changed"
    echo
    echo "dcr bench on the same pair (in one process; open = structure and every checksum, verify = open then decode every chunk, both GB/s of bundle bytes):"
    echo
    echo '```'
    $dcr bench "$b" "$t" --runs "$runs" --threads "$threads,1"
    echo '```'
  done
done

# ---- real training pairs: consecutive published steps of an AdamW run
# One pre-training run; each learning rate fine-tunes the same state one step
# (train writes OUTDIR/lr-LR/step-000{0,1}, or OUTDIR/step-* for a single rate).
set -- $train_lrs
echo "bench: training a $train_params model (bench/train.c), fine-tuning at $*" >&2
t0=$(date +%s.%N)
"$work/train" --params "$train_params" --pretrain "$train_pretrain" --lr "$(IFS=,; echo "$*")" --steps 1 \
  "$work/trained" 2> "$work/train.log" || { echo "bench: failed: bench/train.c" >&2; cat "$work/train.log" >&2; exit 1; }
t1=$(date +%s.%N)
grep -E '^(train:|step) ' "$work/train.log" >&2
echo
echo "## Real training pairs (bench/train.c: $(sed -n 's/^train: \([0-9]*\) parameters.*: \(vocab.*\); \([0-9]* x [0-9]*\) tokens.*/\1 parameters, \2; \3 tokens per step/p' "$work/train.log"))"
echo
echo "AdamW (betas 0.9/0.95), $train_pretrain pre-training steps at lr 1e-3 (loss $(sed -n 's/^pretrain 1\/.* loss \([0-9.]*\).*/\1/p' "$work/train.log") -> $(grep '^pretrain ' "$work/train.log" | tail -1 | sed -n 's/.* loss \([0-9.]*\).*/\1/p')), then one step at each fine-tuning lr from the same state; BF16 published by round-to-nearest-even of the FP32 master weights. Generated in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }') s on $threads threads. Zstd -19 skipped."
for lr in $train_lrs; do
  d="$work/trained"; [ $# -gt 1 ] && d="$d/lr-$(printf %g "$lr")"
  b="$d/step-0000.safetensors" t="$d/step-0001.safetensors"
  cat "$b" "$t" > /dev/null
  tbytes=$(stat -c %s "$t")
  read -r changed total < <($dcr encode "$b" "$t" -o "$work/x.dcr" -f -v 2>&1 | sed -n 's/.*; \([0-9]*\) of \([0-9]*\) elements changed.*/\1 \2/p') ||
    { echo "bench: failed: $dcr encode $b $t" >&2; exit 1; }
  echo
  echo "### lr $lr: step 0 -> 1, $changed of $total BF16 values changed ($(awk -v c="$changed" -v n="$total" 'BEGIN { printf "%.3f", 100 * c / n }')%; target $tbytes bytes)"
  echo
  echo "| method | bytes | % of target | bytes per changed element | encode | encode peak RSS | apply | apply peak RSS |"
  echo "|---|---|---|---|---|---|---|---|"
  for th in "$threads" 1; do
    echo "bench: lr $lr: dcr --threads $th" >&2
    dcr_rows "$b" "$t" "$tbytes" "$changed" "$th"
  done
  echo "bench: lr $lr: dcr --format 1.1" >&2
  dcr_rows "$b" "$t" "$tbytes" "$changed" "$threads" 1.1
  echo "bench: lr $lr: peers" >&2
  e=$(time_cmd "$runs" "$work/z3" zstd -q -f -3 --patch-from="$b" "$t" -o "$work/z3")
  a=$(time_cmd "$runs" "$work/out" zstd -q -f -d --patch-from="$b" "$work/z3" -o "$work/out")
  cmp "$work/out" "$t"
  row "zstd -3 --patch-from" "$(stat -c %s "$work/z3")" "$tbytes" $e $a "$changed"
  e=$(time_cmd "$runs" "$work/xd" xdelta3 -9 -f -e -s "$b" "$t" "$work/xd")
  a=$(time_cmd "$runs" "$work/out" xdelta3 -f -d -s "$b" "$work/xd" "$work/out")
  cmp "$work/out" "$t"
  row "xdelta3 -9" "$(stat -c %s "$work/xd")" "$tbytes" $e $a "$changed"
  e=$(time_cmd "$runs" "$work/xz" sh -c "'$work/xorfiles' '$b' '$t' | zstd -q -3 -f -o '$work/xz'")
  a=$(time_cmd "$runs" "$work/out" sh -c "zstd -q -d -c '$work/xz' > '$work/x'; '$work/xorfiles' '$b' '$work/x' > '$work/out'")
  cmp "$work/out" "$t"
  row "XOR + zstd -3 (ARC2-style)" "$(stat -c %s "$work/xz")" "$tbytes" $e $a "$changed"
done
[ "$only_train" = 0 ] || exit 0

# ---- a sharded model: one set bundle against one bundle per member file
echo "bench: a $set_size model in $set_shards shards" >&2
$dcr synth "$work/sb.st" "$work/st.st" --size "$set_size" --rate 0.01 --seed 7 -q -f
python3 tests/mkset.py "$work/sb.st" "$work/SB" --shards "$set_shards"
python3 tests/mkset.py "$work/st.st" "$work/ST" --shards "$set_shards"
python3 tests/mkset.py "$work/st.st" "$work/SR" --shards "$set_shards" --reverse --move model.embed_tokens.weight
rm -f "$work/sb.st" "$work/st.st"
echo
echo "## A $set_size model in $set_shards safetensors shards (with index, config and tokenizer files), 1% changed"
for t in ST SR; do
  echo
  [ "$t" = ST ] && echo "Sharded the same way as the base:" || echo "Re-sharded (another order, the embedding moved to the last shard):"
  echo
  echo '```'
  $dcr bench "$work/SB" "$work/$t" --runs "$runs" --threads "$threads"
  echo '```'
done

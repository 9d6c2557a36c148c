#!/bin/bash
# bench/run.sh - dcr against its peers on the same generated BF16 pairs, in one run.
#
#   bench/run.sh [--sizes "256M 2G"] [--rates "0.01 0.03 0.05"] [--runs 3] [--slow-runs 1]
#                [--slow-rates "0.01"] [--set-size 2G] [--set-shards 8]
#
# For each pair it measures bundle size, encode and apply time (median of --runs,
# with min and max; the slow zstd -19 peer uses --slow-runs, and runs only at the
# --slow-rates, default all: minutes per 256 MiB pair here) and peak RSS, for:
#   dcr (all cores and 1 thread), zstd -3 --patch-from, zstd -19 --long=31
#   --patch-from, xdelta3 -9, XOR of the whole file then zstd -3 (Fireworks' ARC2),
# dcr's in-place apply (--verify full and chunk) beside its copy apply,
# with two I/O ceilings (cp of the target; dd of as many zeros into a new file),
# reports throughput as a fraction of this machine's memcpy bandwidth, and adds
# `dcr bench` on the same pair for validate speeds. Then a sharded model (a
# --set-size pair laid out by tests/mkset.py as --set-shards shards with index,
# config and tokenizer files): the checkpoint set against one bundle per member
# file, sharded the same way, and re-sharded (another order, a tensor moved to
# another shard). Inputs sit in the page cache
# (each is read once before timing). Output: markdown on stdout; progress on
# stderr. Peers come from Debian's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes="256M"; rates="0.01 0.03 0.05"; runs=3; slow_runs=1; slow_rates=""; set_size=2G; set_shards=8
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --slow-runs) slow_runs=$2; shift 2 ;;
    --slow-rates) slow_rates=$2; shift 2 ;;
    --set-size) set_size=$2; shift 2 ;;
    --set-shards) set_shards=$2; shift 2 ;;
    *) echo "usage: bench/run.sh [--sizes LIST] [--rates LIST] [--runs N] [--slow-runs N] [--slow-rates LIST] [--set-size SIZE] [--set-shards N]" >&2; exit 2 ;;
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
      e=$(time_cmd "$runs" "$work/x.dcr" $dcr encode "$b" "$t" -o "$work/x.dcr" -f -q --threads "$th")
      a=$(time_cmd "$runs" "$work/out" $dcr apply "$b" "$work/x.dcr" -o "$work/out" -f -q --no-sync --threads "$th")
      cmp "$work/out" "$t"
      row "dcr (--threads $th)" "$(stat -c %s "$work/x.dcr")" "$tbytes" $e $a "$changed"
      for level in full chunk; do
        echo "bench: dcr apply --in-place --verify $level --threads $th" >&2
        a=$(time_in_place "$runs" "$b" "$work/w" $dcr apply --in-place "$work/w" "$work/x.dcr" -q --no-sync --verify "$level" --threads "$th")
        cmp "$work/w" "$t"
        row "dcr apply --in-place --verify $level (--threads $th)" "$(stat -c %s "$work/x.dcr")" "$tbytes" 0 0 0 0 $a "$changed"
      done
    done
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

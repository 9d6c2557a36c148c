#!/usr/bin/env bash
# http.sh - reading a bundle over HTTP range requests (SPEC.md §21; README
# "Remote bundles"), against stock nginx on this machine's loopback interface.
#
#   bash bench/http.sh [DCR] [--size 1G] [--runs 3] [--workers 8] [--dir DIR]
#
# Makes a SIZE BF16 pair (dcr synth, 1% changed) and its bundle, serves the bundle
# from an nginx origin, and reports:
#   1. apply: `dcr apply BASE URL -o /dev/null` against `curl -o local.dcr URL`
#      then `dcr apply BASE local.dcr -o /dev/null` (median wall time of RUNS each;
#      the target streams to /dev/null so that the disk's write speed, the same
#      for both, does not hide the difference; every run still checks the
#      target's hashes, and one run to a file is compared with the target first);
#   2. one tensor: bytes fetched by `dcr apply BASE URL --tensors NAME` against the
#      bundle's size;
#   3. relays: WORKERS concurrent applies through two edge relays (half each) in
#      front of one mid relay and the origin (nginx proxy_cache with the slice
#      module, tests/http/relay.conf.in), each to /dev/null with its hashes
#      checked: the body bytes the origin served, against the bundle's size.
set -eu
DCR=build/dcr
SIZE=1G RUNS=3 WORKERS=8 DIR=
while [ $# -gt 0 ]; do
  case $1 in
    --size) SIZE=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    -*) echo "http.sh: unknown option $1" >&2; exit 2 ;;
    *) DCR=$1; shift ;;
  esac
done
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/tests/http/nginx_lib.sh"
ngx_need http.sh
W=${DIR:-$(mktemp -d "${TMPDIR:-/tmp}/dcr-bench-http.XXXXXX")}
mkdir -p "$W/www"
cleanup() {
  ngx_stop_all
  [ -n "$DIR" ] || rm -rf "$W"
}
trap cleanup EXIT
cd "$W"

now() { date +%s.%N; }
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

"$DCR" synth base.st target.st --size "$SIZE" -q -f
"$DCR" encode base.st target.st -o www/step.dcr -q -f
BUNDLE=$(stat -c %s www/step.dcr)
ngx_up "$W/origin" origin "$W/www"
URL=http://127.0.0.1:$NGX_PORT/step.dcr
echo "# $(nproc) cores; $SIZE BF16 pair, 1% changed; bundle $BUNDLE bytes; nginx on the loopback interface"
"$DCR" apply base.st "$URL" -o out.st -q -f
cmp -s out.st target.st || { echo "http.sh: the output differs from the target" >&2; exit 1; }
rm -f out.st

direct=() two_step=()
for _ in $(seq "$RUNS"); do
  t0=$(now)
  "$DCR" apply base.st "$URL" -o /dev/null -q
  t1=$(now)
  curl -sS -o local.dcr "$URL"
  "$DCR" apply base.st local.dcr -o /dev/null -q
  t2=$(now)
  direct+=("$(echo "$t1 - $t0" | bc)")
  two_step+=("$(echo "$t2 - $t1" | bc)")
done
printf 'apply from the URL:           %.2f s (median of %s)\n' "$(printf '%s\n' "${direct[@]}" | median)" "$RUNS"
printf 'curl whole, then local apply: %.2f s\n' "$(printf '%s\n' "${two_step[@]}" | median)"

NAME=$("$DCR" inspect "$URL" | awk '$1 == "changed" && $NF ~ /layers\.0\.mlp\.down_proj/ {print $NF; exit}')
"$DCR" apply base.st "$URL" --tensors "$NAME" -o slice.st -f -v 2>slice.log >/dev/null
FETCHED=$(sed -n 's/^dcr: fetched \([0-9]*\) of.*/\1/p' slice.log)
echo "one tensor ($NAME): fetched $FETCHED of $BUNDLE bundle bytes ($(echo "scale=1; 100 * $FETCHED / $BUNDLE" | bc)%)"

ngx_up "$W/mid" relay "$(sed -n 's/.*listen 127.0.0.1:\([0-9]*\).*/\1/p' "$W/origin/server.conf")"
MID=$NGX_PORT
ngx_up "$W/edge1" relay "$MID"; E1=$NGX_PORT
ngx_up "$W/edge2" relay "$MID"; E2=$NGX_PORT
: >"$W/origin/access.log"
t0=$(now)
pids=()
for i in $(seq "$WORKERS"); do
  port=$([ $((i % 2)) = 0 ] && echo "$E1" || echo "$E2")
  "$DCR" apply base.st "http://127.0.0.1:$port/step.dcr" -o /dev/null -q &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "http.sh: a worker failed" >&2; exit 1; }; done
t1=$(now)
SERVED=$(awk '{s += $(NF-2)} END {print s + 0}' "$W/origin/access.log")
echo "relays: $WORKERS workers through 2 edges and 1 mid relay in $(printf '%.2f' "$(echo "$t1 - $t0" | bc)") s;" \
     "the origin served $SERVED body bytes = $(echo "scale=2; $SERVED / $BUNDLE" | bc) x the bundle"

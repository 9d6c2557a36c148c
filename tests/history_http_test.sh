#!/usr/bin/env bash
# history_http_test.sh BUILD - dcr history list, verify and extract of archives
# at an http:// URL (SPEC.md §19.4, §21), served by a real nginx: tar, tar.zst
# and zip archives of a file run and of a directory run (directory keyframes)
# give byte for byte what the same commands give on the local file; an early
# step of a large plain tar fetches a small part of it (nginx's access log); a
# server without byte ranges (nginx max_ranges 0) is read in one pass; an
# archive that changes under the reader is DCR_E_CHANGED (the fault server of
# http_test.sh); a 404 is DCR_E_FETCH.
#
# usage: tests/history_http_test.sh BUILD   ($BUILD/dcr, or the program itself)
#
# Prints "ok - NAME" / "not ok - NAME: reason", "# ..." lines with what was
# measured, then "N passed, M failed"; skips (exit 0) without nginx.
set -u

ARG=${1:?usage: history_http_test.sh BUILD}
if [ -d "$ARG" ]; then DCR=$ARG/dcr; else DCR=$ARG; fi
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

. "$HERE/http/nginx_lib.sh"
ngx_require

# shellcheck disable=SC2034  # cli_lib.sh names the work dir after it
NAME=history-http
. "$HERE/cli_lib.sh"

FSPID=
cleanup() {
  ngx_stop_all
  if [ -n "$FSPID" ]; then kill "$FSPID" 2>/dev/null; wait "$FSPID" 2>/dev/null; fi
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
TIMEOUT=()
command -v timeout >/dev/null 2>&1 && TIMEOUT=(timeout 120)
run() { "${TIMEOUT[@]}" "$DCR" "$@" >o 2>e; RC=$?; }

# ---- the runs: 6 steps of a file checkpoint, 3 of a model directory
ck() { printf 'run/step-%04d.safetensors' "$1"; }
"$PY" "$HERE/mkchain.py" run 6 --bytes 65536 --rate 0.02 --seed 21 || exit 3
for i in 1 2 3 4 5 6; do
  parent=()
  [ "$i" -gt 1 ] && parent=(--parent "b$((i - 1)).dcr")
  "$DCR" encode -q "$(ck $((i - 1)))" "$(ck "$i")" -o "b$i.dcr" --meta "step=$i" --meta run_id=run-h \
    "${parent[@]}" || exit 3
done
"$DCR" synth d0.st d1.st --size 512K --seed 23 -q || exit 3
"$PY" "$HERE/mkset.py" d0.st D0 --shards 3 && "$PY" "$HERE/mkset.py" d1.st D1 --shards 3 --config '{"lr": 2}' &&
  "$PY" "$HERE/mkset.py" d1.st D2 --shards 3 --move model.embed_tokens.weight --config '{"lr": 3}' || exit 3
for i in 1 2; do
  "$DCR" encode -q "D$((i - 1))" "D$i" -o "d$i.dcr" --meta "step=$i" --meta run_id=run-d || exit 3
done
mkdir www
for c in tar tar.zst zip; do
  "$DCR" history create "www/run.$c" --keyframe "$(ck 0)" b1.dcr b2.dcr b3.dcr b4.dcr b5.dcr b6.dcr \
    --keyframe-every 3 -q &&
    "$DCR" history create "www/dir.$c" --keyframe D0/ d1.dcr d2.dcr -q || exit 3
done
# a large plain tar: 20 steps of 2 MiB, a keyframe every 2 steps (about 25 MB)
"$PY" "$HERE/mkchain.py" big 20 --bytes 2097152 --rate 0.05 --seed 22 || exit 3
for i in $(seq 1 20); do
  "$DCR" encode -q "big/step-$(printf %04d $((i - 1))).safetensors" "big/step-$(printf %04d "$i").safetensors" \
    -o "g$i.dcr" --meta "step=$i" || exit 3
done
"$DCR" history create www/big.tar --keyframe big/step-0000.safetensors $(for i in $(seq 1 20); do printf 'g%d.dcr ' "$i"; done) \
  --keyframe-every 2 -q || exit 3
cp www/run.tar www/run.tar.next && "$PY" - www/run.tar.next <<'PY' || exit 3
import sys  # the same archive, one byte of its last bundle changed: another object
f = open(sys.argv[1], "r+b"); f.seek(-2048, 2); b = f.read(1); f.seek(-1, 1); f.write(bytes([b[0] ^ 1]))
PY

mkdir ngx
ngx_up ngx/origin origin www && PORT=$NGX_PORT || { echo "not ok - setup: nginx"; exit 1; }
U=http://127.0.0.1:$PORT
"$PY" "$HERE/http/faultserver.py" --root www --log fs.log --stall-seconds 30 >fs.port 2>fs.err &
FSPID=$!
for _ in $(seq 100); do [ -s fs.port ] && break; sleep 0.05; done
F=http://127.0.0.1:$(head -1 fs.port)

# served PATH: body bytes nginx has sent for PATH so far (its access log)
served() { awk -v p="GET $1" 'index($0, p " ") == 1 { s += $5 } END { print s + 0 }' ngx/origin/access.log; }
note() { echo "# $*"; }

t_agree() {
  local a=$1 steps=$2 url s
  url=$U/$a
  for s in list verify; do
    run history "$s" "$url" --json; local rc=$RC; sed "s|$url|ARCHIVE|" o >rem.o
    run history "$s" "www/$a" --json; sed "s|www/$a|ARCHIVE|" o >loc.o
    [ "$rc" = 0 ] && [ "$RC" = 0 ] || { fail "$s: exit $rc over HTTP, $RC on the file: $(shown e)"; return; }
    cmp -s rem.o loc.o || { fail "$s --json differs: $(shown rem.o)"; return; }
  done
  run history list "$url"; want_rc 0 "list" || return
  head -1 o | grep -qF "$url: history archive" || fail "list names the URL: $(shown o)"
  for s in $(seq 0 "$steps"); do
    rm -rf rem.out loc.out
    run history extract "$url" --step "$s" -o rem.out -q; want_rc 0 "extract --step $s over HTTP" || return
    run history extract "www/$a" --step "$s" -o loc.out -q; want_rc 0 "extract --step $s" || return
    diff -r rem.out loc.out >/dev/null || { fail "step $s over HTTP differs from the local extract"; return; }
  done
  rm -rf rem.out loc.out
}
for c in tar tar.zst zip; do
  tcase "$c, file keyframes: list, verify, every step extracted as from the file" t_agree "run.$c" 6
  tcase "$c, a directory keyframe: list, verify, every step extracted as from the file" t_agree "dir.$c" 2
done

# fetched LIMIT WHAT ARGS...: dcr ARGS succeeds, and nginx sends less than LIMIT
# bytes of big.tar for it
fetched() {
  local limit=$1 what=$2 before n
  shift 2
  before=$(served /big.tar)
  run "$@"; want_rc 0 "$what" || return
  n=$(($(served /big.tar) - before))
  note "$what of a $(stat -c %s www/big.tar)-byte tar: $n bytes fetched"
  [ "$n" -lt "$limit" ] || fail "$what fetched $n bytes"
}
t_partial() {
  local size
  size=$(stat -c %s www/big.tar)
  fetched $((size / 20)) list history list "$U/big.tar" || return
  fetched $((size / 4)) "extract --step 1" history extract "$U/big.tar" --step 1 -o g1.out -q || return
  cmp -s g1.out big/step-0001.safetensors || fail "step 1 differs"
  fetched $((size / 4)) "extract --step 19 (keyframe 18)" history extract "$U/big.tar" --step 19 -o g19.out -q &&
    cmp -s g19.out big/step-0019.safetensors || fail "step 19 differs"
}
tcase "a large plain tar: list reads the index, extract an early or a late step a small part" t_partial

t_norange() {
  local c s
  for c in tar tar.zst zip; do
    run history verify "$U/norange/run.$c"; want_rc 0 "verify $c without ranges" || return
    for s in 2 6; do
      run history extract "$U/norange/run.$c" --step "$s" -o nr.out -f -q
      want_rc 0 "extract $c --step $s without ranges" || return
      cmp -s nr.out "$(ck "$s")" || { fail "$c step $s without ranges differs"; return; }
    done
    run history extract "$U/norange/dir.$c" --step 2 -o nrd -f -q
    want_rc 0 "extract dir.$c without ranges" && diff -r nrd D2 >/dev/null || fail "dir.$c step 2 without ranges differs"
  done
  grep -q ' 206 ' ngx/origin/access.log || fail "nginx never answered 206"
  awk '$2 ~ /^\/norange\// && $4 != 200 { bad = 1 } END { exit bad }' ngx/origin/access.log ||
    fail "/norange/ answered other than 200"
}
tcase "a server without byte ranges (200, whole): read in one pass" t_norange

t_change() {
  # change/N: the first N requests get run.tar, later ones run.tar.next
  run history extract "$F/change/2/run.tar" --step 6 -o ch.out
  want_rc 3 "changed under extract" && has e DCR_E_CHANGED "extract"
  [ ! -e ch.out ] || fail "an output was written"
  run history verify "$F/change/1/run.tar"
  want_rc 3 "changed under verify" && has e DCR_E_CHANGED "verify"
}
tcase "an archive that changes between requests: DCR_E_CHANGED, nothing written" t_change

t_errors() {
  run history list "$U/missing.tar"
  want_rc 3 "a 404" && has e DCR_E_FETCH "a 404" && has e "HTTP 404" "says the status" &&
    has e "$U/missing.tar" "names the URL"
  run history list "$U/run.tar?X-Amz-Signature=secret"
  want_rc 0 "a query" && ! grep -q secret o e || fail "the query was printed"
  run history create "$U/new.tar" --keyframe "$(ck 0)"
  want_rc 2 "create to a URL" && has e "local file" "says why"
  run history append "$U/run.tar" b1.dcr
  want_rc 2 "append to a URL" && has e "local file" "says why"
  run history list "$U/run.tar" --header 'Authorization: Bearer t0k' --http-deadline 30
  want_rc 0 "--header and --http-deadline" && grep -q 'authorization=Bearer t0k' ngx/origin/headers.log ||
    fail "the header did not reach nginx"
}
tcase "404, a query kept out of messages, create/append refuse URLs, HTTP options" t_errors

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]

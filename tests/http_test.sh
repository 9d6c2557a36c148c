#!/usr/bin/env bash
# http_test.sh BUILD - dcr reading bundles over HTTP (dcr apply/validate/inspect URL):
# an nginx origin, a fault-injecting origin (tests/http/faultserver.py: dropped,
# reset and stalled connections, 503s, a server that ignores Range, one that
# answers the wrong range, an object that changes under the reader, redirects,
# a bearer token, 404), hostile origins (200s announcing gigabytes, a 503 whose
# body never ends, a byte a second, a redirect to another origin: each must end
# fast, with its code, having kept little), partial fetches with --tensors, and
# a two-level tree of caching nginx relays (slice module) in front of one origin.
#
# usage: tests/http_test.sh BUILD      ($BUILD/dcr is the program; a path to the
#                                       program itself works too)
#
# Prints "ok - NAME" / "not ok - NAME: reason" per case, "# ..." lines with the
# numbers measured, then "N passed, M failed"; exits 1 if a case failed.  Skips
# (one "skip" line, exit 0) when nginx is not installed (or NGINX=none).  Every
# server it starts is stopped on exit.  Needs bash, coreutils, python3
# (/usr/bin/python3 preferred), nginx with the slice module (Debian's has it);
# the https case also needs openssl and dcr's --cacert.
set -u

ARG=${1:?usage: http_test.sh BUILD}
if [ -d "$ARG" ]; then DCR=$ARG/dcr; else DCR=$ARG; fi
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
FAULTSERVER=$HERE/http/faultserver.py

. "$HERE/http/nginx_lib.sh"
ngx_require

# shellcheck disable=SC2034  # cli_lib.sh names the work dir after it
NAME=http
. "$HERE/cli_lib.sh"          # W (the work dir, our cwd), tcase/fail/run/want_rc/has

FSPID=
cleanup() {
  local j
  for j in $(jobs -p); do kill "$j" 2>/dev/null; done
  ngx_stop_all
  if [ -n "$FSPID" ]; then kill "$FSPID" 2>/dev/null; wait "$FSPID" 2>/dev/null; fi
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

TIMEOUT=()
command -v timeout >/dev/null 2>&1 && TIMEOUT=(timeout 120)
# run ARGS: dcr with stdout in o, stderr in e, exit status in RC; every output is
# also kept in all.txt (for the checks that no secret is ever printed)
run() {
  "${TIMEOUT[@]}" "$DCR" "$@" >o 2>e; RC=$?
  { echo "== dcr $1 (exit $RC)"; cat o e; } >>all.txt   # not the arguments: they hold the secrets
}
# vline: parse e's "dcr: fetched X of Y bundle bytes in N requests, R retries"
# into FETCHED TOTAL REQS RETRIES (fail if it is not there)
vline() {
  local l
  FETCHED='' TOTAL='' REQS='' RETRIES=''
  # (a parenthesis with the sizes in words may follow "bundle bytes")
  l=$(sed -nE 's/^dcr: fetched ([0-9]+) of ([0-9]+) bundle bytes( \([^)]*\))? in ([0-9]+) requests?, ([0-9]+) retr(y|ies).*/\1 \2 \4 \5/p' e | tail -1)
  [ -n "$l" ] || { fail "no 'dcr: fetched X of Y bundle bytes in N requests, R retries' line in stderr: $(shown e)"; return 1; }
  read -r FETCHED TOTAL REQS RETRIES <<<"$l"
  [ "$TOTAL" = "$BSIZE" ] || fail "the -v line names $TOTAL bundle bytes, the bundle has $BSIZE"
}
# same FILE WHAT: FILE is the target, byte for byte
same() { cmp -s "$1" target.st || fail "$2: $1 differs from the target"; }
# nothing DIR WHAT: a failed apply left nothing in DIR (no output, no temp file)
nothing() {
  local left; left=$(ls -A "$1" 2>/dev/null)
  [ -z "$left" ] || fail "$2: left behind in $1: $left"
}
# fetch_err CODE WHAT: exit 3, "dcr: <url>: CODE" on stderr
fetch_err() {
  want_rc 3 "$2"
  has e "$1" "$2"
}
note() { echo "# $*"; }

# ---------------------------------------------------------------------------
# a sample pair (16 MiB of BF16, half the elements changed: a ~3 MiB bundle in
# 256 KiB chunks, so that it spans several 1 MiB cache slices and a tensor's
# chunks are a small part of it)
"$DCR" synth base.st target.st --size 16M --rate 0.5 --seed 7 -q &&
  "$DCR" encode -q base.st target.st -o step.dcr --chunk-size 256K &&
  mkdir www od && cp step.dcr www/step.dcr || { echo "not ok - setup: synth/encode"; exit 1; }
BSIZE=$(stat -c %s step.dcr)
# flip FILE OFFSET: one bit of FILE changed (OFFSET < 0 counts from the end)
flip() {
  "$PY" -c 'import sys
f = open(sys.argv[1], "r+b"); at = int(sys.argv[2]); f.seek(at, 0 if at >= 0 else 2)
b = f.read(1); f.seek(-1, 1); f.write(bytes([b[0] ^ 1]))' "$1" "$2"
}
# the same bundle changed in its middle (same size, its own ETag): what change/N
# serves after N requests
cp step.dcr www/step.dcr.next && flip www/step.dcr.next $((BSIZE / 2))
note "bundle: $BSIZE bytes for a $(stat -c %s target.st)-byte target"
# a wrong base: the base with its last byte changed
cp base.st wrong.st && flip wrong.st -1
# a changed tensor of median payload, from dcr inspect --json
"$DCR" inspect --json step.dcr >insp.json 2>/dev/null
ONE=$(jget insp.json '(lambda c: c[len(c) // 2][1])(sorted((t["payload_bytes"], t["name"]) for t in j["tensors"] if t["status"] == "changed" and t["payload_bytes"] > 0))' 2>/dev/null)

# servers: an nginx origin; a fault server; the cache tree's own origin, a mid
# relay and two edges
mkdir ngx
ngx_up ngx/origin origin www && OPORT=$NGX_PORT || { echo "not ok - setup: origin nginx"; exit 1; }
ngx_up ngx/torigin origin www && TPORT=$NGX_PORT &&
  ngx_up ngx/mid relay "$TPORT" && MPORT=$NGX_PORT &&
  ngx_up ngx/edge1 relay "$MPORT" && E1PORT=$NGX_PORT &&
  ngx_up ngx/edge2 relay "$MPORT" && E2PORT=$NGX_PORT || { echo "not ok - setup: cache tree"; exit 1; }
"$PY" "$FAULTSERVER" --root www --log fs.log --stall-seconds 30 >fs.port 2>fs.err &
FSPID=$!
for _ in $(seq 100); do [ -s fs.port ] && break; sleep 0.05; done
FPORT=$(head -1 fs.port)
[ -n "$FPORT" ] || { echo "not ok - setup: fault server: $(cat fs.err)"; exit 1; }
U=http://127.0.0.1:$OPORT/step.dcr
F=http://127.0.0.1:$FPORT

# ---------------------------------------------------------------------------
# 1. an nginx origin
t_full() {
  run apply base.st "$U" -o out.st -v; want_rc 0 "apply URL"; same out.st "apply URL"
  vline && note "full apply: fetched $FETCHED of $TOTAL bytes in $REQS requests, $RETRIES retries"
  [ -z "$FETCHED" ] || [ "$FETCHED" -ge "$BSIZE" ] ||
    note "(a full apply fetched less than the bundle: $FETCHED of $BSIZE)"
  [ -z "$RETRIES" ] || [ "$RETRIES" = 0 ] || fail "retries against a healthy origin: $RETRIES"
  rm -f out.st
  run apply base.st "$U" -o out.st --threads 4; want_rc 0 "apply URL --threads 4"; same out.st "--threads 4"
  rm -f out.st
}
t_verify() {
  local v
  for v in chunk none full; do
    run apply base.st "$U" -o out-$v.st --verify $v; want_rc 0 "--verify $v"; same out-$v.st "--verify $v"
    rm -f out-$v.st
  done
}
t_inplace() {
  cp base.st ip.st
  run apply --in-place ip.st "$U"; want_rc 0 "--in-place"; same ip.st "--in-place"
  run apply --in-place ip.st "$U"; want_rc 0 "--in-place again (already the target)"; same ip.st "again"
  rm -f ip.st
}
t_validate() {
  run validate "$U"; want_rc 0 "validate URL"
  run validate "$U" --base base.st --target target.st; want_rc 0 "validate URL --base --target"
  run validate "$U" --base wrong.st; want_rc 1 "validate URL --base (a wrong base)"
  has e DCR_E_BASE_MISMATCH "validate URL --base (a wrong base)"
  run apply wrong.st "$U" -o od/out.st; want_rc 1 "apply URL to a wrong base"
  has e DCR_E_BASE_MISMATCH "apply URL to a wrong base"; nothing od "a wrong base"
}
t_inspect() {
  run inspect "$U"; want_rc 0 "inspect URL"; has o "DCR bundle" "inspect URL"
  run inspect --json "$U"; want_rc 0 "inspect --json URL"
  local n; n=$(jget o 'j["bundle_size"]' 2>/dev/null)
  [ "$n" = "$BSIZE" ] || fail "inspect --json URL: bundle_size $n, the bundle has $BSIZE"
}
# a signed bundle over HTTP: the signature checked before anything is written
t_signed() {
  "$DCR" keygen trainer >/dev/null 2>&1 && cp step.dcr www/signed.dcr &&
    "$DCR" sign www/signed.dcr --key trainer.key --base base.st --target target.st -q ||
    { fail "could not sign a bundle"; return; }
  run apply base.st "http://127.0.0.1:$OPORT/signed.dcr" -o out.st --require-signature trainer.pub
  want_rc 0 "a signed bundle from a URL, --require-signature"; same out.st "signed"
  rm -f out.st
  run apply base.st "$U" -o od/out.st --require-signature trainer.pub
  want_rc 1 "an unsigned bundle from a URL, --require-signature"
  has e DCR_E_SIGNATURE "an unsigned bundle from a URL"; nothing od "unsigned"
}
t_query() {
  run apply base.st "$U?X-Amz-Signature=secret&X-Amz-Credential=cred" -o out.st -v
  want_rc 0 "a URL with a query string"; same out.st "query string"
  ! grep -qe secret -e X-Amz o e || fail "the query string was printed: $(shown e)"
  rm -f out.st
  run validate "$U?X-Amz-Signature=secret"; want_rc 0 "validate URL?query"
  ! grep -qe secret o e || fail "validate printed the query string: $(shown o)"
  run apply base.st "http://127.0.0.1:$OPORT/missing.dcr?X-Amz-Signature=secret" -o od/out.st -v
  fetch_err DCR_E_FETCH "a 404 URL with a query string"; nothing od "404"
  has e "dcr: " "the 404's message"
  ! grep -qe secret o e || fail "a failing apply printed the query string: $(shown e)"
  run apply base.st "http://alice:pw-secret@127.0.0.1:$OPORT/missing.dcr" -o od/out.st
  fetch_err DCR_E_FETCH "a 404 URL with userinfo"; nothing od "404 with userinfo"
  ! grep -qe pw-secret -e alice o e || fail "a failing apply printed the userinfo: $(shown e)"
  run inspect "http://127.0.0.1:$OPORT/missing.dcr?X-Amz-Signature=secret"
  [ "$RC" != 0 ] || fail "inspect of a 404 URL succeeded"
  ! grep -qe secret o e || fail "inspect printed the query string: $(shown e)"
}
tcase "origin: apply URL (-v line, --threads 4)" t_full
tcase "origin: --verify chunk|none|full" t_verify
tcase "origin: --in-place, twice" t_inplace
tcase "origin: validate URL (with --base/--target; a wrong base)" t_validate
tcase "origin: inspect URL shows the bundle and its size" t_inspect
tcase "origin: --require-signature on a URL" t_signed
tcase "origin: query string and userinfo never printed (success and 404)" t_query

# the Python apply from a URL, which fetches and applies at once (chunks checked
# and staged as they arrive, written when all passed): exact against the file's
# apply; a corrupt last chunk (mid-stream) and a wrong base refused with their
# codes, the caller's arrays untouched (tests/http/stream_apply.py)
t_stream() {
  # a sanitized libdcr cannot be loaded into an uninstrumented Python (the ASan
  # runtime must come first); the plain pass runs this
  if ldd "$(dirname "$DCR")/libdcr.so.1" 2>/dev/null | grep -q libasan; then
    note "skipped: libdcr is built with ASan"
    return
  fi
  PYTHONPATH=$HERE/../python DCR_LIBRARY=$(dirname "$DCR")/libdcr.so.1 "${TIMEOUT[@]}" "$PY" \
    "$HERE/http/stream_apply.py" base.st target.st step.dcr www "http://127.0.0.1:$OPORT" >stream.out 2>&1 ||
    fail "$(tail -5 stream.out)"
  sed 's/^/# /' stream.out
}
# the chunk sections come as one stream in file order (SPEC.md §21.3, informative),
# so that the apply's checking pass works on each as it arrives: a bundle of more
# than two 4 MiB spans, which the reader once asked as 4 MiB requests side by side,
# arrives mostly in one response, and the apply is exact (format 1.1: its bundle of
# this pair is 11 MB, where 1.3's is just under 8 MiB)
t_stream_order() {
  "$DCR" synth big0.st big1.st --size 64M --rate 0.5 --seed 7 -q &&
    "$DCR" encode -q big0.st big1.st -o www/big.dcr --format 1.1 ||
    { fail "synth/encode of the 64 MiB pair"; return; }
  local size; size=$(stat -c %s www/big.dcr)
  run apply big0.st "http://127.0.0.1:$OPORT/big.dcr" -o od/big.st -v
  want_rc 0 "apply a $size-byte bundle"
  cmp -s od/big.st big1.st || fail "the $size-byte bundle's apply differs from its target"
  local most; most=$(awk '$2 == "/big.dcr" && $5 > m { m = $5 } END { print m + 0 }' ngx/origin/access.log)
  local reqs; reqs=$(awk '$2 == "/big.dcr" { n++ } END { print n + 0 }' ngx/origin/access.log)
  note "stream: a $size-byte bundle in $reqs requests, the largest response $most bytes"
  [ "$size" -gt $((8 << 20)) ] || fail "the 64 MiB pair's bundle has $size bytes, not more than 8 MiB"
  # the next request starts before the current one ends (timing: a slow reader,
  # under ASan, may split the stream once), so the test asks for more than half of
  # the bundle in one response, where 4 MiB requests side by side gave at most 4 MiB
  [ "$most" -gt $((size / 2)) ] ||
    fail "the largest response was $most bytes of a $size-byte bundle: its chunks are not one stream"
  rm -f od/big.st big0.st big1.st www/big.dcr
}
tcase "origin: the chunks of an 8 MiB bundle come as one stream" t_stream_order
if "$PY" -c 'import numpy' 2>/dev/null; then
  tcase "origin: Python apply_to from a URL: exact; corrupt chunk, wrong base: arrays untouched" t_stream
else
  echo "ok - skip: $PY has no numpy (sh tools/deps.sh): the Python apply from a URL is not run"
fi

# ---------------------------------------------------------------------------
# 2. the fault server
# recovers FAULT N [ARGS]: apply through /FAULT/N/step.dcr succeeds, byte-identical
# target, with retries in the -v line
recovers() {
  local fault=$1 n=$2; shift 2
  local t0=$SECONDS
  run apply base.st "$F/$fault/$n/step.dcr" -o od/out.st -v "$@"
  want_rc 0 "$fault/$n"; same od/out.st "$fault/$n"
  vline && note "$fault/$n: fetched $FETCHED of $TOTAL bytes in $REQS requests, $RETRIES retries, $((SECONDS - t0)) s"
  [ -z "$RETRIES" ] || [ "$RETRIES" -gt 0 ] || fail "$fault/$n: no retries reported"
  rm -f od/out.st
}
t_drop() { recovers drop 2; }
t_503() { recovers 503 3; }
t_reset() { recovers reset 2; }
t_503_gives_up() {
  local t0=$SECONDS
  run apply base.st "$F/503/100/step.dcr" -o od/out.st --http-retries 2
  fetch_err DCR_E_FETCH "503 more often than --http-retries"; nothing od "503 x100"
  has e 503 "the 503 named"
  note "503 x100 with --http-retries 2: gave up after $((SECONDS - t0)) s"
  # an existing OUT (with -f) is left as it was
  echo "keep me" >keep.st
  run apply base.st "$F/503/100/step.dcr" -o keep.st -f --http-retries 1
  fetch_err DCR_E_FETCH "503 x100 onto an existing OUT"
  [ "$(cat keep.st)" = "keep me" ] || fail "a failed apply -f changed the existing OUT"
  rm -f keep.st
}
t_norange() {
  run apply base.st "$F/norange/0/step.dcr" -o od/out.st -v
  want_rc 0 "a server that ignores Range"; same od/out.st "norange"
  vline && note "norange: fetched $FETCHED of $TOTAL bytes in $REQS requests, $RETRIES retries"
  rm -f od/out.st
}
t_stall() {
  local t0=$SECONDS
  recovers stall 1 --http-timeout 2
  [ $((SECONDS - t0)) -lt 25 ] || fail "stall: took $((SECONDS - t0)) s with --http-timeout 2"
}
# the stalled transfer is given up about --http-timeout after its last byte: the
# request for the rest of its body (other requests go on meanwhile) reaches the
# server within timeout + 3 s (backoff and slack) of the stalled answer's last
# byte (times from the fault server's log)
t_stall_timing() {
  local gap
  gap=$(awk -v size="$BSIZE" '$2 == "/stall/1/step.dcr" { t = substr($6, 3) + 0
               split(substr($3, 7), r, "-"); first = r[1] == "" ? size - r[2] : r[1] + 0
               if ($7 == "stall") { s = t; rest = first + $5 }
               else if (s != "" && g == "" && first == rest) g = t - s }
             END { if (g != "") printf "%.1f", g }' fs.log)
  [ -n "$gap" ] || { fail "no stalled answer and request for its rest in the fault server's log"; return; }
  note "stall: the rest asked $gap s after the stalled answer's last byte (--http-timeout 2)"
  awk -v g="$gap" 'BEGIN { exit !(g < 5) }' ||
    fail "the stalled transfer was given up $gap s after its last byte, --http-timeout is 2"
}
t_change() {
  run apply base.st "$F/change/1/step.dcr" -o od/out.st -v
  fetch_err DCR_E_CHANGED "the bundle changed after the first request"; nothing od "change"
  # a partial fetch takes several requests whatever the bundle's size
  [ -z "$ONE" ] && return
  run apply base.st "$F/change/1/step.dcr?case=tensors" --tensors "$ONE" -o od/sel.st
  fetch_err DCR_E_CHANGED "--tensors: the bundle changed after the first request"; nothing od "change, --tensors"
}
t_wrongrange() {
  run apply base.st "$F/wrongrange/1000/step.dcr" -o od/out.st
  fetch_err DCR_E_FETCH "a 206 with the wrong Content-Range"; nothing od "wrongrange"
}
t_redirect() {
  run apply base.st "$F/redirect/1000/step.dcr" -o od/out.st -v
  want_rc 0 "302 to the bundle"; same od/out.st "redirect"
  vline && note "redirect: fetched $FETCHED of $TOTAL bytes in $REQS requests, $RETRIES retries"
  rm -f od/out.st
}
t_auth() {
  local A=$F/auth/0/step.dcr
  run apply base.st "$A" -o od/out.st
  fetch_err DCR_E_FETCH "no Authorization header"; has e 401 "the 401 named"; nothing od "401"
  run apply base.st "$A" -o od/out.st --header 'Authorization: Bearer wrong-token-x'
  fetch_err DCR_E_FETCH "a wrong token"; nothing od "wrong token"
  ! grep -q wrong-token-x o e || fail "a header value was printed: $(shown e)"
  run apply base.st "$A" -o od/out.st -v --header 'Authorization: Bearer s3cr3t-token'
  want_rc 0 "--header Authorization"; same od/out.st "--header"; rm -f od/out.st
  run apply base.st "$A" -o od/out.st -v --header 'X-Trace: 1' --header 'Authorization: Bearer s3cr3t-token'
  want_rc 0 "two --header"; same od/out.st "two --header"; rm -f od/out.st
  DCR_HTTP_HEADERS='Authorization: Bearer s3cr3t-token' run apply base.st "$A" -o od/out.st -v
  want_rc 0 "DCR_HTTP_HEADERS"; same od/out.st "DCR_HTTP_HEADERS"; rm -f od/out.st
  DCR_HTTP_HEADERS=$'X-Trace: 1\nAuthorization: Bearer s3cr3t-token' run apply base.st "$A" -o od/out.st -v
  want_rc 0 "DCR_HTTP_HEADERS, two lines"; same od/out.st "DCR_HTTP_HEADERS, two lines"; rm -f od/out.st
  DCR_HTTP_HEADERS='Authorization: Bearer s3cr3t-token' run validate "$A"
  want_rc 0 "validate with DCR_HTTP_HEADERS"
  run inspect "$A" --header 'Authorization: Bearer s3cr3t-token'
  want_rc 0 "inspect --header"
  ! grep -q s3cr3t all.txt || fail "the token appears in an output: $(grep -m1 s3cr3t all.txt)"
}
t_404() {
  run apply base.st "$F/404/0/step.dcr" -o od/out.st
  fetch_err DCR_E_FETCH "404"; has e 404 "the 404 named"; nothing od "404"
  run validate "$F/404/0/step.dcr"; fetch_err DCR_E_FETCH "validate 404"
}
# ---- hostile origins: each ends fast, with its own code, having kept little
# run_in SECONDS ARGS: run, killed after SECONDS, its files capped at 256 MiB (a
# regression must not fill the disk with an origin's gigabytes); MS is how long
# it took
run_in() {
  local t0 TIMEOUT=(timeout -s KILL "$1" bash -c 'ulimit -f 262144 && exec "$@"' run_in); shift
  t0=$(date +%s%N)
  run "$@"
  MS=$(( ($(date +%s%N) - t0) / 1000000 ))
}
# served CASE: the body bytes the fault server's socket accepted for the
# requests whose path holds CASE (an answer is logged when it ends: waits for one)
served() {
  local n
  for _ in $(seq 50); do grep -q -- "$1" fs.log && break; sleep 0.1; done
  sleep 0.3
  n=$(awk -v c="$1" 'index($2, c) { s += $5 } END { printf "%d", s }' fs.log)
  echo "$n"
}
# little CASE WHAT: at most 64 MiB were served for CASE (a socket's buffers and
# more: the body is announced in gigabytes)
little() {
  local n; n=$(served "$1")
  note "$2: $n body bytes served, ${MS} ms"
  [ "$n" -le $((64 << 20)) ] || fail "$2: the server sent $n body bytes before dcr stopped"
}
# a 200 announcing 2 GiB: random bytes, refused at the first (the walk's
# DCR_E_MAGIC); the bundle, then zeros: refused where the bytes stop being a
# bundle, with the walk's code for such a file
t_announce() {
  head -c 1048576 /dev/urandom >www/junk.bin
  run_in 20 inspect "$F/announce/2147483648/junk.bin?case=junk-inspect"
  want_rc 1 "200 of random bytes: inspect"; has e DCR_E_MAGIC "200 of random bytes: inspect"
  little case=junk-inspect "200 of random bytes, 2 GiB announced: inspect"
  run_in 20 validate "$F/announce/2147483648/junk.bin?case=junk-validate"
  want_rc 1 "200 of random bytes: validate"; has e DCR_E_MAGIC "200 of random bytes: validate"
  little case=junk-validate "200 of random bytes: validate"
  { cat step.dcr; head -c 1048576 /dev/zero; } >zeros.dcr
  "$DCR" validate zeros.dcr >o 2>e
  local code; code=$(grep -o 'DCR_E_[A-Z_]*' e | head -1)
  [ -n "$code" ] || { fail "validate of the bundle followed by zeros found no error: $(shown e)"; return; }
  run_in 20 validate "$F/announce/2147483648/step.dcr?case=zeros-validate"
  want_rc 1 "200 of the bundle then zeros: validate"; has e "$code" "the bundle then zeros: validate"
  little case=zeros-validate "200 of the bundle then zeros: validate ($code)"
  run_in 20 apply base.st "$F/announce/2147483648/step.dcr?case=zeros-apply" -o od/out.st
  want_rc 1 "200 of the bundle then zeros: apply"; has e "$code" "the bundle then zeros: apply"
  nothing od "200 of the bundle then zeros"
  little case=zeros-apply "200 of the bundle then zeros: apply"
}
# a size beyond max_bundle_size (2^48), or beyond what TMPDIR can hold: refused
# before any body byte is kept
t_announce_size() {
  run_in 20 inspect "$F/announce/562949953421312/step.dcr?case=over-limit"
  want_rc 1 "200 announcing 2^49 bytes"; has e DCR_E_LIMIT "200 announcing 2^49 bytes"
  little case=over-limit "200 announcing 2^49 bytes"
  mkdir -p spool
  local room; room=$(df -B1 --output=avail spool | tail -1)
  TMPDIR="$W/spool" run_in 20 inspect "$F/announce/$((room + (1 << 30)))/step.dcr?case=no-room"
  want_rc 3 "200 announcing more than TMPDIR holds"; has e DCR_E_IO "200 announcing more than TMPDIR holds"
  little case=no-room "200 announcing more than TMPDIR holds"
}
# a 503 whose body never ends: not read; retried, then DCR_E_FETCH
t_errbody() {
  run_in 20 inspect "$F/errbody/2147483648/step.dcr?case=errbody" --http-retries 1
  fetch_err DCR_E_FETCH "a 503 with a 2 GiB body"; has e 503 "the 503 named"
  little case=errbody "503 with a 2 GiB body, twice"
}
# an origin that sends its bodies a byte a second: stopped as too slow; at 64
# KiB/s (a slow but real link) it is not
t_trickle() {
  run_in 30 inspect "$F/trickle/1/step.dcr?case=trickle" --http-timeout 2 --http-retries 1
  fetch_err DCR_E_FETCH "a byte a second"; has e "bytes a second" "the low-speed limit named"
  note "a byte a second, --http-timeout 2 --http-retries 1: DCR_E_FETCH after $MS ms"
  [ "$MS" -lt 12000 ] || fail "a byte a second: took $MS ms with --http-timeout 2, 2 attempts"
  # with the default options, as a worker runs: two slow windows, then given up
  run_in 30 inspect "$F/trickle/1/step.dcr?case=trickle-default" --memory 256M
  fetch_err DCR_E_FETCH "a byte a second, default options"; has e "too slow" "default options: why"
  note "a byte a second, default options: DCR_E_FETCH after $MS ms"
  [ "$MS" -lt 15000 ] || fail "a byte a second: took $MS ms with the default options"
  run_in 60 inspect "$F/trickle/65536/step.dcr?case=slow-link" --http-timeout 2
  want_rc 0 "64 KiB a second, --http-timeout 2"
  note "64 KiB a second: inspect in $MS ms"
  # a body that starts the object is judged by its first byte, not its 64th
  head -c 1000 /dev/zero | tr '\0' x >www/text.txt
  run_in 30 inspect "$F/trickle/1/text.txt?case=text" --http-timeout 20
  want_rc 1 "text at a byte a second"; has e DCR_E_MAGIC "text at a byte a second"
  note "text at a byte a second: DCR_E_MAGIC after $MS ms"
  [ "$MS" -lt 8000 ] || fail "text at a byte a second: DCR_E_MAGIC after $MS ms, not at its first byte"
}
# --http-deadline: given up at the deadline, however the transfers go (they are
# not too slow here), and an interrupt stops a fetch at once
t_deadline() {
  run_in 30 validate "$F/trickle/8192/step.dcr?case=deadline" --http-deadline 3
  fetch_err DCR_E_FETCH "--http-deadline 3 at 8 KiB a second"; has e deadline "the deadline named"
  note "--http-deadline 3: DCR_E_FETCH after $MS ms"
  [ "$MS" -lt 8000 ] || fail "--http-deadline 3 took $MS ms"
  run_in 30 apply base.st "$U" -o od/out.st --http-deadline 60
  want_rc 0 "--http-deadline 60 against nginx"; same od/out.st "--http-deadline 60"; rm -f od/out.st
  local t0; t0=$(date +%s%N)
  timeout -k 5 -s INT 2 "$DCR" validate "$F/trickle/1/step.dcr?case=interrupt" >o 2>e; RC=$?
  MS=$(( ($(date +%s%N) - t0) / 1000000 ))
  has e DCR_E_INTERRUPTED "SIGINT while fetching"
  note "SIGINT 2 s into a fetch at a byte a second: exit $RC after $MS ms"
  [ "$MS" -lt 5000 ] || fail "SIGINT while fetching: took $MS ms"
}
# a 302 to another origin (nginx, another port): the --header does not go
# there (its access log), unless --header-follow; a same-origin one keeps it
t_redirect_origin() {
  run apply base.st "$F/away/$OPORT/step.dcr?case=away1" -o od/out.st --header 'X-Api-Key: k-123'
  want_rc 0 "302 to another origin"; same od/out.st "302 to another origin"; rm -f od/out.st
  local n k; n=$(grep -c 'case=away1' ngx/origin/headers.log)
  k=$(grep 'case=away1' ngx/origin/headers.log | grep -c k-123)
  note "302 to another port: $n requests there, $k with the header"
  [ "$n" -gt 0 ] || { fail "no request reached the other origin"; return; }
  [ "$k" = 0 ] ||
    fail "X-Api-Key reached another origin after a 302: $(grep -m1 'case=away1' ngx/origin/headers.log)"
  run apply base.st "$F/away/$OPORT/step.dcr?case=away2" -o od/out.st --header 'X-Api-Key: k-123' --header-follow
  want_rc 0 "302 to another origin, --header-follow"; rm -f od/out.st
  grep 'case=away2' ngx/origin/headers.log | grep -q 'x-api-key=k-123' ||
    fail "--header-follow: X-Api-Key did not reach the other origin"
  run apply base.st "$F/redirect/1000/auth/0/step.dcr" -o od/out.st --header 'Authorization: Bearer s3cr3t-token'
  want_rc 0 "302 on the same origin keeps the headers"; same od/out.st "same-origin 302"; rm -f od/out.st
}
tcase "faults: drop the connection mid-body twice: retried" t_drop
tcase "faults: 503 three times: retried" t_503
tcase "faults: reset the connection twice: retried" t_reset
tcase "faults: 503 beyond --http-retries: DCR_E_FETCH, nothing written" t_503_gives_up
tcase "faults: a server that ignores Range (200, whole file)" t_norange
tcase "faults: a stalled body with --http-timeout 2: retried" t_stall
tcase "faults: a stalled body is given up about --http-timeout after its last byte" t_stall_timing
tcase "faults: the bundle changes under the reader: DCR_E_CHANGED" t_change
tcase "faults: a 206 one byte off: DCR_E_FETCH" t_wrongrange
tcase "faults: 302 redirects followed" t_redirect
tcase "faults: bearer token: 401 without; --header and DCR_HTTP_HEADERS; never printed" t_auth
tcase "faults: 404: DCR_E_FETCH" t_404
tcase "hostile: 200s announcing 2 GiB of random bytes, or of the bundle then zeros: the walk's code, little kept" t_announce
tcase "hostile: 200s announcing more than max_bundle_size or TMPDIR: refused before the body" t_announce_size
tcase "hostile: a 503 with a 2 GiB body: not read, DCR_E_FETCH" t_errbody
tcase "hostile: a byte a second: too slow, DCR_E_FETCH; 64 KiB a second is not; text judged at its first byte" t_trickle
tcase "hostile: --http-deadline; SIGINT stops a fetch" t_deadline
tcase "redirects: headers stay on the URL's origin unless --header-follow" t_redirect_origin

# ---------------------------------------------------------------------------
# 3. --tensors: only the chunks of some tensors
# stcheck OUT TARGET NAME...: OUT is a safetensors file holding exactly NAMEs,
# with TARGET's dtype, shape and bytes (headers read by hand)
cat >stcheck.py <<'PYEOF'
import json, struct, sys
def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        sys.exit("%s: %d bytes, no header" % (path, len(data)))
    n, = struct.unpack_from("<Q", data, 0)
    if 8 + n > len(data):
        sys.exit("%s: header length %d beyond the file" % (path, n))
    head = json.loads(data[8:8 + n])
    head.pop("__metadata__", None)
    body = data[8 + n:]
    spans = sorted(tuple(v["data_offsets"]) for v in head.values())
    at = 0
    for b, e in spans:
        if b != at:
            sys.exit("%s: tensor data not contiguous at %d (%d)" % (path, at, b))
        at = e
    if at != len(body):
        sys.exit("%s: tensors end at %d, data is %d bytes" % (path, at, len(body)))
    return head, body
out, tgt, names = sys.argv[1], sys.argv[2], sys.argv[3:]
oh, ob = load(out)
th, tb = load(tgt)
if sorted(oh) != sorted(names):
    sys.exit("tensors %s, expected %s" % (sorted(oh)[:6], sorted(names)[:6]))
for k in names:
    o, t = oh[k], th[k]
    if o["dtype"] != t["dtype"] or o["shape"] != t["shape"]:
        sys.exit("%s: %s%s, target %s%s" % (k, o["dtype"], o["shape"], t["dtype"], t["shape"]))
    ob_ = ob[o["data_offsets"][0]:o["data_offsets"][1]]
    tb_ = tb[t["data_offsets"][0]:t["data_offsets"][1]]
    if ob_ != tb_:
        sys.exit("%s: bytes differ from the target's" % k)
print(len(names))
PYEOF
# names PATTERN...: the target's tensors matching any of the fnmatch patterns
names() {
  "$PY" - target.st "$@" <<'PYEOF'
import fnmatch, json, struct, sys
with open(sys.argv[1], "rb") as f:
    n, = struct.unpack("<Q", f.read(8)); h = json.loads(f.read(n))
h.pop("__metadata__", None)
for k in sorted(h):
    if any(fnmatch.fnmatchcase(k, p) for p in sys.argv[2:]):
        print(k)
PYEOF
}
t_tensors_one() {
  [ -n "$ONE" ] || { fail "no changed tensor found in inspect --json"; return; }
  run apply base.st "$U" --tensors "$ONE" -o sel.st -v; want_rc 0 "--tensors $ONE"
  local msg; msg=$("$PY" stcheck.py sel.st target.st "$ONE" 2>&1) || fail "--tensors $ONE: $msg"
  if vline; then
    note "--tensors $ONE: fetched $FETCHED of $TOTAL bytes ($((FETCHED * 100 / TOTAL))%) in $REQS requests, $RETRIES retries; output $(stat -c %s sel.st 2>/dev/null) bytes"
    [ "$FETCHED" -lt "$BSIZE" ] || fail "--tensors fetched $FETCHED bytes, the whole bundle is $BSIZE"
  fi
  rm -f sel.st
}
t_tensors_patterns() {
  local want; want=$(names 'model.layers.0.*' 'lm_head.*')
  run apply base.st "$U" --tensors 'model.layers.0.*' --tensors 'lm_head.*' -o sel.st -v
  want_rc 0 "two --tensors patterns"
  # shellcheck disable=SC2086
  local msg; msg=$("$PY" stcheck.py sel.st target.st $want 2>&1) || fail "two patterns: $msg"
  vline && note "--tensors 'model.layers.0.*' 'lm_head.*' ($(echo $want | wc -w) tensors): fetched $FETCHED of $TOTAL bytes in $REQS requests"
  rm -f sel.st
}
t_tensors_fault() {
  run apply base.st "$F/drop/1/step.dcr" --tensors "$ONE" -o sel.st -v
  want_rc 0 "--tensors through a dropped connection"
  local msg; msg=$("$PY" stcheck.py sel.st target.st "$ONE" 2>&1) || fail "--tensors, drop: $msg"
  rm -f sel.st
}
tcase "--tensors NAME: exactly that tensor, target bytes, fewer bytes fetched" t_tensors_one
tcase "--tensors with two glob patterns" t_tensors_patterns
tcase "--tensors through a dropped connection" t_tensors_fault

# ---------------------------------------------------------------------------
# 4. a cache tree: 4 workers, 2 per edge, at once; the origin should serve about
# one copy of the bundle
t_tree() {
  local i port pids=() rcs=() t0=$SECONDS
  for i in 1 2 3 4; do
    if [ $((i % 2)) = 1 ]; then port=$E1PORT; else port=$E2PORT; fi
    "${TIMEOUT[@]}" "$DCR" apply base.st "http://127.0.0.1:$port/step.dcr" -o tree$i.st -v >tree$i.out 2>tree$i.err &
    pids+=($!)
  done
  for i in 0 1 2 3; do wait "${pids[$i]}"; rcs+=($?); done
  for i in 1 2 3 4; do
    cat tree$i.out tree$i.err >>all.txt
    [ "${rcs[$((i - 1))]}" = 0 ] || fail "worker $i: exit ${rcs[$((i - 1))]}: $(shown tree$i.err)"
    cmp -s tree$i.st target.st || fail "worker $i: output differs from the target"
  done
  local served; served=$(awk '$2 ~ /^\/step\.dcr/ { s += $5 } END { print s + 0 }' ngx/torigin/access.log)
  local reqs; reqs=$(awk '$2 ~ /^\/step\.dcr/ { n++ } END { print n + 0 }' ngx/torigin/access.log)
  local edge; edge=$(cat ngx/edge1/access.log ngx/edge2/access.log | awk '$2 ~ /^\/step\.dcr/ { n++; s += $5 } END { print n + 0, s + 0 }')
  note "cache tree: 4 workers in $((SECONDS - t0)) s; edges answered ${edge% *} requests (${edge#* } bytes); origin served $served bytes in $reqs requests for a $BSIZE-byte bundle: ratio $(awk -v a="$served" -v b="$BSIZE" 'BEGIN { printf "%.2f", a / b }')"
  [ "$served" -lt $((2 * BSIZE)) ] || fail "the origin served $served bytes, 2x the bundle is $((2 * BSIZE))"
  # one fetch per node (issue #34 item 3): each edge, a node's relay, pulls the
  # bundle from the mid once for its two workers, so the mid sends 2 bundles
  local mid; mid=$(awk '$2 ~ /^\/step\.dcr/ { s += $5 } END { print s + 0 }' ngx/mid/access.log)
  note "cache tree: the mid sent the 2 edges $mid bytes: $(awk -v a="$mid" -v b="$BSIZE" 'BEGIN { printf "%.2f", a / b }') bundles"
  [ "$mid" -le $((2 * BSIZE)) ] || fail "the mid sent its 2 edges $mid bytes, more than 2 bundles ($((2 * BSIZE)))"
  rm -f tree?.st
}
tcase "cache tree: 4 concurrent workers through 2 edges and a mid relay" t_tree

# ---------------------------------------------------------------------------
# 5. https: an nginx origin with a self-signed certificate, trusted with --cacert
# (when dcr has --cacert and openssl is installed)
t_https() {
  ngx_up ngx/tls origin-tls www || { fail "could not start the TLS origin"; return; }
  local S=https://127.0.0.1:$NGX_PORT/step.dcr
  run apply base.st "$S" -o od/out.st --cacert ngx/tls/cert.pem -v
  want_rc 0 "https with --cacert"; same od/out.st "https"; rm -f od/out.st
  run apply base.st "$S?X-Amz-Signature=secret" -o od/out.st
  fetch_err DCR_E_FETCH "https with an untrusted certificate"; nothing od "untrusted certificate"
  ! grep -qe secret o e || fail "the query string was printed: $(shown e)"
  run validate "$S" --cacert ngx/tls/cert.pem; want_rc 0 "validate https"
}
if "$DCR" apply --help 2>/dev/null | grep -q -- --cacert && command -v openssl >/dev/null 2>&1; then
  tcase "https: --cacert trusts a self-signed origin; without it DCR_E_FETCH" t_https
else
  echo "# skip: https (no --cacert in dcr apply --help, or no openssl)"
fi

# ---------------------------------------------------------------------------
t_secrets() {
  ! grep -q s3cr3t all.txt || fail "the token appears in an output: $(grep -m1 s3cr3t all.txt)"
  ! grep -q 'X-Amz-Signature' all.txt || fail "a query string appears in an output: $(grep -m1 X-Amz all.txt)"
  ! grep -q 'pw-secret' all.txt || fail "userinfo appears in an output"
}
tcase "no token, query string or userinfo in any output" t_secrets

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]

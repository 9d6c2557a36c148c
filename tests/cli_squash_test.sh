#!/usr/bin/env bash
# cli_squash_test.sh - end-to-end tests of `dcr squash` (SPEC.md §10.4): chains of
# XOR-only, delta-only, mixed and format 1.0/1.1/1.2 bundles squashed with and
# without the base; the result applies to step 0 and gives step n byte for byte,
# validates, is the same bytes on 1 and 2 threads, and counts exactly what a
# direct encode counts (changes undone along the chain are dropped). Refused:
# bundles out of order, a wrong base, an output that is an input.
#
# usage: tests/cli_squash_test.sh [path/to/dcr]      (default: build/dcr)
set -u

DCR=${1:-build/dcr}
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=squash-test
# shellcheck source=cli_lib.sh
. "$HERE/cli_lib.sh"

# step IN OUT SEED MODE RATE [ORIG]: OUT is IN with about RATE of its BF16 elements
# changed: ulp (one ULP either way, as an optimizer step), delta (one ULP up,
# which a delta codes better than an XOR in every chunk), xor (bit 6 flipped),
# zero (set to +0, which the encoder codes as an overwrite), mixed (ulp, xor or
# zero), revert (back to ORIG's value).
step() {
  python3 - "$@" <<'PY'
import random, struct, sys
src, dst, seed, mode, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
b = bytearray(open(src, "rb").read())
orig = open(sys.argv[6], "rb").read() if len(sys.argv) > 6 else None
start = 8 + struct.unpack("<Q", b[:8])[0]
n = (len(b) - start) // 2
r = random.Random(seed)
key = lambda u: u ^ 0x7fff if u & 0x8000 else u
for _ in range(int(n * rate)):
    i = start + 2 * r.randrange(n)
    u = b[i] | b[i + 1] << 8
    m = mode if mode != "mixed" else r.choice(["ulp", "xor", "zero"])
    if m == "ulp": u = key((key(u) + r.choice((1, -1))) & 0xffff)
    elif m == "delta": u = key((key(u) + 1) & 0xffff)
    elif m == "xor": u ^= 0x40
    elif m == "zero": u = 0
    elif m == "revert": u = orig[i] | orig[i + 1] << 8
    b[i], b[i + 1] = u & 0xff, u >> 8
open(dst, "wb").write(b)
PY
}

# chain DIR MODE STEPS FORMAT: DIR/s0.st … DIR/sSTEPS.st and DIR/b1.dcr …, each bundle
# encoded with --format FORMAT and --meta step=I.
chain() {
  mkdir -p "$1" && cp s0.st "$1/s0.st" || return 1
  local i
  for ((i = 1; i <= $3; i++)); do
    step "$1/s$((i - 1)).st" "$1/s$i.st" "$i" "$2" 0.01 &&
      "$DCR" encode "$1/s$((i - 1)).st" "$1/s$i.st" -o "$1/b$i.dcr" --format "$4" \
        --chunk-size 64K --meta step=$i -q || return 1
  done
}
bundles() { local i; for ((i = 1; i <= $2; i++)); do printf '%s/b%d.dcr ' "$1" "$i"; done; }

"$DCR" synth s0.st x.st --size 2M --seed 7 -q && "$DCR" synth other.st x.st --size 2M --seed 8 -q -f &&
  chain xor xor 6 1.1 && chain delta delta 5 1.0 && chain c12 ulp 10 1.2 && chain c13 ulp 10 1.3 &&
  chain mixed mixed 5 1.1 ||
  { echo "not ok - setup: synth/encode failed"; exit 1; }

same() { cmp -s "$1" "$2" || fail "$3: $1 differs from $2"; }
# same_body A B WHAT: A and B differ at most in the header (64 bytes), whose minor
# version squash sets to what the result needs where an encoder may declare more.
same_body() {
  [ "$(stat -c %s "$1")" = "$(stat -c %s "$2")" ] && [ -z "$(cmp -l "$1" "$2" | awk '$1 > 64')" ] ||
    fail "$3: $1 and $2 differ past their headers"
}
absent() { [ ! -e "$1" ] || fail "$2: $1 was written"; }
# check DIR N OUT WHAT: OUT applied to step 0 is step N, validates against both,
# and counts the changes of a direct encode of step 0 to step N.
check() {
  run apply "$1/s0.st" "$3" -o "$1/out.st" -f
  want_rc 0 "$4: apply" && same "$1/out.st" "$1/s$2.st" "$4" || return
  run validate "$3" --base "$1/s0.st" --target "$1/s$2.st"
  want_rc 0 "$4: validate" || return
  "$DCR" encode "$1/s0.st" "$1/s$2.st" -o "$1/direct.dcr" --chunk-size 64K --json -f >direct.json &&
    run squash $(bundles "$1" "$2") -o "$1/again.dcr" --json -f ${5:+--base "$1/s0.st"} || fail "$4: direct"
  [ "$(jget o 'j["changed_elements"]')" = "$(jget direct.json 'j["changed_elements"]')" ] &&
    [ "$(jget o 'j["changed_chunks"]')" = "$(jget direct.json 'j["changed_chunks"]')" ] ||
    fail "$4: counts $(jget o 'j["changed_elements"], j["changed_chunks"]') where a direct encode has $(jget direct.json 'j["changed_elements"], j["changed_chunks"]')"
}
# threads DIR N ARGS...: the squash is the same bytes on 1 and 2 threads.
threads() {
  local dir=$1 n=$2
  shift 2
  "$DCR" squash $(bundles "$dir" "$n") -o "$dir/t1.dcr" --threads 1 -q -f "$@" &&
    "$DCR" squash $(bundles "$dir" "$n") -o "$dir/t2.dcr" --threads 2 -q -f "$@" ||
    { fail "threads: squash failed"; return; }
  same "$dir/t1.dcr" "$dir/t2.dcr" "1 and 2 threads"
}

t_xor() {
  run squash $(bundles xor 6) -o xor.dcr
  want_rc 0 "squash" && check xor 6 xor.dcr "XOR chain" && threads xor 6 || return
  local parts
  parts=$(cat $(bundles xor 6) | wc -c)
  [ "$(stat -c %s xor.dcr)" -lt "$parts" ] || fail "squashed $(stat -c %s xor.dcr) bytes, parts $parts"
  run inspect xor.dcr --json
  [ "$(jget o 'j["format_version"]')" = 1.0 ] || fail "format $(jget o 'j["format_version"]'), not 1.0"
  [ "$(jget o 'j["meta"]')" = "{'step': '6'}" ] || fail "metadata $(jget o 'j["meta"]'), not bn's"
}
tcase "XOR chain of 6 (1.1 bundles), no base: composed, exact counts, 1.0, bn's metadata" t_xor

t_delta() {
  run squash $(bundles delta 5) -o delta.dcr
  want_rc 0 "squash" && check delta 5 delta.dcr "delta chain" && threads delta 5
}
tcase "ULP delta chain of 5 (1.0 bundles), no base: deltas add in key space" t_delta

# $1: the chain's folder, $2 its format
ranked_chain() {
  run squash $(bundles "$1" 10) -o "$1.dcr"
  want_rc 2 "no base" && has e "DCR_E_ARGUMENT" "no base" && has e "needs the base" "no base" &&
    has e "chunk " "no base" && absent "$1.dcr" "no base" || return
  run squash $(bundles "$1" 10) -o "$1.dcr" --base "$1/s0.st"
  want_rc 0 "--base" && check "$1" 10 "$1.dcr" "$2 chain" base && threads "$1" 10 --base "$1/s0.st" || return
  # rebuilt and coded by the encoder's own coder: a direct encode, byte for byte
  "$DCR" encode "$1/s0.st" "$1/s10.st" -o "$1/direct.dcr" --chunk-size 64K --meta step=10 \
    --format "$2" -q -f
  same_body "$1.dcr" "$1/direct.dcr" "with --base"
}
t_classed() { ranked_chain c12 1.2; }
tcase "1.2 chain of 10 (DELTA_CLASSED): refused without --base, a direct encode's bytes with it" t_classed
t_banded() { ranked_chain c13 1.3; }
tcase "1.3 chain of 10 (DELTA_BANDED): refused without --base, a direct encode's bytes with it" t_banded
# --sliced: the tensors named are rebuilt without ranks, as dcr encode --sliced
# codes them: a direct encode's bytes again
t_sliced() {
  local name
  name=$("$DCR" inspect --json c13/b1.dcr | python3 -c 'import json, sys
print([t["name"] for t in json.load(sys.stdin)["tensors"] if "DELTA_BANDED" in (t["encodings"] or {})][0])')
  [ -n "$name" ] || { fail "no DELTA_BANDED tensor in c13/b1.dcr"; return; }
  run squash $(bundles c13 10) -o c13s.dcr --base c13/s0.st --sliced "$name"; want_rc 0 "--sliced" || return
  "$DCR" encode c13/s0.st c13/s10.st -o c13/direct-s.dcr --chunk-size 64K --meta step=10 --sliced "$name" -q -f
  same_body c13s.dcr c13/direct-s.dcr "with --sliced"
  cmp -s c13s.dcr c13.dcr && fail "--sliced changed nothing"
  run squash $(bundles c13 10) -o never.dcr --sliced "$name"; want_rc 2 "--sliced without --base"
  absent never.dcr "--sliced without --base"
  run squash $(bundles c13 10) -o never.dcr --base c13/s0.st --sliced 'no.such.*'; want_rc 2 "a pattern of nothing"
  has e "matches no tensor" "a pattern of nothing"
}
tcase "--sliced: named tensors rebuilt without ranks (a direct encode --sliced's bytes)" t_sliced

t_mixed() {
  run squash $(bundles mixed 5) -o mixed.dcr --base mixed/s0.st
  want_rc 0 "squash" && check mixed 5 mixed.dcr "mixed chain" base && threads mixed 5 --base mixed/s0.st
}
tcase "XOR, delta and overwrite mixed in chunks: rebuilt from --base" t_mixed

t_back() {
  # b2 undoes b1 (every chunk changed, then changed back); b3 reverts part of b1's
  for d in xor delta c12; do
    mkdir -p "back-$d" && cp "$d/s0.st" "$d/s1.st" "back-$d/" &&
      "$DCR" encode "back-$d/s1.st" "back-$d/s0.st" -o "back-$d/undo.dcr" --chunk-size 64K -q -f ||
      { fail "$d: setup"; return; }
    run squash "$d/b1.dcr" "back-$d/undo.dcr" -o "back-$d/sq.dcr" --json -f
    want_rc 0 "$d: undone" || return
    [ "$(jget o 'j["changed_chunks"]')" = 0 ] || fail "$d: $(jget o 'j["changed_chunks"]') chunks kept"
    run apply "back-$d/s0.st" "back-$d/sq.dcr" -o "back-$d/out.st"
    want_rc 0 "$d: apply" && same "back-$d/out.st" "back-$d/s0.st" "$d: undone" || return
  done
  step xor/s1.st xor/r2.st 99 revert 0.3 xor/s0.st &&
    "$DCR" encode xor/s1.st xor/r2.st -o xor/r2.dcr --chunk-size 64K -q -f || { fail "revert"; return; }
  run squash xor/b1.dcr xor/r2.dcr -o xor/rev.dcr -f
  want_rc 0 "revert" && run apply xor/s0.st xor/rev.dcr -o xor/rev.st &&
    same xor/rev.st xor/r2.st "revert" || return
  "$DCR" encode xor/s0.st xor/r2.st -o xor/rdirect.dcr --chunk-size 64K -q -f
  same_body xor/rev.dcr xor/rdirect.dcr "revert: elements back at their value dropped"
}
tcase "changes undone along the chain are dropped (elements and whole chunks)" t_back

t_order() {
  run squash xor/b2.dcr xor/b1.dcr -o order.dcr
  want_rc 1 "order" && has e "DCR_E_BASE_MISMATCH" "order" && has e "xor/b1.dcr" "order" &&
    has e "xor/b2.dcr" "order" && absent order.dcr "order"
  run squash xor/b1.dcr xor/b3.dcr -o gap.dcr
  want_rc 1 "gap" && absent gap.dcr "gap"
}
tcase "bundles out of order or with a gap: DCR_E_BASE_MISMATCH naming both, nothing written" t_order

t_base() {
  run squash $(bundles c12 3) -o wrong.dcr --base c12/s1.st
  want_rc 1 "wrong base" && has e "DCR_E_BASE_MISMATCH" "wrong base" && absent wrong.dcr "wrong base"
  run squash $(bundles c12 3) -o wrong.dcr --base other.st
  want_rc 1 "other model" && absent wrong.dcr "other model"
}
tcase "a wrong --base: DCR_E_BASE_MISMATCH, nothing written" t_base

t_output() {
  cp xor/b2.dcr keep.dcr
  run squash xor/b1.dcr xor/b2.dcr -o xor/b2.dcr -f
  want_rc 2 "-o an input" && has e "is an input" "-o an input" && same xor/b2.dcr keep.dcr "-o an input" || return
  ln -f xor/b1.dcr link.dcr
  run squash xor/b1.dcr xor/b2.dcr -o link.dcr -f
  want_rc 2 "-o a hard link to an input" && same xor/b2.dcr keep.dcr "link" || return
  run squash xor/b1.dcr xor/b2.dcr -o xor.dcr
  want_rc 2 "-o existing, no -f" && has e "already exists" "no -f" || return
  run squash xor/b1.dcr -o -
  want_rc 2 "-o -"
}
tcase "-o an input (even with -f, or a link), an existing file without -f, -o -: refused" t_output

# Checkpoint sets (§2.3): four model directories of the mixed chain's steps, a
# tensor moved to another shard (1), the vocabulary grown and config.json changed
# (2: two tensors and a raw member resized), the extra members removed (3).
MKSET=$HERE/mkset.py
sets() {
  python3 "$MKSET" mixed/s0.st S0 && python3 "$MKSET" mixed/s1.st S1 --move model.layers.0.mlp.up_proj.weight &&
    python3 "$MKSET" mixed/s2.st S2 --grow lm_head.weight:64 --config '{"vocab_size": 6587}' &&
    python3 "$MKSET" mixed/s3.st S3 --grow lm_head.weight:64 --config '{"vocab_size": 6587}' --no-extras &&
    python3 "$MKSET" mixed/s1.st S1x --move model.layers.0.mlp.up_proj.weight --config '{"other": 2}' &&
    python3 "$MKSET" mixed/s2.st S2x --grow lm_head.weight:64 --config '{"other": 2}' || return 1
  local i
  for i in 1 2 3; do
    "$DCR" encode S$((i - 1)) S$i -o sb$i.dcr --chunk-size 64K -q || return 1
  done
  "$DCR" encode S1x S2x -o sbx.dcr --chunk-size 64K -q
}
t_sets() {
  sets || { fail "setup: mkset/encode"; return; }
  run squash sb1.dcr sb2.dcr sb3.dcr --base S0 -o sq.dcr; want_rc 0 "squash --base" || return
  run apply S0 sq.dcr -o O; want_rc 0 "apply the squashed bundle" || return
  run apply S0 sb1.dcr sb2.dcr sb3.dcr -o C; want_rc 0 "apply the chain" || return
  diff -r O C >/dev/null && diff -r O S3 >/dev/null || fail "squashed and chained results differ: $(diff -rq O C | head -3)"
  run validate sq.dcr --base S0 --target S3; want_rc 0 "validate --base --target"
  run inspect --json sq.dcr
  [ "$(jget o 'j["kind"]')" = set ] || fail "kind set"
  [ "$(jget o '[t["status"] for t in j["tensors"] if t["name"] in ("config.json", "lm_head.weight")]')" = "['removed', 'resized']" ] ||
    fail "config.json removed, lm_head.weight resized: $(jget o '[(t["name"], t["status"]) for t in j["tensors"]][:3]')"
  # the first two steps alone (a raw member resized), and the last two
  run squash sb1.dcr sb2.dcr --base S0 -o sq12.dcr; want_rc 0 "squash 1..2" || return
  run inspect --json sq12.dcr
  [ "$(jget o '[t["status"] for t in j["tensors"] if t["name"] == "config.json"]')" = "['resized']" ] || fail "config.json resized"
  run apply S0 sq12.dcr -o O12; want_rc 0 "apply 1..2"; diff -r O12 S2 >/dev/null || fail "1..2 differs from S2"
  run squash sb2.dcr sb3.dcr --base S1 -o sq23.dcr; want_rc 0 "squash 2..3" || return
  run apply S1 sq23.dcr -o O23; want_rc 0 "apply 2..3"; diff -r O23 S3 >/dev/null || fail "2..3 differs from S3"
  # a chain whose raw members do not follow (the state ids leave them out, and
  # sbx does not change config.json: no chunk would tell), a base whose raw
  # member is not b1's (one that no bundle changes: no chunk would tell either)
  run squash sb1.dcr sbx.dcr --base S0 -o bad.dcr
  want_rc 1 "config.json differs between sb1's target and sbx's base" && has e "config.json" "names the member"
  [ ! -e bad.dcr ] || fail "nothing written"
  cp -r S0 W0 && python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[-2] ^= 1; open(sys.argv[1], "wb").write(b)' W0/tokenizer.json
  run squash sb1.dcr sb2.dcr --base W0 -o bad.dcr
  want_rc 1 "a base whose tokenizer.json is not b1's" && has e "tokenizer.json" "names the member"
}
tcase "checkpoint sets: a moved tensor, vocabulary growth, members resized and removed: squashed with --base, exact; raw members that do not follow refused" t_sets

t_one() {
  run squash c12/b1.dcr -o one.dcr
  want_rc 0 "one" && same_body one.dcr c12/b1.dcr "one bundle"
}
tcase "one bundle squashes to itself, byte for byte past the header" t_one

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]

#!/usr/bin/env bash
# cli_refit_test.sh - end-to-end tests of refit on the worker (SPEC.md §10.3, §18):
# `dcr apply --in-place` at each verification level, a bundle applied twice, a
# wrong base, a layout that cannot be patched in place, journals left behind, a
# locked checkpoint, and series (in place and copied, in order, out of order,
# resumed); model directories in place (§18.6).
#
# usage: tests/cli_refit_test.sh [path/to/dcr]      (default: build/dcr)
set -u

DCR=${1:-build/dcr}
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=refit-test
# shellcheck source=cli_lib.sh
. "$HERE/cli_lib.sh"

# perturb IN OUT SEED: OUT is IN with the low bit of about 0.5% of its BF16
# elements flipped: the next step of a chain, with the same layout.
perturb() {
  python3 - "$1" "$2" "$3" <<'PY'
import random, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
start = 8 + struct.unpack("<Q", b[:8])[0]
r = random.Random(int(sys.argv[3]))
for _ in range((len(b) - start) // 400):
    b[start + 2 * r.randrange((len(b) - start) // 2)] ^= 1
open(sys.argv[2], "wb").write(b)
PY
}

"$DCR" synth s0.st s1.st --size 4M --rate 0.01 --seed 3 -q &&
  perturb s1.st s2.st 1 && perturb s2.st s3.st 2 &&
  "$DCR" encode s0.st s1.st -o b1.dcr --meta step=1 -q &&
  "$DCR" encode s1.st s2.st -o b2.dcr --meta step=2 -q &&
  "$DCR" encode s2.st s3.st -o b3.dcr --meta step=3 -q &&
  "$DCR" synth o0.st o1.st --size 4M --rate 0.01 --seed 4 -q ||
  { echo "not ok - setup: synth/encode failed"; exit 1; }

same() { cmp -s "$1" "$2" || fail "$3: $1 differs from $2"; }
no_journal() { [ ! -e "$1.dcr-journal" ] || fail "$2: $1.dcr-journal left behind"; }

t_levels() {
  for level in full chunk none; do
    cp s0.st w.st
    run apply --in-place w.st b1.dcr --verify "$level"
    want_rc 0 "$level" && same w.st s1.st "$level" && no_journal w.st "$level" &&
      has e "patched in place" "$level" || return
  done
}
tcase "--in-place at each level (full, chunk, none) gives the target byte for byte (§10.3)" t_levels

t_twice() {
  for level in full chunk; do
    cp s1.st w.st
    run apply -i w.st b1.dcr --verify "$level"
    want_rc 0 "$level" && same w.st s1.st "$level" && has e "already at the target" "$level" &&
      no_journal w.st "$level" || return
  done
  cp s1.st w.st && run apply s1.st b1.dcr -o copy.st
  want_rc 0 "copy apply of a target" && same copy.st s1.st "copy apply of a target"
}
tcase "a bundle applied to its own target succeeds and changes nothing (R-APL-5)" t_twice

t_validate_says_which() {
  run validate b1.dcr --base s1.st
  want_rc 0 "target as base" && has o "already its target" "target as base" || return
  run validate b1.dcr --base s0.st
  want_rc 0 "base" && has o "applies to the base" "base" || return
  run validate b1.dcr --base s1.st --json
  want_rc 0 "json" && [ "$(jget o 'j["base_is_target"]')" = True ] || fail "json: base_is_target"
}
tcase "validate --base says whether the input is the base or already the target (§10.2)" t_validate_says_which

t_wrong_base() {
  for level in full chunk; do
    cp o0.st w.st
    run apply -i w.st b1.dcr --verify "$level"
    want_rc 1 "$level" && has e DCR_E_BASE_MISMATCH "$level" && same w.st o0.st "$level" &&
      no_journal w.st "$level" && has e "bundle expects base state" "$level" || return
  done
}
tcase "a wrong base is refused before any byte changes, and explained (R-APL-6)" t_wrong_base

t_partly_wrong() {
  # one byte of a changed chunk's base flipped: only that chunk is wrong
  python3 - s0.st w.st <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[8 + struct.unpack("<Q", b[:8])[0] + 1000] ^= 0x40
open(sys.argv[2], "wb").write(b)
PY
  cp w.st w0.st
  for level in full chunk; do
    run apply -i w.st b1.dcr --verify "$level"
    want_rc 1 "$level" && has e DCR_E_BASE_MISMATCH "$level" && same w.st w0.st "$level" || return
  done
}
tcase "a base wrong in one chunk is refused and left as it was (R-APL-6)" t_partly_wrong

t_layout() {
  head -c 5000 s0.st >r0 && head -c 6000 s0.st >r1 && "$DCR" encode --raw r0 r1 -o raw.dcr -q &&
    cp r0 w.raw || { fail "setup"; return; }
  run apply -i w.raw raw.dcr
  want_rc 2 "grown file" && has e "cannot apply in place" "grown file" && same w.raw r0 "grown file" &&
    no_journal w.raw "grown file" && has e "dcr apply BASE BUNDLE -o OUT" "grown file"
}
tcase "a target whose layout differs is refused in place, with the copy apply suggested" t_layout

t_journals_left() {
  cp s0.st w.st && : >w.st.dcr-journal
  run apply -i w.st b1.dcr
  want_rc 0 "empty journal" && same w.st s1.st "empty journal" && no_journal w.st "empty journal" &&
    has e "removed a journal" "empty journal" || return
  cp s0.st w.st && printf 'not a journal, but 64 bytes or more of something else entirely....' >w.st.dcr-journal
  run apply -i w.st b1.dcr
  want_rc 1 "foreign file" && has e DCR_E_JOURNAL "foreign file" && same w.st s0.st "foreign file" &&
    [ -e w.st.dcr-journal ] || fail "foreign file: the journal must be left for the operator"
  rm -f w.st.dcr-journal
}
tcase "a journal left behind: an empty one beside the base goes, said so; a foreign file is DCR_E_JOURNAL (R-JNL-3, R-JNL-4)" t_journals_left

# The scene an adversary found (issue #32): a committed journal, a crash part way
# through its replay, then the journal damaged. Its files are those of
# testvectors/journal-v1.1 (SPEC.md §18.5); the bundle is made from its base and
# target, so that it names the journal's states.
JV="$HERE/../testvectors/journal-v1.1"
"$DCR" encode "$JV/ckpt/published-before.bin" "$JV/ckpt/published-after.bin" -o j1.dcr -q &&
  perturb "$JV/ckpt/published-after.bin" j2.st 7 &&
  "$DCR" encode "$JV/ckpt/published-after.bin" j2.st -o j2.dcr -q ||
  { echo "not ok - setup: the journal 1.1 scene"; exit 1; }
scene() { cp "$JV/ckpt/part-written-before.bin" w.st && cp "$JV/kept/$1.dcr-journal" w.st.dcr-journal &&
          cp w.st w.before && cp w.st.dcr-journal w.journal; }

t_damaged_kept() {
  for damage in damaged-part-written cut-part-written misfit-part-written; do
    scene "$damage"
    run apply -i w.st j1.dcr -v
    want_rc 1 "$damage" && has e DCR_E_JOURNAL "$damage" && has e "--salvage" "$damage" &&
      same w.st w.before "$damage" && same w.st.dcr-journal w.journal "$damage" || return
    run apply -i w.st j1.dcr j2.dcr
    want_rc 1 "$damage, a series" && same w.st w.before "$damage, a series" &&
      same w.st.dcr-journal w.journal "$damage, a series" || return
  done
}
tcase "a damaged journal beside a part-written checkpoint is kept, nothing changes, the way out is said (R-JNL-4)" t_damaged_kept

t_salvage() {
  scene damaged-part-written
  run apply -i --salvage w.st j1.dcr --json
  want_rc 0 "salvage" && same w.st "$JV/ckpt/published-after.bin" "salvage" && no_journal w.st "salvage" &&
    [ "$(jget o 'j["salvaged"]')" = True ] || fail "salvage: --json does not say salvaged: $(shown o)"
  scene cut-part-written
  run apply -i --salvage w.st j1.dcr j2.dcr
  want_rc 0 "salvage, a series" && same w.st j2.st "salvage, a series" && no_journal w.st "salvage, a series" &&
    has e "salvaged" "salvage, a series" || return
  # a chunk torn by the crash: neither base nor target, refused and left as it was
  scene damaged-part-written
  python3 -c 'import sys; b=bytearray(open("w.st","rb").read()); b[-5]^=0x40; open("w.st","wb").write(b)'
  cp w.st w.before
  run apply -i --salvage w.st j1.dcr
  want_rc 1 "torn" && has e DCR_E_BASE_MISMATCH "torn" && same w.st w.before "torn" &&
    same w.st.dcr-journal w.journal "torn" || return
  run apply --salvage s0.st b1.dcr -o x.st
  want_rc 2 "--salvage without --in-place"
}
tcase "--salvage finishes a part-written checkpoint from its bundle, alone or in a series; a torn chunk is refused (R-JNL-5)" t_salvage

t_damaged_whole() {
  cp "$JV/ckpt/published-before.bin" w.st && cp "$JV/kept/damaged-part-written.dcr-journal" w.st.dcr-journal
  run apply -i w.st j1.dcr -q
  want_rc 0 "beside the base" && same w.st "$JV/ckpt/published-after.bin" "beside the base" &&
    no_journal w.st "beside the base" && has e "removed a journal that could not be replayed" "beside the base"
}
tcase "a damaged journal beside a whole checkpoint goes, and the apply says so even with -q (R-JNL-4)" t_damaged_whole

t_symlink() {
  cp s0.st blob.st && ln -sf blob.st link.st
  run apply -i link.st b1.dcr
  want_rc 2 "symlink" && has e "symbolic link" "symlink" && same blob.st s0.st "symlink"
}
tcase "--in-place refuses a symbolic link (a shared blob would change)" t_symlink

t_locked() {
  cp s0.st lk.st
  flock lk.st sleep 1 &
  local holder=$!
  sleep 0.3
  run apply -i lk.st b1.dcr
  wait "$holder"
  want_rc 3 "locked" && has e "another process" "locked" && same lk.st s0.st "locked"
}
tcase "a checkpoint locked by another apply is refused (§18.1)" t_locked

t_series() {
  cp s0.st w.st
  run apply -i w.st b1.dcr b2.dcr b3.dcr
  want_rc 0 "in place" && same w.st s3.st "in place" && has e "3 bundles" "in place" || return
  run apply s0.st b1.dcr b2.dcr b3.dcr -o out.st
  want_rc 0 "copy" && same out.st s3.st "copy" || return
  ls ./*.dcr-series-* >/dev/null 2>&1 && fail "copy: a temporary file was left"
  run apply -i w.st b1.dcr b2.dcr b3.dcr
  want_rc 0 "again" && has e "already at the target" "again"
}
tcase "a series in place and copied gives the last target, without intermediate files" t_series

t_series_resume() {
  cp s0.st w.st && "$DCR" apply -i w.st b1.dcr -q || { fail "setup"; return; }
  run apply -i w.st b1.dcr b2.dcr b3.dcr
  want_rc 0 "resume" && same w.st s3.st "resume" && has e "2 bundles" "resume"
}
tcase "an in-place series that stopped part way resumes where the checkpoint stands" t_series_resume

t_series_order() {
  cp s0.st w.st
  run apply -i w.st b1.dcr b3.dcr b2.dcr
  want_rc 1 "out of order" && has e "out of order" "out of order" && has e "step=3" "metadata" &&
    same w.st s0.st "out of order" || return
  run apply s0.st b2.dcr b3.dcr -o out2.st
  want_rc 1 "wrong start" && has e DCR_E_BASE_MISMATCH "wrong start" && [ ! -e out2.st ] ||
    fail "wrong start: output written"
  cp o0.st w.st
  run apply -i w.st b1.dcr b2.dcr
  want_rc 1 "not in the series" && has e "not the base of any bundle" "not in the series" &&
    same w.st o0.st "not in the series"
}
tcase "a series out of order, or on a checkpoint it does not start from, is refused before writing" t_series_order

t_usage() {
  run apply -i s0.st b1.dcr -o x.st
  want_rc 2 "-o with --in-place" || return
  run apply -i s0.st b1.dcr --verify fast
  want_rc 2 "bad --verify" && has e "full, chunk or none" "bad --verify" || return
  run apply -i - b1.dcr
  want_rc 2 "in place on stdin" || return
  run apply s0.st b1.dcr - -o x.st
  want_rc 2 "series from stdin"
}
tcase "usage errors: -o with --in-place, a bad --verify, - in place or in a series" t_usage

# ---- model directories in place (SPEC.md §18.6): a 4-shard set, a tensor moved
# between shards, the vocabulary grown (shards resized), tokenizer files removed
MKSET=$HERE/mkset.py
"$DCR" synth d0.st d1.st --size 4M --rate 0.01 --seed 6 -q && "$DCR" synth dx.st d3.st --size 4M --rate 0.02 --seed 6 -q &&
  python3 "$MKSET" d0.st D0 && python3 "$MKSET" d1.st D1 --reverse --move model.embed_tokens.weight &&
  python3 "$MKSET" d1.st D2 --grow model.embed_tokens.weight:64 --config '{"vocab_size": 1762}' &&
  python3 "$MKSET" d3.st D3 --grow model.embed_tokens.weight:64 --config '{"vocab_size": 1762}' --no-extras &&
  "$DCR" encode D0 D1 -o db1.dcr -q && "$DCR" encode D1 D2 -o db2.dcr -q && "$DCR" encode D2 D3 -o db3.dcr -q ||
  { echo "not ok - setup: sets"; exit 1; }
# same_tree A B: the same files, byte for byte, and nothing else (hidden ones too)
same_tree() { diff -r "$1" "$2" >/dev/null || fail "$3: $1 and $2 differ: $(diff -rq "$1" "$2" | head -3 | tr '\n' '|')"; }
inode() { stat -c %i "$1"; }

t_dir() {
  rm -rf W && cp -r D0 W || return
  local tok
  tok=$(inode W/tokenizer.json)
  run apply -i W db1.dcr
  want_rc 0 "moved tensor" && has e "patched in place" "moved tensor" || return
  run apply D0 db1.dcr -o C1; want_rc 0 "copy" || return
  same_tree W C1 "in place = copy (moved tensor)"
  [ "$(inode W/tokenizer.json)" = "$tok" ] || fail "an unchanged member was rewritten"
  run apply -i W db1.dcr
  want_rc 0 "again" && has e "already at the target" "again" && same_tree W C1 "again" || return
  run apply -i W db2.dcr
  want_rc 0 "grown vocabulary" || return
  run apply C1 db2.dcr -o C2; want_rc 0 "copy 2" || return
  same_tree W C2 "in place = copy (grown vocabulary)"
  run apply -i W db3.dcr
  want_rc 0 "removed members" || return
  run apply C2 db3.dcr -o C3; want_rc 0 "copy 3" || return
  same_tree W C3 "in place = copy (removed members)" && same_tree W D3 "the target"
  [ -e W/tokenizer ] && fail "a directory its members left stays"
  rm -rf W && cp -r D0 W && run apply -i W db1.dcr db2.dcr db3.dcr
  want_rc 0 "series" && has e "3 bundles" "series" && same_tree W D3 "series" || return
  run apply -i W db1.dcr db2.dcr db3.dcr
  want_rc 0 "series again" && has e "already at the target" "series again"
  rm -rf W && cp -r D0 W && "$DCR" apply -i W db1.dcr -q && run apply -i W db1.dcr db2.dcr db3.dcr
  want_rc 0 "series resumed" && has e "2 bundles" "series resumed" && same_tree W D3 "series resumed"
}
tcase "a model directory in place: the copy's files byte for byte, unchanged members untouched, again a no-op, a series resumed (§18.6)" t_dir

t_dir_refused() {
  rm -rf W && cp -r D0 W || return
  run apply -i W db2.dcr
  want_rc 1 "wrong base" && has e DCR_E_BASE_MISMATCH "wrong base" && same_tree W D0 "wrong base" || return
  ln -sfn W WL && run apply -i WL db1.dcr
  want_rc 2 "a linked directory" && has e "symbolic link" "a linked directory" || return
  cp d0.st notdir && run apply -i notdir db1.dcr
  want_rc 1 "a file for a set" && has e "not a directory" "a file for a set" && same notdir d0.st "a file" || return
  flock W sleep 1 &
  local holder=$!
  sleep 0.3
  run apply -i W db1.dcr
  wait "$holder"
  want_rc 3 "locked" && has e "another process" "locked" && same_tree W D0 "locked" || return
  # what a killed writer left before publishing goes; it was never a member
  mkdir -p W/.dcr-stage/x W/.dcr-a1b2c3 && echo junk > W/.dcr-journal.tmp
  run apply -i W db1.dcr
  want_rc 0 "leftovers" && same_tree W D1 "leftovers cleaned"
}
tcase "a directory in place: a wrong base, a link, a lock refused, changing nothing; a killed writer's leftovers go" t_dir_refused

t_dir_journal() {
  rm -rf W && cp -r D0 W || return
  local id
  id=$("$DCR" id W | cut -d' ' -f1)
  printf 'not a journal at all, but long enough to have a header of sixty-four bytes..' > W/.dcr-journal
  [ "$("$DCR" id W | cut -d' ' -f1)" = "$id" ] || fail "a journal changed the directory's state id"
  run apply -i W db1.dcr
  want_rc 1 "foreign journal" && has e DCR_E_JOURNAL "foreign journal" && [ -e W/.dcr-journal ] &&
    same_tree W/model-00001-of-00004.safetensors D0/model-00001-of-00004.safetensors "foreign" ||
    fail "a foreign journal is kept and nothing changes"
}
tcase "a directory's journal: hidden, so no member (the state id stays); a foreign one is kept and refused" t_dir_journal

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]

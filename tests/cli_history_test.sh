#!/usr/bin/env bash
# cli_history_test.sh - end-to-end tests of history archives (SPEC.md §19):
# 20-step runs kept in tar, tar.zst and zip archives, every step extracted
# bit-exact from a file and from a pipe, keyframes built by append, archives
# read by Python's own tarfile and zipfile, damaged and truncated archives (a
# specific error, nothing written), bundles that skip a step, belong to another
# run or name another parent, the standard metadata keys, and appends killed at
# random moments (the archive is then the old one or the new one, whole).
#
# usage: tests/cli_history_test.sh [path/to/dcr]      (default: build/dcr)
set -u

DCR=${1:-build/dcr}
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=history-test
# shellcheck source=cli_lib.sh
. "$HERE/cli_lib.sh"

STEPS=20
python3 "$HERE/mkchain.py" run "$STEPS" --bytes 65536 --rate 0.01 --seed 3 || exit 3
python3 "$HERE/mkchain.py" other 3 --bytes 65536 --rate 0.01 --seed 4 || exit 3
ck() { printf 'run/step-%04d.safetensors' "$1"; }
for i in $(seq 1 "$STEPS"); do
  parent=()
  [ "$i" -gt 1 ] && parent=(--parent "b$((i - 1)).dcr")
  "$DCR" encode -q "$(ck $((i - 1)))" "$(ck "$i")" -o "b$i.dcr" --meta "step=$i" --meta run_id=run-a \
    "${parent[@]}" || exit 3
done
bundles() { for i in $(seq "$1" "$2"); do printf 'b%d.dcr ' "$i"; done; }

# every_step ARCHIVE: each step extracted and compared with the run's file.
every_step() {
  for s in $(seq 0 "$STEPS"); do
    run history extract "$1" --step "$s" -o out.safetensors -f -q
    want_rc 0 "extract step $s" || return
    cmp -s out.safetensors "$(ck "$s")" || { fail "step $s differs"; return; }
  done
}

# py_members ARCHIVE: the member names as Python's tarfile or zipfile read them.
py_members() {
  python3 - "$1" <<'PY'
import sys, tarfile, zipfile
p = sys.argv[1]
if p.endswith(".zst"):
    import io, subprocess
    data = subprocess.run(["zstd", "-dc", p], check=True, capture_output=True).stdout
    names = [m.name for m in tarfile.open(fileobj=io.BytesIO(data)) if m.isfile()]
elif p.endswith(".zip"):
    z = zipfile.ZipFile(p)
    bad = [i.filename for i in z.infolist() if i.compress_type != zipfile.ZIP_STORED]
    assert not bad, "compressed zip members: %s" % bad
    assert z.testzip() is None
    names = z.namelist()
else:
    names = [m.name for m in tarfile.open(p, "r:*") if m.isfile()]
print("\n".join(names))
PY
}

t_roundtrip() {
  local a=$1
  run history create "$a" --keyframe "$(ck 0)" $(bundles 1 10) --keyframe-every 5
  want_rc 0 "create $a" || return
  run history append "$a" $(bundles 11 "$STEPS")
  want_rc 0 "append" || return
  run history verify "$a"
  want_rc 0 "verify" || return
  every_step "$a"
  run history extract - --step 17 -o piped.safetensors -f -q <"$a"
  want_rc 0 "extract from a pipe" && cmp -s piped.safetensors "$(ck 17)" || fail "step 17 from a pipe differs"
  py_members "$a" >names || { fail "Python cannot read $a"; return; }
  [ "$(head -n 1 names)" = dcr-history.json ] || fail "the index is not the first member: $(head -n 1 names)"
  [ "$(wc -l <names)" = $((1 + 1 + STEPS + STEPS / 5)) ] || fail "$(wc -l <names) members"
  grep -qx 'keyframes/step-00000015.safetensors' names || fail "no keyframe at step 15"
  run history list "$a" --json
  [ "$(jget o 'j["keyframe_every"]')" = 5 ] && [ "$(jget o 'j["run_id"]')" = run-a ] &&
    [ "$(jget o 'j["last_step"]')" = "$STEPS" ] || fail "list --json: $(shown o)"
}
tcase "tar: 20 steps, created, appended, every step bit-exact" t_roundtrip run.tar
tcase "tar.zst: 20 steps" t_roundtrip run.tar.zst
tcase "zip (stored): 20 steps" t_roundtrip run.zip

t_tools() {
  mkdir -p x && tar -xf run.tar -C x && cmp -s x/keyframes/step-00000010.safetensors "$(ck 10)" ||
    fail "tar -x: keyframe 10 differs"
  zstd -dc run.tar.zst | tar -t | grep -qx 'bundles/step-00000020.dcr' || fail "zstd -dc | tar -t"
  command -v unzip >/dev/null || return 0
  mkdir -p y && (cd y && unzip -q ../run.zip) && cmp -s y/bundles/step-00000003.dcr b3.dcr || fail "unzip"
}
tcase "standard tools read the members" t_tools

t_same_bytes() {
  run history create again.tar --keyframe "$(ck 0)" $(bundles 1 10) --keyframe-every 5
  run history append again.tar $(bundles 11 "$STEPS")
  cmp -s again.tar run.tar || fail "the same members made other bytes"
}
tcase "the same run makes the same archive bytes" t_same_bytes

t_state() {
  local id
  id=$("$DCR" id "$(ck 13)" | cut -c1-32)
  run history extract run.zip --state "$id" -o s.safetensors -f -q
  want_rc 0 "extract --state" && cmp -s s.safetensors "$(ck 13)" || fail "--state gave another step"
  run history extract run.zip --state 00000000000000000000000000000000 -o s2.safetensors
  want_rc 2 "an unknown state"
  [ ! -e s2.safetensors ] || fail "an output was written for an unknown state"
}
tcase "extract --state ID" t_state

t_verify_levels() {
  for v in full chunk none; do
    run history extract run.tar --step 9 --verify $v -o v.safetensors -f -q
    want_rc 0 "--verify $v" && cmp -s v.safetensors "$(ck 9)" || fail "--verify $v: step 9 differs"
  done
  run history extract run.tar --step 9 --max-size 1K -o m.safetensors
  want_rc 1 "--max-size 1K"
  has e DCR_E_LIMIT "--max-size"
  [ ! -e m.safetensors ] || fail "--max-size left an output"
}
tcase "extract at every verification level; --max-size" t_verify_levels

t_refusals() {
  cp run.tar refuse.tar
  run history append refuse.tar b3.dcr
  want_rc 1 "a bundle of an earlier step"
  has e DCR_E_BASE_MISMATCH "base mismatch"
  "$DCR" encode -q "$(ck 20)" "other/step-0001.safetensors" -o foreign.dcr --meta run_id=run-b --unrelated \
    2>/dev/null || "$DCR" encode -q "$(ck 20)" "other/step-0001.safetensors" -o foreign.dcr --meta run_id=run-b
  run history append refuse.tar foreign.dcr
  want_rc 1 "a bundle of another run"
  has e "run 'run-b'" "the run is named"
  "$DCR" encode -q "$(ck 20)" "$(ck 19)" -o skip.dcr --meta step=22 -f
  run history append refuse.tar skip.dcr
  want_rc 1 "a bundle that says step 22 after step 20"
  has e "says step 22" "the step is named"
  "$DCR" encode -q "$(ck 20)" "$(ck 19)" -o orphan.dcr --parent b5.dcr -f
  run history append refuse.tar orphan.dcr
  want_rc 1 "a bundle whose parent is not the last bundle"
  has e "parent bundle" "the parent is named"
  cmp -s refuse.tar run.tar || fail "a refused append changed the archive"
  run history create run.tar --keyframe "$(ck 0)"
  want_rc 2 "create over an existing archive without -f"
  cmp -s refuse.tar run.tar || fail "create without -f changed the archive"
  cp "$(ck 1)" k1.safetensors
  run history create k1.safetensors --container tar --keyframe k1.safetensors -f
  want_rc 2 "create over its own keyframe, even with -f"
  cmp -s k1.safetensors "$(ck 1)" || fail "create destroyed its keyframe"
  run encode "$(ck 0)" "$(ck 1)" -o m.dcr --meta step=x
  want_rc 2 "encode --meta step=x"
  has e "SPEC.md §6.4.1" "encode names the rule"
}
tcase "append refuses wrong bases, other runs, skipped steps, other parents" t_refusals

# damaged ARCHIVE CODE WHAT [STEP]: verify, and extracting STEP (default: the
# last), fail with CODE, nothing written.
damaged() {
  run history verify "$1"
  want_rc 1 "verify $3" && has e "$2" "verify $3" || return
  run history extract "$1" --step "${4:-$STEPS}" -o never.safetensors
  [ "$RC" != 0 ] || fail "extract $3 succeeded"
  [ ! -e never.safetensors ] || fail "extract $3 left an output"
  ls -A | grep -q '^\.dcr-' && fail "extract $3 left a temporary file"
  return 0
}

t_damaged() {
  local size
  size=$(stat -c %s run.tar)
  head -c $((size / 2)) run.tar >cut.tar
  damaged cut.tar DCR_E_TRUNCATED "of half an archive"
  head -c $(($(stat -c %s run.zip) - 100)) run.zip >cut.zip
  damaged cut.zip DCR_E_ARCHIVE "of a zip cut in its central directory"
  cp run.tar flip.tar
  python3 - flip.tar <<'PY'
import sys, tarfile
p = sys.argv[1]
with tarfile.open(p) as t:
    m = [m for m in t if m.name == "bundles/step-00000018.dcr"][0]
with open(p, "r+b") as f:
    f.seek(m.offset_data + 100)
    b = f.read(1)
    f.seek(m.offset_data + 100)
    f.write(bytes([b[0] ^ 0x10]))
PY
  damaged flip.tar DCR_E_CHECKSUM "of a bundle with a flipped bit" 19
  run history extract flip.tar --step 20 -o after.safetensors -f -q
  want_rc 0 "a step whose keyframe is after the damage" && cmp -s after.safetensors "$(ck 20)" ||
    fail "step 20 differs"
  run history extract flip.tar --step 17 -o before.safetensors -f -q
  want_rc 0 "a step before the damage" && cmp -s before.safetensors "$(ck 17)" || fail "step 17 differs"
  gzip -c run.tar >run.tar.gz
  damaged run.tar.gz DCR_E_ARCHIVE "compressed with gzip"
  damaged b1.dcr DCR_E_ARCHIVE "of a bundle"
}
tcase "damaged and truncated archives: a specific error, nothing written" t_damaged

t_hand_made() {
  # A user's own tar (GNU format, by the tar program) with dcr's index.
  mkdir -p hm && tar -xf run.tar -C hm && (cd hm && tar -cf ../hand.tar dcr-history.json keyframes/step-00000000.safetensors \
    $(for i in $(seq 1 5); do printf 'bundles/step-%08d.dcr ' "$i"; done) keyframes/step-00000005.safetensors \
    $(for i in $(seq 6 20); do printf 'bundles/step-%08d.dcr ' "$i"; done) keyframes/step-00000010.safetensors \
    keyframes/step-00000015.safetensors keyframes/step-00000020.safetensors 2>/dev/null)
  # the order above is wrong after step 5: the index says keyframe 10 follows bundle 10
  run history verify hand.tar
  want_rc 1 "members out of the index's order" && has e DCR_E_ARCHIVE "order"
  (cd hm && tar -cf ../hand2.tar $(python3 -c 'import json; print(" ".join(["dcr-history.json"] + [m["name"] for m in json.load(open("dcr-history.json"))["members"]]))'))
  run history verify hand2.tar
  want_rc 0 "a GNU tar made by tar in the index's order"
}
tcase "archives made by the tar program" t_hand_made

t_signed() {
  # Bundles signed by the trainer's key: --require-signature on extract, verify and
  # append takes them, and refuses an archive with an unsigned one.
  run keygen trainer
  want_rc 0 "keygen" || return
  for i in 1 2 3; do
    run encode "$(ck $((i - 1)))" "$(ck "$i")" -o "s$i.dcr" --meta "step=$i" --sign trainer.key -f -q
    want_rc 0 "encode --sign step $i" || return
  done
  run history create signed.tar --keyframe "$(ck 0)" s1.dcr s2.dcr --require-signature trainer.pub -f -q
  want_rc 0 "create with signed bundles"
  run history append signed.tar b3.dcr --require-signature trainer.pub
  want_rc 1 "append an unsigned bundle" && has e DCR_E_SIGNATURE "append names the signature"
  run history append signed.tar s3.dcr --require-signature trainer.pub -q
  want_rc 0 "append a signed bundle"
  run history extract signed.tar --step 3 -o sig.safetensors --require-signature trainer.pub -f -q
  want_rc 0 "extract requiring signatures" && cmp -s sig.safetensors "$(ck 3)" || fail "signed step 3 differs"
  run history verify signed.tar --require-signature trainer.pub
  want_rc 0 "verify requiring signatures"
  run history extract run.tar --step 3 -o never.safetensors --require-signature trainer.pub
  want_rc 1 "extract of unsigned bundles requiring signatures" && has e DCR_E_SIGNATURE "extract"
  [ ! -e never.safetensors ] || fail "an unsigned extract left an output"
  run history verify run.tar --require-signature trainer.pub
  want_rc 1 "verify of unsigned bundles requiring signatures"
}
tcase "--require-signature on create, append, extract and verify" t_signed

t_crash() {
  # An append killed at a random moment leaves the old archive or the new one.
  local i seen_old=0 seen_new=0
  "$DCR" history create crash.tar --keyframe "$(ck 0)" $(bundles 1 15) -f -q || { fail "create"; return; }
  cp crash.tar old.tar
  for i in $(seq 1 12); do
    cp old.tar crash.tar
    "$DCR" history append -q crash.tar $(bundles 16 "$STEPS") --keyframe-every 2 &
    local pid=$!
    sleep "0.0$((RANDOM % 9))"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    run history verify crash.tar
    want_rc 0 "the archive after a kill (run $i)" || return
    run history list crash.tar --json
    case $(jget o 'j["last_step"]') in 15) seen_old=$((seen_old + 1)) ;; 20) seen_new=$((seen_new + 1)) ;;
      *) fail "last step $(jget o 'j["last_step"]')"; return ;; esac
  done
  echo "# killed appends: $seen_old left the old archive, $seen_new the new one"
}
tcase "appends killed at random moments" t_crash

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]

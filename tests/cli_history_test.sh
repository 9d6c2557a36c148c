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
  # list --json of an archive that cannot be read: a document that says why, as
  # verify --json and inspect --json give, and the error line
  run history list --json cut.zip; want_rc 1 "list --json of a cut zip"
  [ "$(jget o 'j["error"]["code"]')" = DCR_E_ARCHIVE ] && [ "$(jget o 'j["error"]["stage"]')" = archive ] &&
    [ "$(jget o 'j["archive"]')" = cut.zip ] || fail "list --json: $(shown o)"
  has e DCR_E_ARCHIVE "the error line"
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

# untouched OLD NEW: NEW's bytes before OLD's end of members, the index slot aside,
# are OLD's (an append in place writes nothing else, SPEC.md §19.6).
untouched() {
  python3 - "$1" "$2" <<'PY'
import sys, tarfile
old, new = (open(p, "rb").read() for p in sys.argv[1:3])
with tarfile.open(sys.argv[1]) as t:
    index = t.getmembers()[0]
    start, end = index.offset_data + index.size, t.offset
sys.exit(old[:index.offset_data] != new[:index.offset_data] or old[start:end] != new[start:end])
PY
}

t_in_place() {
  # A .tar is appended to in place: same inode, the old members' bytes untouched,
  # every step right; tar and Python read it; a reader holding it open holds an
  # append's writing off.
  run history create ip.tar --keyframe "$(ck 0)" $(bundles 1 5) -q; want_rc 0 "create" || return
  cp ip.tar ip.before
  local inode
  inode=$(stat -c %i ip.tar)
  run history append ip.tar $(bundles 6 8) --keyframe-every 4 -q; want_rc 0 "append 6..8" || return
  [ "$(stat -c %i ip.tar)" = "$inode" ] || fail "the archive was rewritten (new inode), not appended to in place"
  untouched ip.before ip.tar || fail "bytes before the old end changed outside the index slot"
  [ ! -e ip.tar.dcr-append ] || fail "the journal is left"
  run history verify ip.tar; want_rc 0 "verify" || return
  run history extract ip.tar --step 8 -o ip8.safetensors -f -q
  cmp -s ip8.safetensors "$(ck 8)" || fail "step 8 differs"
  py_members ip.tar | grep -qx 'keyframes/step-00000008.safetensors' || fail "Python does not see keyframe 8"
  tar -tf ip.tar | grep -qx 'bundles/step-00000008.dcr' || fail "tar -t does not list bundle 8"
  # a reader that has the archive open: the append waits for it to close it
  python3 - "$DCR" ip.tar b9.dcr <<'PY' || fail "an append did not wait for a reader"
import fcntl, os, struct, subprocess, sys, time
fd = os.open(sys.argv[2], os.O_RDONLY)
fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0))
p = subprocess.Popen([sys.argv[1], "history", "append", sys.argv[2], sys.argv[3], "-q"])
time.sleep(1.5)
waited = p.poll() is None
os.close(fd)
sys.exit(0 if waited and p.wait() == 0 else 1)
PY
  run history list ip.tar --json
  [ "$(jget o 'j["last_step"]')" = 9 ] || fail "after the waiting append: last step $(jget o 'j["last_step"]')"
  # an archive whose index has no room (the tar program's) is rewritten once, then appended to in place
  mkdir -p nr && tar -xf ip.before -C nr && python3 - nr/dcr-history.json <<'PY'
import sys
p = sys.argv[1]
text = open(p, "rb").read().rstrip(b" ")
open(p, "wb").write(text)
PY
  (cd nr && tar -cf ../noroom.tar dcr-history.json keyframes/step-00000000.safetensors \
    $(for i in $(seq 1 5); do printf 'bundles/step-%08d.dcr ' "$i"; done))
  inode=$(stat -c %i noroom.tar)
  run history append noroom.tar b6.dcr -q; want_rc 0 "append to an archive without room" || return
  [ "$(stat -c %i noroom.tar)" != "$inode" ] || fail "an index without room was appended to in place"
  inode=$(stat -c %i noroom.tar)
  run history append noroom.tar b7.dcr -q; want_rc 0 "the next append" || return
  [ "$(stat -c %i noroom.tar)" = "$inode" ] || fail "the rewritten archive got no room for its index"
  run history verify noroom.tar; want_rc 0 "verify the rewritten, then appended, archive"
  # tar.zst and zip are rewritten
  for c in tar.zst zip; do
    "$DCR" history create "ip.$c" --keyframe "$(ck 0)" b1.dcr -q -f
    inode=$(stat -c %i "ip.$c")
    run history append "ip.$c" b2.dcr -q; want_rc 0 "append to .$c" || return
    [ "$(stat -c %i "ip.$c")" != "$inode" ] || fail ".$c was written in place"
  done
}
tcase "a .tar is appended to in place; readers hold it off; no room, tar.zst, zip: rewritten" t_in_place

t_append_journal() {
  # A journal beside an archive: recover rolls back; a damaged one is refused by
  # every command, both files kept; create refuses a path with one beside it.
  run history recover ip.tar; want_rc 0 "recover, no journal" && has e "no unfinished append" "recover says so"
  cp ip.tar jr.tar
  printf 'not a journal at all, long enough to have a header and a check, really' > jr.tar.dcr-append
  cp jr.tar.dcr-append jr.journal
  for sub in list verify recover; do
    run history "$sub" jr.tar
    want_rc 1 "$sub beside a damaged journal" && has e DCR_E_JOURNAL "$sub names the journal"
  done
  run history append jr.tar b10.dcr; want_rc 1 "append beside a damaged journal" && has e DCR_E_JOURNAL "append"
  cmp -s jr.tar ip.tar && cmp -s jr.tar.dcr-append jr.journal || fail "a refused journal or its archive changed"
  run history create jr.tar --keyframe "$(ck 0)" -f; want_rc 2 "create beside a journal" && has e "dcr-append" "create"
  cmp -s jr.tar ip.tar || fail "create replaced the archive"
}
tcase "append journals: recover, damaged ones refused by every command, files kept" t_append_journal

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

t_help() {
  run history --help
  want_rc 0 "history --help"
  [ "$(grep -c -- '--memory' o)" = 1 ] || fail "the common options are printed $(grep -c -- '--memory' o) times"
}
tcase "history --help prints the common options once" t_help

# ---- Hostile archives (issue 32): small files that ask for gigabytes. Each must
# end with its own error within 512 MiB of peak resident memory and 15 s at
# --memory 256M, measured as tests/hostile_test.sh does (getrusage of the child).
# The archives are written by mkhistory_hostile.py; nothing large is kept.
MEASURE='
import resource, subprocess, sys
try:
    rc = subprocess.call(sys.argv[2:], timeout=float(sys.argv[1]), stdout=open("o", "wb"), stderr=open("e", "wb"))
except subprocess.TimeoutExpired:
    rc = 124
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)'
# bounded RC CODE ARGS [< FILE]: dcr ARGS --memory 256M exits RC naming CODE, in bounds.
bounded() {
  local rc=$1 code=$2 mib=512 secs=15 peak
  shift 2
  # sanitizers' shadow memory and slower code: the bounds still tell gigabytes apart
  if [ -n "${SANITIZE:-}" ]; then mib=$((mib * 2 + 512)) secs=$((secs * 4)); fi
  read -r RC peak < <(python3 -c "$MEASURE" "$secs" "$DCR" "$@" --memory 256M)
  echo "# dcr $* -> exit $RC, peak $peak MiB"
  [ "$RC" != 124 ] || { fail "$*: over $secs s"; return; }
  want_rc "$rc" "$*" && has e "$code" "$*" || return
  [ "$peak" -le "$mib" ] || fail "$*: peak $peak MiB, over $mib MiB"
}

t_index_bombs() {
  local kind c size
  for kind in array nested string members; do
    for c in tar.zst tar zip; do
      # in a tar or zip the index's bytes are the file's: smaller ones, as large
      # as asks for gigabytes
      size=$((250 << 20))
      [ "$c" != tar.zst ] && [ "$kind" != string ] && size=$((64 << 20))
      python3 "$HERE/mkhistory_hostile.py" index "$kind" "$size" "$kind.$c" || { fail "mkhistory_hostile.py"; return; }
      bounded 3 DCR_E_NOMEM history list "$kind.$c" || return
      has e "memory budget" "list $kind.$c" || return
      if [ "$c" = zip ] && [ "$kind" = array ]; then # a stream: the index's size comes after it
        echo "# standard input: $kind.$c"
        bounded 3 DCR_E_NOMEM history verify - <"$kind.$c" || return
      fi
      rm -f "$kind.$c"
    done
  done
}
tcase "index bombs (nested, arrays, strings, members) in tar, tar.zst, zip: DCR_E_NOMEM early" t_index_bombs

# hostile_member NAME ARCHIVE RC CODE: verify, and extract step 1, fail with CODE
# within the bounds, nothing written; then the archive is removed.
hostile_member() {
  bounded "$3" "$4" history verify "$2" || return
  has e "$1" "verify names the member" || return
  bounded "$3" "$4" history extract "$2" --step 1 -o never.safetensors || return
  [ ! -e never.safetensors ] || fail "extract of $2 left an output"
  rm -f "$2"
}

t_member_bombs() {
  # an archive of a keyframe and one bundle, whose index is then made to lie
  "$DCR" history create two.tar --keyframe "$(ck 0)" b1.dcr -f -q || { fail "create"; return; }
  tar -xOf two.tar dcr-history.json >two.json
  # index M KEY VALUE...: two.json with member M's keys set
  index() {
    python3 - "$@" <<'PY'
import json, sys
ix = json.load(open("two.json"))
m = ix["members"][int(sys.argv[1])]
for k, v in zip(sys.argv[2::2], sys.argv[3::2]):
    m[k] = int(v) if v.isdigit() else v
json.dump(ix, open("lie.json", "w"))
PY
  }
  local g=$HERE/mkhistory_hostile.py gib3=$((3 << 30)) zeros=9d267feaab1011a281e2dc14742c699d # XXH3-128 of 3 GiB of zeros
  local bundle=bundles/step-00000001.dcr keyframe=keyframes/step-00000000.safetensors c
  index 1 size "$gib3" xxh3_128 "$zeros"
  for c in tar.zst tar; do # a .tar with a hole, a .tar.zst of RLE blocks: 3 GiB, kilobytes
    python3 "$g" members lie.json "zero.$c" "$(ck 0)" "zeros:$gib3" || { fail "mkhistory_hostile.py"; return; }
    hostile_member "$bundle" "zero.$c" 1 DCR_E_MAGIC || return
  done
  python3 "$g" members lie.json head.tar.zst "$(ck 0)" "zeros:$gib3:b1.dcr:64" || { fail "mkhistory_hostile.py"; return; }
  hostile_member "$bundle" head.tar.zst 1 "DCR_E_CHECKSUM: step 1 ('$bundle'): section header" || return
  index 1 size $((1 << 40))
  for c in tar.zst tar; do # a member declared larger than the archive
    python3 "$g" members lie.json "cut.$c" "$(ck 0)" "cut:$((1 << 40))" || { fail "mkhistory_hostile.py"; return; }
    hostile_member "$bundle" "cut.$c" 1 DCR_E_TRUNCATED || return
  done
  index 0 size "$gib3" xxh3_128 "$zeros"
  python3 "$g" members lie.json kzero.tar.zst "zeros:$gib3" b1.dcr || { fail "mkhistory_hostile.py"; return; }
  hostile_member "$keyframe" kzero.tar.zst 1 DCR_E_CHECKPOINT
}
tcase "3 GiB zero members, members larger than the archive: their own error at their first bytes" t_member_bombs

t_budget() {
  # Bundles over a quarter of --memory are kept in a temporary file in TMPDIR.
  python3 "$HERE/mkchain.py" big 2 --bytes 8388608 --rate 0.3 --seed 5 || { fail "mkchain.py"; return; }
  local i
  for i in 1 2; do
    "$DCR" encode -q "big/step-000$((i - 1)).safetensors" "big/step-000$i.safetensors" -o "big$i.dcr" \
      --chunk-size 256K || { fail "encode"; return; }
  done
  run history create big.tar --keyframe big/step-0000.safetensors big1.dcr big2.dcr -q
  want_rc 0 "create" || return
  run history extract big.tar --step 2 -o big.safetensors --memory 2M -q
  want_rc 0 "extract at --memory 2M" && cmp -s big.safetensors big/step-0002.safetensors || fail "step 2 differs"
  run history verify big.tar --memory 2M
  want_rc 0 "verify at --memory 2M" || return
  TMPDIR=$W/none run history extract big.tar --step 2 -o none.safetensors --memory 2M
  want_rc 3 "a 600 KB bundle at --memory 2M, TMPDIR missing" && has e "temporary file" "the spool is named"
  [ ! -e none.safetensors ] || fail "an output was written"
  TMPDIR=$W/none run history extract big.tar --step 2 -o none.safetensors --memory 4M -q
  want_rc 0 "at --memory 4M the bundles are kept in memory"
  # --memory reaches create and append: a checkpoint of 30000 tensors and a
  # bundle to it, whose header and manifest need more than 1 MiB
  python3 - <<'PY'
import json, struct
for name, last in (("wide0.safetensors", 0), ("wide1.safetensors", 1)):
    header = {"t%05d" % i: {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(30000)}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    open(name, "wb").write(struct.pack("<Q", len(text)) + text + bytes(29999) + bytes([last]))
PY
  "$DCR" encode -q wide0.safetensors wide1.safetensors -o wide1.dcr || { fail "encode wide"; return; }
  run history create wide.tar --keyframe wide0.safetensors --memory 1M
  want_rc 3 "create at --memory 1M" && has e DCR_E_NOMEM "create"
  [ ! -e wide.tar ] || fail "create left an archive"
  run history create wide.tar --keyframe wide0.safetensors -q
  want_rc 0 "create" || return
  cp wide.tar wide.before
  run history append wide.tar wide1.dcr --memory 1M
  want_rc 3 "append at --memory 1M" && has e DCR_E_NOMEM "append"
  cmp -s wide.tar wide.before || fail "a refused append changed the archive"
}
tcase "--memory: large bundles kept in a temporary file; create and append within the budget" t_budget

# ---- directory keyframes (history 1.1): a Hugging Face model directory of 4
# shards with its index, config and tokenizer files; at step 2 a tensor moves to
# another shard, at step 3 the vocabulary grows (embedding rows and config.json).
MKSET=$HERE/mkset.py
same_tree() { diff -r "$1" "$2" >/dev/null || fail "$1 and $2 differ: $(diff -rq "$1" "$2" | head -3 | tr '\n' '|')"; }
"$DCR" synth d0.st d1.st --size 1M --seed 11 -q && "$DCR" synth d1.st d2.st --size 1M --seed 12 -q 2>/dev/null
python3 "$MKSET" d0.st D0 --shards 4 && python3 "$MKSET" d1.st D1 --shards 4 --config '{"lr": 2}' &&
  python3 "$MKSET" d1.st D2 --shards 4 --move model.embed_tokens.weight --config '{"lr": 3}' &&
  python3 "$MKSET" d1.st D3 --shards 4 --move model.embed_tokens.weight --grow model.embed_tokens.weight:64 \
    --config '{"vocab_size": 1762}' || exit 3
for i in 1 2 3; do
  "$DCR" encode -q "D$((i - 1))" "D$i" -o "d$i.dcr" --meta "step=$i" --meta run_id=run-d || exit 3
done

t_directories() {
  local a=$1 s before
  rm -rf "$a" X*
  before=$(ls -A | grep '^\.dcr-') # killed appends (t_crash) leave theirs
  run history create "$a" --keyframe D0 -q; want_rc 0 "create from a directory" || return
  for i in 1 2 3; do run history append "$a" "d$i.dcr" -q; want_rc 0 "append step $i" || return; done
  run history verify --json "$a"; want_rc 0 "verify" || return
  run history list --json "$a"; want_rc 0 "list" || return
  [ "$(jget o 'j["version"]')" = 1.1 ] || fail "a directory archive is 1.1: $(shown o)"
  [ "$(jget o 'j["member_list"][0]["files"]')" = "$(find D0 -type f | wc -l)" ] ||
    fail "the keyframe lists $(jget o 'j["member_list"][0]["files"]') files"
  for s in 0 1 2 3; do
    run history extract "$a" --step "$s" -o "X$s" -q; want_rc 0 "extract step $s" || return
    same_tree "X$s" "D$s"
  done
  # bitwise what dcr apply makes of the same bundles
  run apply D0 d1.dcr d2.dcr d3.dcr -o XA -q; want_rc 0 "dcr apply" && same_tree X3 XA
  run history extract - --step 2 -o XP -q < "$a"; want_rc 0 "extract from a pipe" && same_tree XP D2
  run history extract "$a" --step 1 -o X3 -q; want_rc 2 "an existing output without -f"
  same_tree X3 D3
  run history extract "$a" --step 1 -o X3 -f -q; want_rc 0 "-f replaces it" && same_tree X3 D1
  [ "$(ls -A | grep '^\.dcr-')" = "$before" ] || fail "a work directory was left: $(ls -A | grep '^\.dcr-')"
}
tcase "directory keyframes, tar: 4 shards, a moved tensor, a grown vocabulary; every step file for file" \
  t_directories dir.tar
tcase "directory keyframes, tar.zst" t_directories dir.tar.zst
tcase "directory keyframes, zip" t_directories dir.zip

t_directory_refusals() {
  run history create mixed.tar --keyframe D0 b1.dcr
  want_rc 2 "a file bundle after a directory keyframe" && has e "bundles of set" "says which kind"
  [ ! -e mixed.tar ] || fail "create left an archive"
  run history create mixed.tar --keyframe "$(ck 0)" d1.dcr
  want_rc 2 "a set bundle after a file keyframe"
  run history create dk.tar --keyframe D0 d1.dcr --keyframe-every 1
  want_rc 2 "keyframe_every with directory keyframes" && has e "keyframe_every" "says why"
  run history create dk.tar --keyframe D0 d1.dcr -q; want_rc 0 "create" || return
  run keygen dsig; want_rc 0 "keygen" || return
  run encode D1 D2 -o d2s.dcr --meta step=2 --meta run_id=run-d --sign dsig.key -q; want_rc 0 "encode --sign"
  run history append dk.tar d2.dcr --require-signature dsig.pub
  want_rc 1 "an unsigned set bundle under --require-signature" && has e DCR_E_SIGNATURE "signature"
  run history append dk.tar d2s.dcr --require-signature dsig.pub -q; want_rc 0 "a signed one" || return
  run history extract dk.tar --step 2 -o XS --require-signature dsig.pub -q
  want_rc 1 "extract under --require-signature: step 1 is unsigned" && [ ! -e XS ] || fail "XS written"
  run history verify dk.tar --require-signature dsig.pub; want_rc 1 "verify under --require-signature"
  run history append dk.tar d1.dcr; want_rc 1 "a bundle of another base" && has e DCR_E_BASE_MISMATCH "base mismatch"
}
tcase "directory archives refuse file bundles, file archives set bundles" t_directory_refusals

# Archives whose files would land outside the output, or are links: refused before
# anything is written. Made with Python's tarfile from the reference archive.
t_directory_hostile() {
  local before
  before=$(ls -A | grep '^\.dcr-')
  run history create good.tar --keyframe D0 d1.dcr -f -q; want_rc 0 "create" || return
  python3 - <<'PY' || { fail "python"; return; }
import io, json, tarfile
src = tarfile.open("good.tar")
members = [(m, src.extractfile(m).read()) for m in src.getmembers()]
index = json.loads(members[0][1])
def write(name, index, members, link=None):
    with tarfile.open(name, "w", format=tarfile.PAX_FORMAT) as t:
        data = json.dumps(index, indent=1).encode() + b"\n"
        info = tarfile.TarInfo("dcr-history.json"); info.size = len(data)
        t.addfile(info, io.BytesIO(data))
        for m, body in members[1:]:
            info = tarfile.TarInfo(m.name); info.size = len(body)
            if link and m.name == link:
                info.type, info.size, info.linkname = tarfile.SYMTYPE, 0, "/etc/passwd"
                t.addfile(info)
            else:
                t.addfile(info, io.BytesIO(body))
key = index["members"][0]
first = key["files"][0]["path"]
for vid, bad in (("dotdot", "../escaped.json"), ("absolute", "/tmp/escaped.json"), ("dot", "./x.json"),
                 ("hidden", ".hidden")):
    doc = json.loads(json.dumps(index))
    doc["members"][0]["files"][0]["path"] = bad
    ms = [(m, b) for m, b in members]
    ms[1][0].name = key["name"] + "/" + bad
    write("bad-%s.tar" % vid, doc, ms)
    ms[1][0].name = key["name"] + "/" + first
write("bad-link.tar", index, members, link=key["name"] + "/" + first)
PY
  for v in dotdot absolute dot hidden link; do
    run history extract "bad-$v.tar" --step 1 -o XH -q
    want_rc 1 "$v: refused" && has e DCR_E_ARCHIVE "$v: DCR_E_ARCHIVE"
    [ ! -e XH ] && [ ! -e escaped.json ] && [ ! -e ../escaped.json ] && [ ! -e /tmp/escaped.json ] ||
      fail "$v: something was written"
    run history verify "bad-$v.tar"; want_rc 1 "$v: verify refuses it"
  done
  # a damaged file of the keyframe: its digest, nothing written
  python3 -c 'import tarfile; t = tarfile.open("good.tar"); m = [m for m in t.getmembers() if m.name.endswith("config.json")][0]; b = bytearray(open("good.tar","rb").read()); b[m.offset_data] ^= 1; open("bad-digest.tar","wb").write(b)'
  run history extract bad-digest.tar --step 0 -o XH -q
  want_rc 1 "a damaged keyframe file" && has e DCR_E_CHECKSUM "DCR_E_CHECKSUM"
  [ ! -e XH ] || fail "a damaged keyframe was written"
  [ "$(ls -A | grep '^\.dcr-')" = "$before" ] || fail "a temporary directory was left"
}
tcase "directory archives: paths outside the output, links, damaged files refused, nothing written" \
  t_directory_hostile

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]

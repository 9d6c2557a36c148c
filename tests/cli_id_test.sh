#!/usr/bin/env bash
# cli_id_test.sh - end-to-end tests of state ids for people and scripts (SPEC.md
# §7): `dcr id`, `dcr id -c`, `dcr inspect` on a checkpoint, and the explanation
# printed after a base or target mismatch.
#
# usage: tests/cli_id_test.sh [path/to/dcr]      (default: build/dcr)
#
# Prints "ok - NAME" or "not ok - NAME: reason" per case, then "N passed, M
# failed"; exits 1 if any case failed. Needs bash and python3; sample checkpoints
# come from `dcr synth` and testvectors/v1/ckpt.
set -u

DCR=${1:-build/dcr}
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CKPT=$HERE/../testvectors/v1/ckpt

NAME=id-test
# shellcheck source=cli_lib.sh
. "$HERE/cli_lib.sh"

# A pair, and the bundle between them, with metadata.
"$DCR" synth b.st t.st --size 2M --rate 0.02 --seed 7 -q &&
  "$DCR" synth o.st o2.st --size 2M --rate 0.02 --seed 8 -q &&
  "$DCR" encode b.st t.st -o s.dcr --meta step=12 --meta run=abc -q &&
  "$DCR" inspect s.dcr --json >s.json || { echo "not ok - setup: synth/encode failed"; exit 1; }
BASE_STATE=$(jget s.json 'j["base_state"]')
TARGET_STATE=$(jget s.json 'j["target_state"]')

# ---------------------------------------------------------------------------
# dcr id

t_id_lines() {
  run id b.st t.st
  want_rc 0 "dcr id" || return
  printf '%s  b.st\n%s  t.st\n' "$BASE_STATE" "$TARGET_STATE" >want
  cmp -s o want || fail "output $(shown o), expected the bundle's states $(shown want)"
}
tcase "id: '<state>  FILE' lines, the states the bundle names (§7)" t_id_lines

t_id_threads() {
  local n
  for n in 1 3; do
    run id --threads "$n" b.st t.st o.st
    want_rc 0 "id --threads $n" || return
    cp o "th$n"
  done
  cmp -s th1 th3 || fail "--threads 1 and 3 differ: $(shown th1) / $(shown th3)"
}
tcase "id: the same ids whatever --threads" t_id_threads

t_id_json() {
  run id --json b.st "$CKPT/raw-base.bin" t.st
  want_rc 1 "id --json with a raw file among safetensors" || return
  has e DCR_E_ "stderr" || return
  python3 - o "$BASE_STATE" "$TARGET_STATE" <<'EOF' || fail "$(cat py.err)"
import json, os, sys
j = json.load(open(sys.argv[1]))
assert isinstance(j, list) and len(j) == 3, j
b, r, t = j
assert set(b) == {"file", "state_id", "kind", "tensors", "bytes"}, b
assert (b["file"], b["state_id"], b["kind"]) == ("b.st", sys.argv[2], "safetensors"), b
assert b["bytes"] == os.path.getsize("b.st") and b["tensors"] > 1, b
assert t["state_id"] == sys.argv[3], t
assert r["state_id"] is None and r["error"].startswith("DCR_E_") and r["message"], r
EOF
}
tcase "id --json: [{file, state_id, kind, tensors, bytes}], failures with their code" t_id_json 2>py.err

t_id_raw() {
  "$DCR" encode --raw "$CKPT/raw-base.bin" "$CKPT/raw-target.bin" -o r.dcr -q || { fail "encode --raw"; return; }
  "$DCR" inspect r.dcr --json >r.json || { fail "inspect"; return; }
  run id --raw "$CKPT/raw-base.bin" --json
  want_rc 0 "id --raw" || return
  [ "$(jget o 'j[0]["state_id"]')" = "$(jget r.json 'j["base_state"]')" ] || fail "raw id differs from the raw bundle's base state"
  [ "$(jget o 'j[0]["kind"]')/$(jget o 'j[0]["tensors"]')" = raw/1 ] || fail "kind/tensors: $(shown o)"
}
tcase "id --raw: one U8 tensor, the raw bundle's base state (§2)" t_id_raw

t_id_errors() {
  printf 'short' >short.bin
  run id short.bin b.st
  want_rc 1 "id of a 5-byte file" || return
  has e "dcr: short.bin: DCR_E_CHECKPOINT: " "stderr" || return
  has o "$BASE_STATE  b.st" "the next file is still printed" || return
  run id missing.st b.st short.bin
  want_rc 3 "id of a missing file (and a bad one)" || return
  has e "dcr: missing.st: DCR_E_IO: " "stderr" || return
  run id - <b.st
  want_rc 0 "id - < regular file" || return
  has o "$BASE_STATE  -" "stdin"
}
tcase "id: bad checkpoint -> 1, missing file -> 3, the others still printed; - is stdin" t_id_errors

t_id_escape() {
  local odd='we\ird
name.st'
  cp b.st "$odd"
  run id "$odd"
  want_rc 0 "id of a name with a backslash and a newline" || return
  [ "$(cat o)" = "\\$BASE_STATE  we\\\\ird\\nname.st" ] || { fail "not escaped as sha256sum does: $(shown o)"; return; }
  cp o odd.list
  run id -c odd.list
  want_rc 0 "id -c of an escaped line" || return
  [ "$(cat o)" = '\we\\ird\nname.st: OK' ] || fail "check output $(shown o)"
}
tcase "id: names with \\ or a newline escaped, and read back by -c" t_id_escape

t_usage() {
  run id
  want_rc 2 "no FILE" || return
  run id -c list b.st
  want_rc 2 "-c LIST and a FILE" || return
  run id --json -c list
  want_rc 2 "--json with -c" || return
  run id --bogus b.st
  want_rc 2 "unknown option" || return
  run id --help
  want_rc 0 "--help" || return
  has o "Usage: dcr id" "help" || return
  run --help
  has o "  id " "dcr --help lists id"
}
tcase "id: usage errors -> 2, --help on stdout" t_usage

# ---------------------------------------------------------------------------
# dcr id -c

t_check_ok() {
  "$DCR" id b.st t.st >list
  run id -c list
  want_rc 0 "id -c" || return
  printf 'b.st: OK\nt.st: OK\n' >want
  cmp -s o want || { fail "output $(shown o)"; return; }
  [ ! -s e ] || { fail "stderr not empty: $(shown e)"; return; }
  # upper case, the binary marker, stdin, --quiet
  awk '{ print toupper(substr($0, 1, 32)) substr($0, 33) }' list | sed '2s/  / */' >list2
  run id --check - <list2
  want_rc 0 "id --check - (upper case, ' *')" || return
  cmp -s o want || { fail "stdin output $(shown o)"; return; }
  run id -q -c list
  want_rc 0 "id -q -c" || return
  [ ! -s o ] || fail "-q printed OK lines: $(shown o)"
}
tcase "id -c: 'FILE: OK' for each line; LIST - is stdin; -q shows failures only" t_check_ok

t_check_failed() {
  printf '%s  b.st\n%s  t.st\n' "$TARGET_STATE" "$TARGET_STATE" >list
  run id -c list
  want_rc 1 "id -c with a wrong id" || return
  printf 'b.st: FAILED\nt.st: OK\n' >want
  cmp -s o want || { fail "output $(shown o)"; return; }
  has e "WARNING: 1 computed state id did NOT match" "warning" || return
  run id -q -c list
  has o "b.st: FAILED" "-q shows failures"
}
tcase "id -c: a wrong id -> 'FILE: FAILED', a warning, exit 1" t_check_failed

t_check_missing() {
  printf '%s  b.st\n%s  gone.st\n' "$BASE_STATE" "$TARGET_STATE" >list
  run id -c list
  want_rc 3 "id -c with a missing file" || return
  has o "b.st: OK" "output" || return
  has o "gone.st: FAILED open or read" "output" || return
  has e "dcr: gone.st: DCR_E_IO: " "error line" || return
  has e "WARNING: 1 listed file could not be read" "warning" || return
  run id -c no-such-list
  want_rc 3 "id -c with a missing LIST"
}
tcase "id -c: a file that cannot be read -> 'FAILED open or read', exit 3" t_check_missing

t_check_malformed() {
  printf '%s  b.st\nnot a line\n%s\n%s t.st\n' "$BASE_STATE" "$TARGET_STATE" "$TARGET_STATE" >list
  run id -c list
  want_rc 1 "id -c with malformed lines" || return
  [ "$(cat o)" = "b.st: OK" ] || { fail "output $(shown o)"; return; }
  has e "list:2: improperly formatted line" "line 2" || return
  has e "WARNING: 3 lines are improperly formatted" "warning" || return
  : >empty
  run id -c empty
  want_rc 1 "id -c of an empty list" || return
  has e "no properly formatted state id lines" "empty list"
}
tcase "id -c: malformed lines reported with their number, exit 1" t_check_malformed

# ---------------------------------------------------------------------------
# dcr inspect CHECKPOINT

t_inspect_ckpt() {
  run inspect b.st
  want_rc 0 "inspect CHECKPOINT" || return
  has o "b.st: safetensors checkpoint" "first line" || return
  has o "state  $BASE_STATE" "state line" || return
  has o "(-v lists the" "a long list is left to -v" || return
  run inspect -v b.st
  want_rc 0 "inspect -v" || return
  local n
  n=$(jget s.json 'len([t for t in j["tensors"] if t["base"]])')
  [ "$(grep -cE '^  [A-Z0-9]+ +\[' o)" = "$n" ] || { fail "-v lists $(grep -cE '^  [A-Z0-9]+ +\[' o) tensors, expected $n"; return; }
  run inspect "$CKPT/tensors-target.safetensors"
  want_rc 0 "inspect a small checkpoint" || return
  grep -qE '^  [A-Z0-9]+ +\[' o || fail "a short list is shown without -v: $(shown o)"
}
tcase "inspect CHECKPOINT: kind, size, state id; tensors with -v or when few" t_inspect_ckpt

t_inspect_ckpt_json() {
  run inspect --json b.st
  want_rc 0 "inspect --json CHECKPOINT" || return
  python3 - o s.json <<'EOF' || fail "$(cat py.err)"
import json, os, sys
j, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert {"file", "kind", "file_size", "prefix_length", "tensor_count", "state_id", "tensors"} <= set(j), j.keys()
assert j["state_id"] == s["base_state"] and j["kind"] == "safetensors", j["state_id"]
assert j["file_size"] == os.path.getsize("b.st")
base = {t["name"]: t["base"] for t in s["tensors"] if t["base"]}
assert j["tensor_count"] == len(j["tensors"]) == len(base)
names = [t["name"] for t in j["tensors"]]
assert names == sorted(names, key=lambda n: n.encode()), "not in bytewise name order"
for t in j["tensors"]:
    b = base[t["name"]]
    for k in ("dtype", "shape", "byte_length", "hash"):
        assert t[k] == b[k], (t["name"], k, t[k], b[k])
    assert isinstance(t["offset"], int)
EOF
}
tcase "inspect --json CHECKPOINT: tensors and hashes are the bundle's base entries" t_inspect_ckpt_json 2>py.err

t_inspect_not_ckpt() {
  printf '\020\0\0\0\0\0\0\0not JSON at all!' >junk.bin
  run inspect junk.bin
  want_rc 1 "inspect of neither a bundle nor a checkpoint" || return
  [ "$(grep -oE 'DCR_E_[A-Z_]+' e | head -n 1)" = DCR_E_MAGIC ] || { fail "first code is not DCR_E_MAGIC: $(shown e)"; return; }
  has e "nor a safetensors checkpoint: DCR_E_CHECKPOINT" "note" || return
  run inspect s.dcr
  want_rc 0 "inspect BUNDLE" || return
  has o "s.dcr: DCR bundle" "bundle view unchanged"
}
tcase "inspect: neither bundle nor checkpoint -> DCR_E_MAGIC; bundles as before" t_inspect_not_ckpt

# ---------------------------------------------------------------------------
# Mismatches explained

t_explain_base() {
  local other
  other=$("$DCR" id o.st | cut -d' ' -f1)
  run validate s.dcr --base o.st
  want_rc 1 "validate --base OTHER" || return
  [ "$(grep -oE 'DCR_E_[A-Z_]+' e | head -n 1)" = DCR_E_BASE_MISMATCH ] || { fail "first code: $(shown e)"; return; }
  has e "  bundle expects base state $BASE_STATE" "base state" || return
  has e "  bundle makes target state $TARGET_STATE" "target state" || return
  has e "  input has state $other" "input state" || return
  has e "  bundle metadata: run=abc step=12" "metadata" || return
  has e "neither this bundle's base nor its target" "hint" || return
  run validate s.dcr --base o.st --json
  want_rc 1 "validate --base OTHER --json" || return
  python3 -c 'import json,sys; json.load(open("o"))' || { fail "--json output is not JSON"; return; }
  grep -q "bundle expects" e && fail "--json: explanation on stderr"
}
tcase "validate --base OTHER: the bundle's states, the input's, metadata, a hint" t_explain_base

t_explain_target() {
  run validate s.dcr --target b.st
  want_rc 1 "validate --target BASE" || return
  has e "DCR_E_TARGET_MISMATCH" "code" || return
  has e "  input has state $BASE_STATE" "input state" || return
  has e "hint: input is this bundle's base, not its target" "hint" || return
  # the target's tensors behind a header padded with spaces: same state, other file
  python3 - t.st t-padded.st <<'EOF' || { fail "padding"; return; }
import struct, sys
d = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", d[:8])[0]
open(sys.argv[2], "wb").write(struct.pack("<Q", n + 8) + d[8:8 + n] + b" " * 8 + d[8 + n:])
EOF
  run validate s.dcr --target t-padded.st
  want_rc 1 "validate --target PADDED" || return
  has e "  input has state $TARGET_STATE" "input state" || return
  has e "hint: input holds the target's tensors" "hint"
}
tcase "validate --target: the input's state and what it is (base; target's tensors, other header)" t_explain_target

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]

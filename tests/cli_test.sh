#!/usr/bin/env bash
# cli_test.sh - end-to-end tests of the dcr command-line tool (SPEC.md, CLI contract).
#
# usage: tests/cli_test.sh [path/to/dcr]      (default: build/dcr)
#
# Prints one line per case, "ok - NAME" or "not ok - NAME: reason", then a last
# line "N passed, M failed"; exits 1 if any case failed. Needs bash, python3 and
# the usual coreutils; uses xxhsum/xxh128sum (xxHash >= 0.8) when present to check
# hashes, state ids and to build re-checksummed bundles, and skips those checks
# otherwise. Checkpoints are made by tests/mkckpt.py from tests/cases/*.json.
set -u

DCR=${1:-build/dcr}
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CASES=$HERE/cases
MKCKPT=$HERE/mkckpt.py

if [ ! -x "$DCR" ]; then
  echo "not ok - setup: $DCR is not an executable file"
  echo "0 passed, 1 failed"
  exit 1
fi

W=$(mktemp -d "${TMPDIR:-/tmp}/dcr-cli-test.XXXXXX") || exit 3
trap 'rm -rf "$W"' EXIT
trap 'exit 130' INT TERM

HAVE_XXH=0
command -v xxh128sum >/dev/null 2>&1 && command -v xxhsum >/dev/null 2>&1 && HAVE_XXH=1
TIMEOUT=()
command -v timeout >/dev/null 2>&1 && TIMEOUT=(timeout 60)

# ---------------------------------------------------------------------------
# JSON checks and bundle surgery, in python (standard library + mkckpt.py)

cat >"$W/jcheck.py" <<'PYEOF'
import argparse, json, os, re, struct, subprocess, sys
sys.path.insert(0, os.environ["MKDIR"])
import mkckpt

HAVE_XXH = os.environ.get("HAVE_XXH") == "1"
CODES = ["DCR_OK", "DCR_E_IO", "DCR_E_NOMEM", "DCR_E_ARGUMENT", "DCR_E_TRUNCATED",
         "DCR_E_MAGIC", "DCR_E_VERSION", "DCR_E_RESERVED", "DCR_E_CHECKSUM",
         "DCR_E_LIMIT", "DCR_E_STRUCTURE", "DCR_E_UNKNOWN_SECTION", "DCR_E_MANIFEST",
         "DCR_E_NAME", "DCR_E_DTYPE", "DCR_E_SHAPE", "DCR_E_LAYOUT", "DCR_E_INDEX",
         "DCR_E_ENCODING", "DCR_E_POSITION", "DCR_E_DECOMPRESS",
         "DCR_E_BASE_MISMATCH", "DCR_E_TARGET_MISMATCH", "DCR_E_CHECKPOINT",
         "DCR_E_INTERRUPTED"]
ENCODINGS = {"XOR_DENSE", "XOR_SPARSE", "OVERWRITE_DENSE", "OVERWRITE_SPARSE", "DELTA_DENSE", "DELTA_SPARSE",
             "DELTA_CLASSED", "DELTA_BANDED"}
CRITICAL = {"MANI": True, "RSIZ": True, "META": False, "CHNK": True, "IDEN": True, "INDX": True,
            "SIGN": False, "FOOT": True}


def bad(msg):
    print(msg[:600])
    sys.exit(1)


def load(path):
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except Exception as e:
        bad("cannot read JSON output: %s" % e)
    try:
        return json.loads(text)
    except Exception as e:
        bad("output is not one JSON object (%s): %r" % (e, text[:200]))


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def expect(cond, msg):
    if not cond:
        bad(msg)


def xxh3_64(data):
    p = subprocess.run(["xxhsum", "-H3", "-"], input=data, stdout=subprocess.PIPE,
                       check=True)
    return int(p.stdout.split()[-1], 16)


def checkpoint(path, kind):
    if kind == "raw":
        with open(path, "rb") as f:
            data = f.read()
        return {"prefix_length": 0, "tensors": [
            {"name": "raw", "dtype": "U8", "shape": [len(data)], "begin": 0,
             "end": len(data), "data": data}]}
    return mkckpt.parse(path)


def check_sections(j, size):
    secs = j["sections"]
    expect(isinstance(secs, list) and len(secs) >= 4, "sections: too few: %r" % secs)
    prev_end = 64
    types = []
    for i, s in enumerate(secs):
        expect(isinstance(s, dict) and set(s) >= {"type", "offset", "length", "critical",
                                                  "compression"},
               "sections[%d]: missing keys: %r" % (i, s))
        expect(is_int(s["offset"]) and is_int(s["length"]), "sections[%d]: %r" % (i, s))
        expect(s["offset"] == prev_end, "sections[%d] (%s) at offset %d, expected %d"
               % (i, s["type"], s["offset"], prev_end))
        expect(s["compression"] in ("none", "zstd"), "sections[%d]: compression %r"
               % (i, s["compression"]))
        expect(isinstance(s["critical"], bool), "sections[%d]: critical %r" % (i, s))
        t = s["type"]
        if t in CRITICAL:
            expect(s["critical"] == CRITICAL[t], "section %s critical=%r" % (t, s["critical"]))
        if t in ("CHNK", "IDEN", "INDX", "SIGN", "FOOT"):
            expect(s["compression"] == "none", "section %s compressed" % t)
        prev_end = s["offset"] + ((32 + s["length"] + 63) // 64) * 64
        types.append(t)
    expect(prev_end == size, "sections end at %d, bundle is %d bytes" % (prev_end, size))
    expect(types[0] == "MANI" and secs[0]["offset"] == 64, "first section is not MANI at 64")
    expect(types[-1] == "FOOT" and secs[-1]["length"] == 32 and secs[-1]["offset"] == size - 64,
           "last section is not FOOT of length 32 at size-64: %r" % secs[-1])
    known = [t for t in types if t in ("MANI", "CHNK", "IDEN", "INDX", "FOOT")]
    expect(types.count("RSIZ") <= 1 and (not types.count("RSIZ") or types[1] == "RSIZ"),
           "RSIZ is the second section, if any: %r" % types[:3])
    n = known.count("CHNK")
    expect(known == ["MANI"] + ["CHNK"] * n + ["IDEN", "INDX", "FOOT"],
           "critical sections out of order: %r" % types)
    expect(types.count("META") <= 1, "more than one META")
    expect(len(j["sections"]) == len(types), "")
    return n


def cmd_inspect(a):
    j = load(a.json)
    size = os.path.getsize(a.bundle)
    keys = {"file", "format_version", "bundle_size", "kind", "chunk_size", "target_size",
            "prefix_length", "chunk_count", "base_state", "target_state", "sections",
            "meta", "tensors", "totals"}
    expect(isinstance(j, dict), "inspect --json: not an object")
    missing = keys - set(j)
    expect(not missing, "inspect --json: missing keys %s" % sorted(missing))
    # §12: 1.3 when a tensor is coded against base bytes (DELTA_BANDED may be used),
    # else 1.1 for resized tensors, else 1.0
    tensors = j.get("tensors", [])
    resized = any(t.get("status") == "resized" for t in tensors)
    base_coded = resized or any(t.get("status") in ("changed", "unchanged", "reshaped") and
                                t["target"]["byte_length"] > 0 for t in tensors)
    want = "1.3" if base_coded else "1.1" if resized else "1.0"
    expect(j["format_version"] == want, "format_version %r, expected %r (resized tensors: %r)"
           % (j["format_version"], want, resized))
    expect(j["bundle_size"] == size, "bundle_size %r, file is %d" % (j["bundle_size"], size))
    expect(j["kind"] == a.kind, "kind %r, expected %r" % (j["kind"], a.kind))
    expect(j["chunk_size"] == a.chunk_size, "chunk_size %r, expected %d"
           % (j["chunk_size"], a.chunk_size))
    tsize = os.path.getsize(a.target)
    expect(j["target_size"] == tsize, "target_size %r, target file is %d"
           % (j["target_size"], tsize))
    for k in ("base_state", "target_state"):
        expect(isinstance(j[k], str) and re.fullmatch("[0-9a-f]{32}", j[k]),
               "%s %r is not 32 lower-case hex chars" % (k, j[k]))
    nchnk = check_sections(j, size)
    expect(j["chunk_count"] == nchnk, "chunk_count %r but %d CHNK sections"
           % (j["chunk_count"], nchnk))
    if a.chunks is not None:
        expect(j["chunk_count"] == a.chunks, "chunk_count %r, expected %d"
               % (j["chunk_count"], a.chunks))
    if a.level0:
        for s in j["sections"]:
            expect(s["compression"] == "none", "--level 0 but section %s at %d is %s"
                   % (s["type"], s["offset"], s["compression"]))
    meta = j["meta"]
    expect(isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values()),
           "meta is not an object of strings: %r" % meta)
    if a.meta is not None:
        want = json.loads(a.meta)
        for k, v in want.items():
            expect(meta.get(k) == v, "meta[%r] = %r, expected %r" % (k, meta.get(k), v))
        if a.meta_exact:
            expect(meta == want, "meta %r, expected exactly %r" % (meta, want))

    base = checkpoint(a.base, a.kind)
    target = checkpoint(a.target, a.kind)
    expect(j["prefix_length"] == target["prefix_length"], "prefix_length %r, expected %d"
           % (j["prefix_length"], target["prefix_length"]))
    d = mkckpt.diff(base["tensors"], target["tensors"], a.chunk_size)
    if HAVE_XXH:
        bstate = mkckpt.state_id(base["tensors"])
        tstate = mkckpt.state_id(target["tensors"])
        expect(j["base_state"] == bstate, "base_state %s, computed %s" % (j["base_state"], bstate))
        expect(j["target_state"] == tstate, "target_state %s, computed %s"
               % (j["target_state"], tstate))
    bt = {t["name"]: t for t in base["tensors"]}
    tt = {t["name"]: t for t in target["tensors"]}
    names = sorted(set(bt) | set(tt), key=lambda s: s.encode("utf-8"))
    tens = j["tensors"]
    expect(isinstance(tens, list), "tensors is not a list")
    got_names = [t.get("name") for t in tens]
    expect(got_names == names, "tensor names %r, expected (bytewise sorted) %r"
           % (got_names[:20], names[:20]))
    tot_el = tot_ch = tot_pb = 0
    tot_enc = {}
    for t in tens:
        name = t["name"]
        for k in ("status", "base", "target", "changed_chunks", "changed_elements",
                  "payload_bytes", "encodings"):
            expect(k in t, "tensor %r: no key %r" % (name, k))
        want = d["tensors"][name]
        st = t["status"]
        if want["status"] in ("unchanged", "changed") and bt[name]["shape"] != tt[name]["shape"]:
            expect(st == "reshaped", "tensor %r (reshaped, delta-coded): status %r, "
                   "expected reshaped" % (name, st))
        else:
            expect(st == want["status"], "tensor %r: status %r, expected %r"
                   % (name, st, want["status"]))
        for side, src in (("base", bt), ("target", tt)):
            desc = t[side]
            if name not in src:
                expect(desc is None, "tensor %r: %s should be null: %r" % (name, side, desc))
                continue
            s = src[name]
            expect(isinstance(desc, dict), "tensor %r: %s is %r" % (name, side, desc))
            expect(desc.get("dtype") == s["dtype"], "tensor %r: %s dtype %r, expected %r"
                   % (name, side, desc.get("dtype"), s["dtype"]))
            expect(desc.get("shape") == s["shape"], "tensor %r: %s shape %r, expected %r"
                   % (name, side, desc.get("shape"), s["shape"]))
            expect(desc.get("byte_length") == s["end"] - s["begin"],
                   "tensor %r: %s byte_length %r, expected %d"
                   % (name, side, desc.get("byte_length"), s["end"] - s["begin"]))
            if side == "target":
                expect(desc.get("offset") == s["begin"], "tensor %r: target offset %r, "
                       "expected %d" % (name, desc.get("offset"), s["begin"]))
            if HAVE_XXH:
                expect(desc.get("hash") == s["hash"], "tensor %r: %s hash %r, expected %s"
                       % (name, side, desc.get("hash"), s["hash"]))
        expect(t["changed_elements"] == want["changed_elements"],
               "tensor %r: changed_elements %r, expected %d"
               % (name, t["changed_elements"], want["changed_elements"]))
        expect(t["changed_chunks"] == want["changed_chunks"],
               "tensor %r: changed_chunks %r, expected %d"
               % (name, t["changed_chunks"], want["changed_chunks"]))
        enc = t["encodings"]
        expect(isinstance(enc, dict) and set(enc) <= ENCODINGS and
               all(is_int(v) and v >= 0 for v in enc.values()),
               "tensor %r: encodings %r" % (name, enc))
        expect(sum(enc.values()) == t["changed_chunks"], "tensor %r: encodings %r do not "
               "add up to changed_chunks %r" % (name, enc, t["changed_chunks"]))
        expect(is_int(t["payload_bytes"]) and t["payload_bytes"] >= 0,
               "tensor %r: payload_bytes %r" % (name, t["payload_bytes"]))
        expect((t["payload_bytes"] == 0) == (t["changed_chunks"] == 0),
               "tensor %r: payload_bytes %r with %r changed chunks"
               % (name, t["payload_bytes"], t["changed_chunks"]))
        tot_el += t["changed_elements"]
        tot_ch += t["changed_chunks"]
        tot_pb += t["payload_bytes"]
        for k, v in enc.items():
            tot_enc[k] = tot_enc.get(k, 0) + v
    tot = j["totals"]
    expect(isinstance(tot, dict), "totals %r" % tot)
    expect(tot.get("changed_elements") == tot_el == d["totals"]["changed_elements"],
           "totals.changed_elements %r, tensors add up to %d, expected %d"
           % (tot.get("changed_elements"), tot_el, d["totals"]["changed_elements"]))
    expect(tot.get("changed_chunks") == tot_ch == j["chunk_count"],
           "totals.changed_chunks %r, tensors add up to %d, chunk_count %r"
           % (tot.get("changed_chunks"), tot_ch, j["chunk_count"]))
    expect(tot.get("payload_bytes") == tot_pb, "totals.payload_bytes %r, tensors add up "
           "to %d" % (tot.get("payload_bytes"), tot_pb))
    chnk = sum(s["length"] for s in j["sections"] if s["type"] == "CHNK")
    expect(tot_pb in (chnk, chnk - 32 * nchnk), "payload_bytes %d is neither the CHNK "
           "payloads (%d) nor their encoded data (%d)" % (tot_pb, chnk, chnk - 32 * nchnk))
    got_enc = {k: v for k, v in tot.get("encodings", {}).items() if v}
    expect(got_enc == {k: v for k, v in tot_enc.items() if v},
           "totals.encodings %r, tensors add up to %r" % (tot.get("encodings"), tot_enc))


def cmd_validate(a):
    j = load(a.json)
    expect(isinstance(j, dict), "validate --json: not an object")
    missing = {"file", "valid", "errors", "checks"} - set(j)
    expect(not missing, "validate --json: missing keys %s" % sorted(missing))
    ch = j["checks"]
    expect(isinstance(ch, dict) and set(ch) >= {"structure", "chunks", "base", "target"},
           "checks %r" % ch)
    expect(isinstance(j["errors"], list), "errors is not a list")
    for e in j["errors"]:
        expect(isinstance(e, dict) and set(e) >= {"code", "number", "message", "offset",
                                                  "section", "tensor", "chunk"},
               "error object lacks keys: %r" % e)
        expect(e["code"] in CODES and e["number"] == CODES.index(e["code"]),
               "error code/number %r/%r" % (e["code"], e["number"]))
        expect(isinstance(e["message"], str), "message %r" % e["message"])
        expect(e["offset"] is None or is_int(e["offset"]), "offset %r" % e["offset"])
        expect(e["chunk"] is None or is_int(e["chunk"]), "chunk %r" % e["chunk"])
        expect(e["section"] is None or isinstance(e["section"], str), "section %r" % e["section"])
        expect(e["tensor"] is None or isinstance(e["tensor"], str), "tensor %r" % e["tensor"])
    if a.valid:
        expect(j["valid"] is True, "valid is %r: %r" % (j["valid"], j["errors"][:1]))
        expect(j["errors"] == [], "valid but errors %r" % j["errors"][:2])
        expect(ch["structure"] is True and ch["chunks"] is True, "checks %r" % ch)
        expect(ch["base"] is (True if a.base else None), "checks.base %r" % ch["base"])
        expect(ch["target"] is (True if a.target else None), "checks.target %r" % ch["target"])
    else:
        expect(j["valid"] is False, "valid is %r, expected false" % j["valid"])
        expect(j["errors"], "invalid but no errors")
        e = j["errors"][0]
        expect(e["code"] == a.code, "errors[0].code %r, expected %s (%s)"
               % (e["code"], a.code, e.get("message")))
        if a.check_false:
            expect(ch.get(a.check_false) is False, "checks.%s is %r, expected false"
                   % (a.check_false, ch.get(a.check_false)))


def cmd_rt(a):
    """Round trip: validate --json, validate --base --target --json, inspect --json."""
    for path, both in ((a.v1, False), (a.v2, True)):
        v = argparse.Namespace(json=path, valid=True, code=None, base=both, target=both,
                               check_false=None)
        try:
            cmd_validate(v)
        except SystemExit:
            print("(validate%s --json)" % (" --base --target" if both else ""))
            raise
    cmd_inspect(a)
    print(load(a.json)["chunk_count"])


def cmd_sections(a):
    for s in load(a.json)["sections"]:
        print(s["type"], s["offset"], s["length"])


def cmd_get(a):
    v = load(a.json)
    for k in a.path.split("."):
        v = v[int(k)] if isinstance(v, list) else v[k]
    print(v if not isinstance(v, (dict, list)) else json.dumps(v))


def cmd_rehdr(a):
    """Copy BUNDLE to OUT with bundle-header bytes set, and the check recomputed."""
    b = bytearray(open(a.bundle, "rb").read())
    for spec in a.set:
        off, hexbytes = spec.split(":")
        val = bytes.fromhex(hexbytes)
        b[int(off):int(off) + len(val)] = val
    b[56:64] = struct.pack("<Q", xxh3_64(bytes(b[0:56])))
    open(a.out, "wb").write(b)


def cmd_resec(a):
    """Copy BUNDLE to OUT with bytes of the section header at SECOFF set, and its
    header check recomputed."""
    b = bytearray(open(a.bundle, "rb").read())
    o = a.secoff
    for spec in a.set:
        off, hexbytes = spec.split(":")
        val = bytes.fromhex(hexbytes)
        b[o + int(off):o + int(off) + len(val)] = val
    b[o + 24:o + 32] = struct.pack("<Q", xxh3_64(bytes(b[o:o + 24])))
    open(a.out, "wb").write(b)


def cmd_insert(a):
    """Copy BUNDLE to OUT with a section of type TYPE (flags FLAGS) and a payload of
    LEN bytes inserted just before the footer; all checks are valid."""
    b = open(a.bundle, "rb").read()
    payload = bytes((i * 7 + 3) & 0xFF for i in range(a.length))
    hdr = a.type.encode("ascii") + struct.pack("<HBBQQ", a.flags, 0, 0, a.length,
                                               xxh3_64(payload))
    hdr += struct.pack("<Q", xxh3_64(hdr))
    sec = hdr + payload
    sec += bytes((-len(sec)) % 64)
    open(a.out, "wb").write(b[:-64] + sec + b[-64:])


p = argparse.ArgumentParser()
sub = p.add_subparsers(dest="cmd", required=True)
q = sub.add_parser("inspect")
q.add_argument("json"); q.add_argument("bundle"); q.add_argument("base")
q.add_argument("target"); q.add_argument("kind"); q.add_argument("chunk_size", type=int)
q.add_argument("--chunks", type=int); q.add_argument("--level0", action="store_true")
q.add_argument("--meta"); q.add_argument("--meta-exact", action="store_true")
q.set_defaults(f=cmd_inspect)
q = sub.add_parser("rt")
q.add_argument("v1"); q.add_argument("v2")
q.add_argument("json"); q.add_argument("bundle"); q.add_argument("base")
q.add_argument("target"); q.add_argument("kind"); q.add_argument("chunk_size", type=int)
q.add_argument("--chunks", type=int); q.add_argument("--level0", action="store_true")
q.add_argument("--meta"); q.add_argument("--meta-exact", action="store_true")
q.set_defaults(f=cmd_rt)
q = sub.add_parser("validate")
q.add_argument("json"); q.add_argument("--valid", action="store_true")
q.add_argument("--invalid", dest="code"); q.add_argument("--base", action="store_true")
q.add_argument("--target", action="store_true"); q.add_argument("--check-false")
q.set_defaults(f=cmd_validate)
q = sub.add_parser("sections"); q.add_argument("json"); q.set_defaults(f=cmd_sections)
q = sub.add_parser("get"); q.add_argument("json"); q.add_argument("path")
q.set_defaults(f=cmd_get)
q = sub.add_parser("rehdr"); q.add_argument("bundle"); q.add_argument("out")
q.add_argument("set", nargs="+"); q.set_defaults(f=cmd_rehdr)
q = sub.add_parser("resec"); q.add_argument("bundle"); q.add_argument("out")
q.add_argument("secoff", type=int); q.add_argument("set", nargs="+")
q.set_defaults(f=cmd_resec)
q = sub.add_parser("insert"); q.add_argument("bundle"); q.add_argument("out")
q.add_argument("type"); q.add_argument("flags", type=int); q.add_argument("length", type=int)
q.set_defaults(f=cmd_insert)
a = p.parse_args()
a.f(a)
PYEOF
export MKDIR=$HERE HAVE_XXH

# ---------------------------------------------------------------------------
# Framework

PASS=0
FAIL=0
T=
WHY=
NOTE=
RC=0

# A case: tcase NAME FUNCTION ARGS...; FUNCTION calls fail (first reason wins) and
# returns early; note sets text shown after "ok - NAME".
tcase() {
  T=$1
  WHY=
  NOTE=
  shift
  "$@"
  if [ -z "$WHY" ]; then
    PASS=$((PASS + 1))
    echo "ok - $T${NOTE:+ ($NOTE)}"
  else
    FAIL=$((FAIL + 1))
    echo "not ok - $T: $WHY"
  fi
}
fail() {
  [ -n "$WHY" ] || WHY=$*
  return 1
}
note() { NOTE=$*; }

MK() { python3 "$MKCKPT" "$@"; }
# flip FILE OFFSET BIT: flip one bit in place
flip() {
  local v
  v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' \n')
  [ -n "$v" ] || return 1
  printf "$(printf '\\%03o' $((v ^ (1 << $3))))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
# jc ARGS: run a jcheck.py command; on failure, fail with its message. Output in JC.
jc() {
  JC=$(python3 "$W/jcheck.py" "$@" 2>&1) || { fail "${JC:-jcheck $1 failed}"; return 1; }
}

# dcr ARGS: run dcr, stdin /dev/null, stdout to $W/o, stderr to $W/e, exit status RC.
dcr() {
  "${TIMEOUT[@]}" "$DCR" "$@" </dev/null >"$W/o" 2>"$W/e"
  RC=$?
}
# dcr_in FILE ARGS: the same with stdin from FILE.
dcr_in() {
  local in=$1
  shift
  "${TIMEOUT[@]}" "$DCR" "$@" <"$in" >"$W/o" 2>"$W/e"
  RC=$?
}
# dcr_to FILE ARGS: the same with stdout to FILE.
dcr_to() {
  local out=$1
  shift
  "${TIMEOUT[@]}" "$DCR" "$@" </dev/null >"$out" 2>"$W/e"
  RC=$?
}
err() { head -c 400 "$W/e" | tr '\n' '|'; }

# expect_rc N WHAT: the last dcr exited N.
expect_rc() {
  [ "$RC" = "$1" ] && return 0
  fail "$2: exit $RC, expected $1${3:+ ($3)}; stderr: $(err)"
}
# expect_code CODE WHAT: the first DCR_E_ code on stderr is CODE, on a line "dcr: ...".
expect_code() {
  local got
  got=$(grep -oE 'DCR_E_[A-Z_]+' "$W/e" | head -n 1)
  [ "$got" = "$1" ] || { fail "$2: stderr has ${got:-no DCR_E_ code}, expected $1: $(err)"; return 1; }
  grep -qE "^dcr: (.*: )?$1: " "$W/e" ||
    { fail "$2: error line not in the form 'dcr: FILE: $1: message': $(err)"; return 1; }
}

# roundtrip BASE TARGET KIND CHUNK_SIZE [encode options...]
#   encode, validate, validate --json, validate --base --target --json, apply, cmp,
#   inspect, inspect --json checked against the inputs. Leaves $W/rt.dcr and
#   $W/rt.json. Extra jcheck inspect options in the array JCX.
JCX=()
roundtrip() {
  local base=$1 target=$2 kind=$3 chunk=$4
  shift 4
  rm -f "$W/rt.dcr" "$W/rt.out" "$W/rt.json"
  dcr encode "$base" "$target" -o "$W/rt.dcr" "$@"
  expect_rc 0 "encode $*" || return 1
  [ -s "$W/rt.dcr" ] || { fail "encode exited 0 but wrote no bundle"; return 1; }
  dcr validate "$W/rt.dcr"
  expect_rc 0 "validate" || return 1
  dcr validate "$W/rt.dcr" --json
  expect_rc 0 "validate --json" || return 1
  cp "$W/o" "$W/rt.v1"
  dcr validate "$W/rt.dcr" --base "$base" --target "$target" --json
  expect_rc 0 "validate --base --target --json" || return 1
  cp "$W/o" "$W/rt.v2"
  dcr validate "$W/rt.dcr" --base "$base" --target "$target"
  expect_rc 0 "validate --base --target" || return 1
  dcr apply "$base" "$W/rt.dcr" -o "$W/rt.out"
  expect_rc 0 "apply" || return 1
  cmp -s "$W/rt.out" "$target" ||
    { fail "apply output differs from the target: $(cmp "$W/rt.out" "$target" 2>&1 | head -n 1)"; return 1; }
  dcr inspect "$W/rt.dcr"
  expect_rc 0 "inspect" || return 1
  [ -s "$W/o" ] || { fail "inspect printed nothing"; return 1; }
  dcr inspect "$W/rt.dcr" --json
  expect_rc 0 "inspect --json" || return 1
  cp "$W/o" "$W/rt.json"
  jc rt "$W/rt.v1" "$W/rt.v2" "$W/rt.json" "$W/rt.dcr" "$base" "$target" "$kind" "$chunk" "${JCX[@]}" || return 1
  RT_CHUNKS=$JC
}

DEFAULT_CHUNK=4194304

# ---------------------------------------------------------------------------
# Round trips

t_spec_roundtrip() { # SPEC CHUNK [encode options...]
  local spec=$1 chunk=$2
  shift 2
  MK pair "$spec" "$W/p.b" "$W/p.t" || { fail "mkckpt.py pair failed"; return; }
  roundtrip "$W/p.b" "$W/p.t" safetensors "$chunk" "$@" || return
  note "$RT_CHUNKS chunks, $(stat -c %s "$W/rt.dcr") bytes"
}

for dt in BOOL U8 I8 F8_E5M2 F8_E4M3 I16 U16 F16 BF16 I32 U32 F32 I64 U64 F64; do
  spec='{"seed": 5, "target_order": "reverse", "tensors": [
    {"name": "w1", "dtype": "'$dt'", "shape": [64, 33]},
    {"name": "w2", "dtype": "'$dt'", "shape": [3000]},
    {"name": "w3", "dtype": "'$dt'", "shape": [7, 5, 3], "rate": 0.05},
    {"name": "w4", "dtype": "'$dt'", "shape": [2, 2], "fill": "same-as-base"},
    {"name": "s", "dtype": "'$dt'", "shape": []}]}'
  tcase "round trip $dt (4 KiB chunks)" t_spec_roundtrip "$spec" 4096 --chunk-size 4096
done
tcase "round trip mixed dtypes, default chunk size" t_spec_roundtrip "$CASES/mixed.json" $DEFAULT_CHUNK
tcase "round trip mixed dtypes, 4 KiB chunks" t_spec_roundtrip "$CASES/mixed.json" 4096 --chunk-size 4096
tcase "round trip tensors added and removed" t_spec_roundtrip "$CASES/add-remove.json" 4096 --chunk-size 4096
tcase "round trip tensors reshaped (same bytes)" t_spec_roundtrip "$CASES/reshape.json" 4096 --chunk-size 4096
tcase "round trip tensors recoded (dtype or size change)" t_spec_roundtrip "$CASES/recode.json" 4096 --chunk-size 4096
tcase "round trip empty tensors and scalars" t_spec_roundtrip "$CASES/empty-scalar.json" $DEFAULT_CHUNK
tcase "round trip base with no tensors -> target with tensors" t_spec_roundtrip "$CASES/none-to-some.json" $DEFAULT_CHUNK
tcase "round trip base with tensors -> target with no tensors" t_spec_roundtrip "$CASES/some-to-none.json" $DEFAULT_CHUNK
tcase "round trip layout, header and metadata change only" t_spec_roundtrip "$CASES/layout-only.json" $DEFAULT_CHUNK
tcase "round trip unicode and escaped tensor names" t_spec_roundtrip "$CASES/unicode-names.json" $DEFAULT_CHUNK
tcase "round trip tensor names with control characters and 1-4 byte UTF-8" t_spec_roundtrip "$CASES/control-names.json" $DEFAULT_CHUNK
tcase "round trip odd sizes with --chunk-size 4096 (short last chunks)" t_spec_roundtrip "$CASES/odd-chunks.json" 4096 --chunk-size 4096
tcase "round trip 100% change" t_spec_roundtrip "$CASES/full-change.json" 4096 --chunk-size 4096
tcase "round trip --chunk-size 65536" t_spec_roundtrip "$CASES/multi-chunk.json" 65536 --chunk-size 65536

t_zero_tensors() {
  # SPEC.md 6.1: entry_count is 0 for two empty checkpoints
  MK pair "$CASES/zero-tensors.json" "$W/z.b" "$W/z.t" || { fail "mkckpt.py failed"; return; }
  JCX=(--chunks 0)
  roundtrip "$W/z.b" "$W/z.t" safetensors $DEFAULT_CHUNK
  JCX=()
}
tcase "checkpoints with zero tensors ({} header) on both sides" t_zero_tensors

t_no_change() {
  MK pair "$CASES/no-change.json" "$W/n.b" "$W/n.t" || { fail "mkckpt.py failed"; return; }
  cmp -s "$W/n.b" "$W/n.t" || { fail "test bug: no-change pair differs"; return; }
  JCX=(--chunks 0)
  roundtrip "$W/n.b" "$W/n.t" safetensors $DEFAULT_CHUNK
  JCX=()
}
tcase "round trip 0% change (bundle has 0 chunks)" t_no_change

t_raw() { # SIZE RATE CHUNK [options]
  local size=$1 rate=$2 chunk=$3
  shift 3
  MK raw "$size" "$rate" 9 "$W/r.b" "$W/r.t" || { fail "mkckpt.py raw failed"; return; }
  roundtrip "$W/r.b" "$W/r.t" raw "$chunk" --raw "$@" || return
  note "$RT_CHUNKS chunks"
}
tcase "round trip raw files --raw" t_raw 300000 0.01 $DEFAULT_CHUNK
tcase "round trip raw files --raw --chunk-size 4096 (odd size)" t_raw 100003 0.001 4096 --chunk-size 4096
tcase "round trip raw files --raw, 100% change" t_raw 20000 1.0 4096 --chunk-size 4096

t_raw_safetensors_input() {
  # a safetensors pair encoded with --raw is just bytes
  MK pair "$CASES/mixed.json" "$W/q.b" "$W/q.t" || { fail "mkckpt.py failed"; return; }
  roundtrip "$W/q.b" "$W/q.t" raw 4096 --raw --chunk-size 4096
}
tcase "round trip safetensors files treated as --raw" t_raw_safetensors_input

t_level0() {
  MK pair "$CASES/multi-chunk.json" "$W/l.b" "$W/l.t" || { fail "mkckpt.py failed"; return; }
  JCX=(--level0)
  roundtrip "$W/l.b" "$W/l.t" safetensors 4096 --chunk-size 4096 --level 0
  JCX=()
  [ -z "$WHY" ] || return
  local s0 s3
  s0=$(stat -c %s "$W/rt.dcr")
  dcr encode "$W/l.b" "$W/l.t" -o "$W/l3.dcr" --chunk-size 4096
  expect_rc 0 "encode --level 3 (default)" || return
  s3=$(stat -c %s "$W/l3.dcr")
  [ "$s3" -le "$s0" ] || { fail "default level bundle ($s3 bytes) larger than --level 0 ($s0)"; return; }
  note "level 0: $s0 bytes, default level: $s3 bytes"
}
tcase "round trip --level 0 (no compression anywhere)" t_level0

t_meta() {
  MK pair "$CASES/mixed.json" "$W/m1.b" "$W/m1.t" || { fail "mkckpt.py failed"; return; }
  JCX=(--meta '{"step": "1200", "model": "llama-x", "note": "a=b c", "empty": "", "\u00fcml": "\u00e4\u00f6"}')
  roundtrip "$W/m1.b" "$W/m1.t" safetensors $DEFAULT_CHUNK \
    --meta step=1200 --meta model=llama-x --meta "note=a=b c" --meta empty= --meta "üml=äö"
  JCX=()
  [ -z "$WHY" ] || return
  # metadata is in a META section, ancillary
  grep -q '"META"' "$W/rt.json" || fail "no META section in inspect --json sections"
}
tcase "round trip --meta pairs visible in inspect --json" t_meta

t_threads() {
  MK pair "$CASES/multi-chunk.json" "$W/t.b" "$W/t.t" || { fail "mkckpt.py failed"; return; }
  dcr encode "$W/t.b" "$W/t.t" -o "$W/t1.dcr" --chunk-size 4096 --threads 1
  expect_rc 0 "encode --threads 1" || return
  dcr encode "$W/t.b" "$W/t.t" -o "$W/t4.dcr" --chunk-size 4096 --threads 4
  expect_rc 0 "encode --threads 4" || return
  cmp -s "$W/t1.dcr" "$W/t4.dcr" ||
    { fail "--threads 1 and --threads 4 bundles differ: $(cmp "$W/t1.dcr" "$W/t4.dcr" 2>&1 | head -n 1)"; return; }
  dcr apply "$W/t.b" "$W/t4.dcr" -o "$W/t1.out" --threads 1
  expect_rc 0 "apply --threads 1" || return
  dcr apply "$W/t.b" "$W/t4.dcr" -o "$W/t4.out" --threads 4
  expect_rc 0 "apply --threads 4" || return
  cmp -s "$W/t1.out" "$W/t.t" && cmp -s "$W/t4.out" "$W/t.t" ||
    fail "apply --threads 1/4 output differs from the target"
}
tcase "--threads 1 and --threads 4 give byte-identical bundles" t_threads

t_deterministic() {
  MK pair "$CASES/mixed.json" "$W/d.b" "$W/d.t" || { fail "mkckpt.py failed"; return; }
  dcr encode "$W/d.b" "$W/d.t" -o "$W/d1.dcr" --chunk-size 4096 --meta a=b
  expect_rc 0 "encode 1" || return
  dcr encode "$W/d.b" "$W/d.t" -o "$W/d2.dcr" --chunk-size 4096 --meta a=b
  expect_rc 0 "encode 2" || return
  cmp -s "$W/d1.dcr" "$W/d2.dcr" || fail "two encodes differ: $(cmp "$W/d1.dcr" "$W/d2.dcr" 2>&1 | head -n 1)"
}
tcase "encoding twice gives identical bytes" t_deterministic

t_state_chain() {
  # encode(X, Y) names Y as its target; encode(Y, Z) names Y as its base
  MK pair "$CASES/mixed.json" "$W/x" "$W/y" || { fail "mkckpt.py failed"; return; }
  dcr encode "$W/x" "$W/y" -o "$W/xy.dcr"
  expect_rc 0 "encode x y" || return
  dcr inspect "$W/xy.dcr" --json
  expect_rc 0 "inspect" || return
  cp "$W/o" "$W/xy.json"
  dcr encode "$W/y" "$W/x" -o "$W/yx.dcr"
  expect_rc 0 "encode y x" || return
  dcr inspect "$W/yx.dcr" --json
  expect_rc 0 "inspect" || return
  local a b c d
  a=$(python3 "$W/jcheck.py" get "$W/xy.json" target_state)
  b=$(python3 "$W/jcheck.py" get "$W/o" base_state)
  c=$(python3 "$W/jcheck.py" get "$W/xy.json" base_state)
  d=$(python3 "$W/jcheck.py" get "$W/o" target_state)
  [ -n "$a" ] && [ "$a" = "$b" ] && [ "$c" = "$d" ] ||
    fail "state ids do not chain: xy base $c target $a, yx base $b target $d"
  [ "$a" != "$c" ] || fail "base and target state ids are equal for different checkpoints"
}
tcase "state ids: encode(X,Y).target_state = encode(Y,X).base_state" t_state_chain

t_synth() {
  dcr synth "$W/s.b" "$W/s.t" --size 33554432 --rate 0.01 --seed 1 --dtype BF16
  expect_rc 0 "synth" || return
  local tsize bsize
  tsize=$(stat -c %s "$W/s.t" 2>/dev/null || echo 0)
  [ "$tsize" -ge 33000000 ] && [ "$tsize" -le 34500000 ] || { fail "synth target is $tsize bytes, expected ~32 MiB"; return; }
  [ "$(stat -c %s "$W/s.b")" = "$tsize" ] || { fail "synth base and target sizes differ"; return; }
  roundtrip "$W/s.b" "$W/s.t" safetensors $DEFAULT_CHUNK || return
  bsize=$(stat -c %s "$W/rt.dcr")
  local pct
  pct=$(awk -v b="$bsize" -v t="$tsize" 'BEGIN { printf "%.3f", 100 * b / t }')
  [ $((bsize * 100)) -le "$tsize" ] || { fail "bundle is $bsize bytes = $pct% of the $tsize-byte target, expected <= 1.0%"; return; }
  note "bundle $bsize bytes = $pct% of target $tsize bytes"
}
tcase "synth 32 MiB BF16 rate 0.01: round trip, bundle <= 1.0% of target" t_synth

t_synth_deterministic() {
  dcr synth "$W/s2.b" "$W/s2.t" --size 1048576 --rate 0.01 --seed 1 --dtype F32
  expect_rc 0 "synth 1" || return
  dcr synth "$W/s3.b" "$W/s3.t" --size 1048576 --rate 0.01 --seed 1 --dtype F32
  expect_rc 0 "synth 2" || return
  cmp -s "$W/s2.b" "$W/s3.b" && cmp -s "$W/s2.t" "$W/s3.t" || { fail "same seed, different files"; return; }
  dcr synth "$W/s4.b" "$W/s4.t" --size 1048576 --rate 0.01 --seed 2 --dtype F16
  expect_rc 0 "synth seed 2 F16" || return
  cmp -s "$W/s2.t" "$W/s4.t" && { fail "different seed/dtype, same target"; return; }
  MK info "$W/s4.t" >/dev/null || fail "synth F16 output is not strict safetensors"
}
tcase "synth is deterministic and writes valid safetensors" t_synth_deterministic

# ---------------------------------------------------------------------------
# stdin / stdout

# The reference bundle for the stdin and bad-input cases: mixed.json, 4 KiB
# chunks, with metadata, so that it has MANI, META, many CHNK, IDEN, INDX, FOOT.
setup_ref() {
  MK pair "$CASES/mixed.json" "$W/m.b" "$W/m.t" || return 1
  MK pair "$CASES/mixed.json" "$W/m.b2" "$W/m.t2" --seed 8 || return 1
  MK pair "$CASES/multi-chunk.json" "$W/m.other" "$W/m.other.t" || return 1
  "$DCR" encode "$W/m.b" "$W/m.t" -o "$W/m.dcr" --chunk-size 4096 --meta k=v --meta note=reference \
    </dev/null >/dev/null 2>"$W/setup.err" || return 1
  "$DCR" inspect "$W/m.dcr" --json </dev/null >"$W/m.json" 2>>"$W/setup.err" || return 1
  python3 "$W/jcheck.py" sections "$W/m.json" >"$W/m.sections" || return 1
  MSIZE=$(stat -c %s "$W/m.dcr")
}
REF_OK=1
setup_ref || REF_OK=0
need_ref() {
  [ "$REF_OK" = 1 ] || { fail "setup of the reference bundle failed: $(head -c 300 "$W/setup.err" 2>/dev/null)"; return 1; }
}

t_apply_stdin() {
  need_ref || return
  rm -f "$W/si.out"
  dcr_in "$W/m.dcr" apply "$W/m.b" - -o "$W/si.out"
  expect_rc 0 "apply BASE - -o OUT < bundle" || return
  cmp -s "$W/si.out" "$W/m.t" || fail "output differs from target"
}
tcase "apply BASE - -o OUT < bundle" t_apply_stdin

t_encode_stdout() {
  need_ref || return
  dcr_to "$W/so.dcr" encode "$W/m.b" "$W/m.t" -o - --chunk-size 4096 --meta k=v --meta note=reference
  expect_rc 0 "encode -o - > file" || return
  cmp -s "$W/so.dcr" "$W/m.dcr" || { fail "bundle written to stdout differs from the one written to a file"; return; }
  dcr validate "$W/so.dcr" --base "$W/m.b" --target "$W/m.t"
  expect_rc 0 "validate" || return
}
tcase "encode -o - > file, then validate" t_encode_stdout

t_apply_stdout() {
  need_ref || return
  dcr_to "$W/ao.out" apply "$W/m.b" "$W/m.dcr" -o -
  expect_rc 0 "apply -o - > file" || return
  cmp -s "$W/ao.out" "$W/m.t" || fail "output differs from target"
}
tcase "apply BASE BUNDLE -o - > file" t_apply_stdout

t_validate_stdin() {
  need_ref || return
  dcr_in "$W/m.dcr" validate - --json
  expect_rc 0 "validate - --json < bundle" || return
  jc validate "$W/o" --valid || return
  dcr_in "$W/m.dcr" inspect - --json
  expect_rc 0 "inspect - --json < bundle" || return
  jc inspect "$W/o" "$W/m.dcr" "$W/m.b" "$W/m.t" safetensors 4096 --meta '{"k": "v", "note": "reference"}' || return
}
tcase "validate - and inspect - read stdin" t_validate_stdin

t_pipe() {
  need_ref || return
  rm -f "$W/pp.out"
  "${TIMEOUT[@]}" "$DCR" encode "$W/m.b" "$W/m.t" -o - 2>"$W/e" </dev/null |
    "${TIMEOUT[@]}" "$DCR" apply "$W/m.b" - -o "$W/pp.out" 2>>"$W/e"
  RC=$?
  expect_rc 0 "encode -o - | apply BASE - -o OUT" || return
  cmp -s "$W/pp.out" "$W/m.t" || fail "output differs from target"
}
tcase "encode -o - | apply BASE - -o OUT (pipe)" t_pipe

t_tty() {
  need_ref || return
  command -v script >/dev/null 2>&1 || { note "skipped: no script(1) for a pseudo-terminal"; return; }
  local q
  printf -v q '%q ' "$DCR" encode "$W/m.b" "$W/m.t" -o -
  script -qec "$q" /dev/null </dev/null >"$W/o" 2>"$W/e"
  RC=$?
  expect_rc 2 "encode -o - with stdout a terminal" || return
  grep -q 'DCR' "$W/o" && { fail "binary data was written to the terminal"; return; }
  printf -v q '%q ' "$DCR" apply "$W/m.b" "$W/m.dcr" -o -
  script -qec "$q" /dev/null </dev/null >"$W/o" 2>"$W/e"
  RC=$?
  expect_rc 2 "apply -o - with stdout a terminal" || return
}
tcase "binary output to a terminal is refused (exit 2; via script(1))" t_tty

# ---------------------------------------------------------------------------
# Bad bundles

# json_code CODE: validate --json output in $W/o says valid false, errors[0].code CODE
# (a grep; the full structure is checked by jcheck.py where FULLJSON=1).
FULLJSON=1
json_code() {
  local got
  grep -qE '"valid" *: *false' "$W/o" || { fail "validate --json: no \"valid\": false: $(head -c 200 "$W/o")"; return 1; }
  got=$(grep -oE '"code" *: *"DCR_E_[A-Z_]+"' "$W/o" | head -n 1 | grep -oE 'DCR_E_[A-Z_]+')
  [ "$got" = "$1" ] || { fail "validate --json: errors[0].code ${got:-missing}, expected $1"; return 1; }
}

# check_bad FILE CODE: validate, validate --json, inspect, apply all reject FILE
# with exit 1 and CODE; apply leaves nothing in its output directory. With
# INSPECT_OK=1, inspect is not asked (it shows a checkpoint, cli_id_test.sh).
check_bad() {
  local f=$1 code=$2
  dcr validate "$f"
  expect_rc 1 "validate" || return 1
  expect_code "$code" "validate" || return 1
  dcr validate "$f" --json
  expect_rc 1 "validate --json" || return 1
  if [ "$FULLJSON" = 1 ]; then
    jc validate "$W/o" --invalid "$code" || return 1
  else
    json_code "$code" || return 1
  fi
  if [ -z "${INSPECT_OK:-}" ]; then
    dcr inspect "$f" --json
    expect_rc 1 "inspect --json" || return 1
    expect_code "$code" "inspect" || return 1
    python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; sys.exit(e["code"] != sys.argv[2])' \
      "$W/o" "$code" || { fail "inspect --json: no error document with $code on stdout"; return 1; }
  fi
  rm -rf "$W/od"
  mkdir "$W/od"
  dcr apply "$W/m.b" "$f" -o "$W/od/out"
  expect_rc 1 "apply" || return 1
  expect_code "$code" "apply" || return 1
  [ -z "$(ls -A "$W/od")" ] || { fail "failed apply left files: $(ls -A "$W/od" | head -n 3 | tr '\n' ' ')"; return 1; }
}

# Truncations. SPEC.md 4.1: fewer than 64 bytes -> DCR_E_TRUNCATED. 4.2 (steps 1,
# 2, 5) and 5: the walk from offset 64 meets the end of the file at a section
# boundary without a footer, or inside a section -> DCR_E_TRUNCATED.
trunc_code() { echo DCR_E_TRUNCATED; }
t_truncated() { # LENGTH
  need_ref || return
  local n=$1
  head -c "$n" "$W/m.dcr" >"$W/tr.dcr"
  check_bad "$W/tr.dcr" "$(trunc_code "$n")"
}
if [ "$REF_OK" = 1 ]; then
  mani_len=$(awk '$1 == "MANI" { print $3; exit }' "$W/m.sections")
  read -r -a chnk1 < <(awk '$1 == "CHNK" { print $2, $3; exit }' "$W/m.sections")
  cuts=("0 empty file" "30 inside the bundle header" "63 one byte short of the bundle header"
    "64 right after the bundle header" "80 inside the MANI section header"
    "$((64 + 32 + mani_len / 2)) inside the MANI payload"
    "$((chnk1[0])) at the start of the first CHNK"
    "$((chnk1[0] + 32 + chnk1[1] / 2)) inside the first CHNK payload"
    "$((MSIZE - 64)) just before the footer" "$((MSIZE - 32)) inside the footer"
    "$((MSIZE - 1)) one byte short")
  for c in "${cuts[@]}"; do
    n=${c%% *}
    tcase "truncated bundle: $n of $MSIZE bytes, ${c#* } -> $(trunc_code "$n")" t_truncated "$n"
  done
else
  tcase "truncated bundles" need_ref
fi

t_truncated_stdin() {
  need_ref || return
  local n=$((MSIZE - 64))
  head -c "$n" "$W/m.dcr" >"$W/tr.dcr"
  rm -rf "$W/od"
  mkdir "$W/od"
  dcr_in "$W/tr.dcr" apply "$W/m.b" - -o "$W/od/out"
  expect_rc 1 "apply BASE - < truncated" || return
  expect_code "$(trunc_code "$n")" "apply from stdin" || return
  [ -z "$(ls -A "$W/od")" ] || fail "failed apply left files: $(ls -A "$W/od" | tr '\n' ' ')"
}
tcase "truncated bundle on stdin (cut before footer) -> DCR_E_TRUNCATED, no output" t_truncated_stdin

t_extended() {
  need_ref || return
  { cat "$W/m.dcr"; head -c 64 /dev/zero; } >"$W/ex.dcr"
  check_bad "$W/ex.dcr" DCR_E_STRUCTURE
}
tcase "64 zero bytes appended after the footer -> DCR_E_STRUCTURE" t_extended

# Bit flips in sections.
t_flip_payload() { # TYPE OFFSET LENGTH
  need_ref || return
  local off=$(($2 + 32 + $3 / 2))
  cp "$W/m.dcr" "$W/fl.dcr"
  flip "$W/fl.dcr" "$off" 3 || { fail "flip failed"; return; }
  check_bad "$W/fl.dcr" DCR_E_CHECKSUM || { WHY="byte $off: $WHY"; return; }
}
t_flip_header() { # TYPE OFFSET LENGTH
  need_ref || return
  local b
  for b in 0 3 4 5 6 7 8 12 15 16 23 24 31; do
    cp "$W/m.dcr" "$W/fl.dcr"
    flip "$W/fl.dcr" $(($2 + b)) $((b % 8)) || { fail "flip failed"; return; }
    check_bad "$W/fl.dcr" DCR_E_CHECKSUM || { WHY="header byte $b bit $((b % 8)): $WHY"; return; }
  done
}
t_flip_padding() { # TYPE OFFSET LENGTH
  need_ref || return
  local end=$(($2 + 32 + $3))
  if [ $((end % 64)) = 0 ]; then
    note "no padding in this section"
    return
  fi
  cp "$W/m.dcr" "$W/fl.dcr"
  flip "$W/fl.dcr" "$end" 0 || { fail "flip failed"; return; }
  check_bad "$W/fl.dcr" DCR_E_RESERVED || { WHY="padding byte $end: $WHY"; return; }
  cp "$W/m.dcr" "$W/fl.dcr"
  flip "$W/fl.dcr" $(((end + 63) / 64 * 64 - 1)) 7 || { fail "flip failed"; return; }
  check_bad "$W/fl.dcr" DCR_E_RESERVED || { WHY="last padding byte: $WHY"; return; }
}
FULLJSON=0
if [ "$REF_OK" = 1 ]; then
  nchnk=$(grep -c '^CHNK' "$W/m.sections")
  i=0
  while read -r type off len; do
    label=$type
    if [ "$type" = CHNK ]; then
      i=$((i + 1))
      # first, a middle one and the last
      [ $i = 1 ] || [ $i = $(((nchnk + 1) / 2)) ] || [ $i = "$nchnk" ] || continue
      label="CHNK #$i of $nchnk"
    fi
    if [ "$len" -gt 0 ]; then
      tcase "flipped bit in $label payload (offset $off) -> DCR_E_CHECKSUM" t_flip_payload "$type" "$off" "$len"
    fi
    tcase "flipped bits in $label section header -> DCR_E_CHECKSUM" t_flip_header "$type" "$off" "$len"
    tcase "flipped bit in $label padding -> DCR_E_RESERVED" t_flip_padding "$type" "$off" "$len"
  done <"$W/m.sections"
else
  tcase "flipped bits in sections" need_ref
fi
FULLJSON=1

t_flip_bundle_header() { # BYTE BIT CODE
  need_ref || return
  cp "$W/m.dcr" "$W/fl.dcr"
  flip "$W/fl.dcr" "$1" "$2" || { fail "flip failed"; return; }
  check_bad "$W/fl.dcr" "$3"
}
tcase "flipped bit in bundle header magic (byte 0) -> DCR_E_MAGIC" t_flip_bundle_header 0 0 DCR_E_MAGIC
tcase "flipped bit in bundle header magic (byte 3) -> DCR_E_MAGIC" t_flip_bundle_header 3 6 DCR_E_MAGIC
tcase "flipped bit in bundle header magic (byte 7) -> DCR_E_MAGIC" t_flip_bundle_header 7 1 DCR_E_MAGIC
tcase "flipped bit in bundle header major -> DCR_E_CHECKSUM" t_flip_bundle_header 8 1 DCR_E_CHECKSUM
tcase "flipped bit in bundle header reserved -> DCR_E_CHECKSUM" t_flip_bundle_header 40 5 DCR_E_CHECKSUM
tcase "flipped bit in bundle header check -> DCR_E_CHECKSUM" t_flip_bundle_header 60 2 DCR_E_CHECKSUM

t_not_a_bundle() {
  need_ref || return
  INSPECT_OK=1 check_bad "$W/m.t" DCR_E_MAGIC
}
tcase "a safetensors file given as bundle -> DCR_E_MAGIC (validate, apply)" t_not_a_bundle

# Re-checksummed edits (need xxhsum for XXH3-64).
t_rehdr() { # CODE|valid SET...
  need_ref || return
  [ "$HAVE_XXH" = 1 ] || { note "skipped: no xxhsum"; return; }
  local code=$1
  shift
  python3 "$W/jcheck.py" rehdr "$W/m.dcr" "$W/rh.dcr" "$@" || { fail "rehdr failed"; return; }
  if [ "$code" = valid ]; then
    dcr validate "$W/rh.dcr"
    expect_rc 0 "validate" || return
    dcr apply "$W/m.b" "$W/rh.dcr" -o "$W/rh.out"
    expect_rc 0 "apply" || return
    cmp -s "$W/rh.out" "$W/m.t" || fail "apply output differs"
  else
    check_bad "$W/rh.dcr" "$code"
  fi
}
tcase "bundle header major 2 (valid check) -> DCR_E_VERSION" t_rehdr DCR_E_VERSION 8:0200
tcase "bundle header major 0 (valid check) -> DCR_E_VERSION" t_rehdr DCR_E_VERSION 8:0000
tcase "bundle header minor 7 (valid check) is accepted" t_rehdr valid 10:0700
tcase "bundle header flags bit (valid check) -> DCR_E_RESERVED" t_rehdr DCR_E_RESERVED 12:01000000
tcase "bundle header reserved byte 55 (valid check) -> DCR_E_RESERVED" t_rehdr DCR_E_RESERVED 55:80

t_resec() { # TYPE CODE SET...
  need_ref || return
  [ "$HAVE_XXH" = 1 ] || { note "skipped: no xxhsum"; return; }
  local off code=$2
  off=$(awk -v t="$1" '$1 == t { print $2; exit }' "$W/m.sections")
  shift 2
  python3 "$W/jcheck.py" resec "$W/m.dcr" "$W/rs.dcr" "$off" "$@" || { fail "resec failed"; return; }
  check_bad "$W/rs.dcr" "$code"
}
tcase "MANI section reserved flag bit (valid header check) -> DCR_E_RESERVED" t_resec MANI DCR_E_RESERVED 4:0300
tcase "IDEN section reserved byte 7 (valid header check) -> DCR_E_RESERVED" t_resec IDEN DCR_E_RESERVED 7:01
tcase "INDX section not critical (valid header check) -> DCR_E_STRUCTURE" t_resec INDX DCR_E_STRUCTURE 4:0000
tcase "CHNK section compression 1 (valid header check) -> DCR_E_STRUCTURE" t_resec CHNK DCR_E_STRUCTURE 6:01
tcase "META section critical (valid header check) -> DCR_E_STRUCTURE" t_resec META DCR_E_STRUCTURE 4:0100

t_insert() { # TYPE FLAGS LEN CODE|valid
  need_ref || return
  [ "$HAVE_XXH" = 1 ] || { note "skipped: no xxhsum"; return; }
  python3 "$W/jcheck.py" insert "$W/m.dcr" "$W/in.dcr" "$1" "$2" "$3" || { fail "insert failed"; return; }
  rm -f "$W/in.out"
  if [ "$4" = valid ]; then
    dcr validate "$W/in.dcr" --base "$W/m.b" --target "$W/m.t"
    expect_rc 0 "validate" || return
    dcr apply "$W/m.b" "$W/in.dcr" -o "$W/in.out"
    expect_rc 0 "apply" || return
    cmp -s "$W/in.out" "$W/m.t" || { fail "apply output differs"; return; }
    dcr inspect "$W/in.dcr" --json
    expect_rc 0 "inspect --json" || return
    grep -q "\"$1\"" "$W/o" || fail "inserted $1 section not listed by inspect --json"
  else
    check_bad "$W/in.dcr" "$4"
  fi
}
tcase "unknown ancillary section before FOOT is skipped" t_insert XTRA 0 100 valid
tcase "empty SIGN section before FOOT is skipped" t_insert SIGN 0 0 valid
tcase "unknown critical section before FOOT -> DCR_E_UNKNOWN_SECTION" t_insert XTRA 1 100 DCR_E_UNKNOWN_SECTION
tcase "second INDX section before FOOT -> DCR_E_STRUCTURE" t_insert INDX 1 0 DCR_E_STRUCTURE

# ---------------------------------------------------------------------------
# Wrong base / target

t_wrong_base() { # BASE CODE [validate-check]
  need_ref || return
  rm -rf "$W/od"
  mkdir "$W/od"
  dcr apply "$1" "$W/m.dcr" -o "$W/od/out"
  expect_rc 1 "apply" || return
  expect_code "$2" "apply" || return
  [ -z "$(ls -A "$W/od")" ] || { fail "failed apply left files: $(ls -A "$W/od" | tr '\n' ' ')"; return; }
  if [ "${3:-}" ]; then
    dcr validate "$W/m.dcr" --base "$1"
    expect_rc 1 "validate --base" || return
    expect_code "$2" "validate --base" || return
    dcr validate "$W/m.dcr" --base "$1" --json
    expect_rc 1 "validate --base --json" || return
    jc validate "$W/o" --invalid "$2" --check-false base || return
  fi
}
tcase "apply to a base with the same tensors, other bytes -> DCR_E_BASE_MISMATCH" t_wrong_base "$W/m.b2" DCR_E_BASE_MISMATCH v
tcase "apply to a base with different tensors -> DCR_E_BASE_MISMATCH" t_wrong_base "$W/m.other" DCR_E_BASE_MISMATCH v

t_reapply() {
  need_ref || return
  rm -rf "$W/od"
  mkdir "$W/od"
  dcr apply "$W/m.t" "$W/m.dcr" -o "$W/od/out"
  expect_rc 0 "apply to the target" || return
  cmp -s "$W/od/out" "$W/m.t" || { fail "re-apply output differs from the target"; return; }
  dcr validate "$W/m.dcr" --base "$W/m.t"
  expect_rc 0 "validate --base TARGET" || return
}
tcase "apply to the target itself -> success, output is the target (SPEC §10.2)" t_reapply

t_wrong_base_one_byte() {
  need_ref || return
  # one bit changed in an unchanged chunk of the base: only the final hash check sees it
  cp "$W/m.b" "$W/m.b1"
  local info off
  info=$(MK info "$W/m.b1") || { fail "mkckpt info"; return; }
  off=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); t=[t for t in j["tensors"] if t["name"]=="layers.0.norm"][0]; print(j["prefix_length"]+t["offset"]+5)' "$info")
  flip "$W/m.b1" "$off" 0 || { fail "flip"; return; }
  t_wrong_base "$W/m.b1" DCR_E_BASE_MISMATCH v
}
tcase "apply to a base differing in one bit of an unchanged tensor -> DCR_E_BASE_MISMATCH" t_wrong_base_one_byte

t_wrong_base_bad() {
  need_ref || return
  local code
  code=$(MK bad cut-header "$W/bad.b") || { fail "mkckpt bad"; return; }
  t_wrong_base "$W/bad.b" "$code"
}
tcase "apply to a base that is not valid safetensors -> DCR_E_CHECKPOINT" t_wrong_base_bad

t_wrong_base_raw() {
  need_ref || return
  MK raw 50000 0.01 3 "$W/rw.b" "$W/rw.t" || { fail "mkckpt raw"; return; }
  MK raw 50001 0.01 3 "$W/rw2.b" "$W/rw2.t" || { fail "mkckpt raw"; return; }
  dcr encode "$W/rw.b" "$W/rw.t" -o "$W/rw.dcr" --raw
  expect_rc 0 "encode --raw" || return
  rm -rf "$W/od"
  mkdir "$W/od"
  dcr apply "$W/rw2.b" "$W/rw.dcr" -o "$W/od/out"
  expect_rc 1 "apply raw bundle to a longer file" || return
  expect_code DCR_E_BASE_MISMATCH "apply" || return
  [ -z "$(ls -A "$W/od")" ] || { fail "failed apply left files"; return; }
  dcr apply "$W/rw.t" "$W/rw.dcr" -o "$W/od/out"
  expect_rc 0 "apply raw bundle to its target (a no-op)" || return
  cmp -s "$W/od/out" "$W/rw.t" || fail "re-applied raw output differs from the target"
}
tcase "raw bundle applied to a wrong raw base -> DCR_E_BASE_MISMATCH" t_wrong_base_raw

t_wrong_target() {
  need_ref || return
  dcr validate "$W/m.dcr" --target "$W/m.b"
  expect_rc 1 "validate --target BASE" || return
  expect_code DCR_E_TARGET_MISMATCH "validate --target" || return
  dcr validate "$W/m.dcr" --base "$W/m.b" --target "$W/m.t2" --json
  expect_rc 1 "validate --base --target OTHER --json" || return
  jc validate "$W/o" --invalid DCR_E_TARGET_MISMATCH --check-false target || return
  # same tensors, other layout: same state id but not the same file
  python3 - "$CASES/mixed.json" "$W/spec2.json" <<'EOF' || { fail "spec edit"; return; }
import json, sys
s = json.load(open(sys.argv[1])); s["target_order"] = "name"; json.dump(s, open(sys.argv[2], "w"))
EOF
  MK pair "$W/spec2.json" "$W/lb2" "$W/lt2" || { fail "mkckpt"; return; }
  cmp -s "$W/m.t" "$W/lt2" && { fail "test bug: layouts equal"; return; }
  dcr validate "$W/m.dcr" --target "$W/lt2"
  expect_rc 1 "validate --target (same tensors, other layout)" || return
  expect_code DCR_E_TARGET_MISMATCH "validate --target (other layout)" || return
}
tcase "validate --target with a wrong target -> DCR_E_TARGET_MISMATCH" t_wrong_target

# ---------------------------------------------------------------------------
# Existing outputs, atomicity

t_exists_encode() {
  need_ref || return
  echo "precious" >"$W/ex.dcr"
  cp "$W/ex.dcr" "$W/ex.keep"
  dcr encode "$W/m.b" "$W/m.t" -o "$W/ex.dcr"
  cmp -s "$W/ex.dcr" "$W/ex.keep" || { fail "existing file was modified"; return; }
  expect_rc 2 "encode over an existing file without -f" || return
  [ -s "$W/e" ] || { fail "no message on stderr"; return; }
  dcr encode "$W/m.b" "$W/m.t" -o "$W/ex.dcr" -f
  expect_rc 0 "encode -f" || return
  dcr validate "$W/ex.dcr"
  expect_rc 0 "validate the replaced bundle" || return
  dcr encode "$W/m.b" "$W/m.t" -o "$W/ex.dcr" --force --chunk-size 4096 --meta k=v --meta note=reference
  expect_rc 0 "encode --force" || return
  cmp -s "$W/ex.dcr" "$W/m.dcr" || fail "--force output differs from the reference bundle"
}
tcase "encode refuses an existing output without -f (exit 2), replaces it with -f" t_exists_encode

t_exists_apply() {
  need_ref || return
  echo "precious" >"$W/ex.out"
  cp "$W/ex.out" "$W/ex.keep"
  dcr apply "$W/m.b" "$W/m.dcr" -o "$W/ex.out"
  cmp -s "$W/ex.out" "$W/ex.keep" || { fail "existing file was modified"; return; }
  expect_rc 2 "apply over an existing file without -f" || return
  dcr apply "$W/m.b" "$W/m.dcr" -o "$W/ex.out" -f
  expect_rc 0 "apply -f" || return
  cmp -s "$W/ex.out" "$W/m.t" || fail "apply -f output differs from the target"
}
tcase "apply refuses an existing output without -f (exit 2), replaces it with -f" t_exists_apply

t_failed_force() {
  need_ref || return
  rm -rf "$W/fd"
  mkdir "$W/fd"
  echo "precious" >"$W/fd/out"
  cp "$W/fd/out" "$W/ff.keep"
  dcr apply "$W/m.b2" "$W/m.dcr" -o "$W/fd/out" -f
  expect_rc 1 "apply -f with a wrong base" || return
  expect_code DCR_E_BASE_MISMATCH "apply -f" || return
  cmp -s "$W/fd/out" "$W/ff.keep" || { fail "pre-existing output was modified"; return; }
  [ "$(ls -A "$W/fd")" = out ] || { fail "failed apply left files: $(ls -A "$W/fd" | tr '\n' ' ')"; return; }
  head -c 1000 "$W/m.dcr" >"$W/ff.dcr"
  dcr apply "$W/m.b" "$W/ff.dcr" -o "$W/fd/out" -f
  expect_rc 1 "apply -f with a truncated bundle" || return
  cmp -s "$W/fd/out" "$W/ff.keep" || { fail "pre-existing output was modified"; return; }
  [ "$(ls -A "$W/fd")" = out ] || fail "failed apply left files: $(ls -A "$W/fd" | tr '\n' ' ')"
}
tcase "failed apply with -f leaves the pre-existing output untouched" t_failed_force

t_failed_encode_force() {
  need_ref || return
  rm -rf "$W/fd"
  mkdir "$W/fd"
  echo "precious" >"$W/fd/b.dcr"
  MK bad gap "$W/gap.st" >/dev/null || { fail "mkckpt bad"; return; }
  dcr encode "$W/m.b" "$W/gap.st" -o "$W/fd/b.dcr" -f
  expect_rc 1 "encode -f with a bad target" || return
  [ "$(cat "$W/fd/b.dcr")" = precious ] || { fail "pre-existing bundle was modified"; return; }
  [ "$(ls -A "$W/fd")" = b.dcr ] || fail "failed encode left files: $(ls -A "$W/fd" | tr '\n' ' ')"
}
tcase "failed encode with -f leaves the pre-existing output untouched" t_failed_encode_force

t_in_place() {
  need_ref || return
  cp "$W/m.b" "$W/inplace.st"
  # -o onto an input is refused even with -f (issue 15): --in-place is the way
  dcr apply "$W/inplace.st" "$W/m.dcr" -o "$W/inplace.st" -f
  expect_rc 2 "apply BASE BUNDLE -o BASE -f" || return
  grep -q -- "--in-place" "$W/e" || { fail "no hint to use --in-place: $(cat "$ERR")"; return; }
  cmp -s "$W/inplace.st" "$W/m.b" || { fail "the refused apply changed the base"; return; }
  dcr apply "$W/inplace.st" "$W/m.dcr" -o "$W/inplace.out"
  expect_rc 0 "apply BASE BUNDLE -o OUT" || return
  cmp -s "$W/inplace.out" "$W/m.t" || { fail "output differs from the target"; return; }
  # applying again, as a retried job would: the input is the target already
  dcr apply "$W/inplace.out" "$W/m.dcr" -o "$W/inplace.again"
  expect_rc 0 "apply to the target" || return
  cmp -s "$W/inplace.again" "$W/m.t" || fail "apply to the target changed it"
}
tcase "apply -o BASE -f refused with a hint; applying to the target -> a no-op (SPEC §10.2)" t_in_place

t_interrupt() {
  need_ref || return
  rm -rf "$W/id"
  mkdir "$W/id"
  mkfifo "$W/id.fifo" || { note "skipped: no mkfifo"; return; }
  "$DCR" apply "$W/m.b" - -o "$W/id/out" <"$W/id.fifo" >/dev/null 2>"$W/e" &
  local pid=$! i rc
  exec 7>"$W/id.fifo"
  head -c 1000 "$W/m.dcr" >&7
  sleep 0.3
  kill -TERM "$pid" 2>/dev/null
  for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    exec 7>&-
    rm -f "$W/id.fifo"
    fail "apply blocked reading stdin did not exit within 5 s of SIGTERM"
    return
  fi
  wait "$pid"
  rc=$?
  exec 7>&-
  rm -f "$W/id.fifo"
  RC=$rc
  expect_rc 130 "apply interrupted by SIGTERM while reading stdin" || return
  [ -z "$(ls -A "$W/id")" ] || fail "interrupted apply left files: $(ls -A "$W/id" | tr '\n' ' ')"
}
tcase "SIGTERM while apply reads stdin -> exit 130, no output" t_interrupt

# ---------------------------------------------------------------------------
# Bad checkpoints given to encode

mkdir "$W/badck"
MK bad all "$W/badck" >"$W/badck.list" || echo "mkckpt.py bad all failed" >&2
MK pair '{"seed": 1, "tensors": [{"name": "a", "dtype": "F32", "shape": [16]}]}' "$W/good.b" "$W/good.t" ||
  echo "mkckpt.py pair failed" >&2
t_bad_ckpt() { # KIND CODE
  local code=$2 side
  cp "$W/badck/$1.safetensors" "$W/bad.st" || { fail "no bad checkpoint $1"; return; }
  for side in target base; do
    rm -rf "$W/bd"
    mkdir "$W/bd"
    if [ $side = target ]; then
      dcr encode "$W/good.b" "$W/bad.st" -o "$W/bd/x.dcr"
    else
      dcr encode "$W/bad.st" "$W/good.t" -o "$W/bd/x.dcr"
    fi
    expect_rc 1 "encode with a bad $side" || return
    expect_code "$code" "encode with a bad $side" || return
    [ -z "$(ls -A "$W/bd")" ] || { fail "failed encode left files: $(ls -A "$W/bd" | tr '\n' ' ')"; return; }
  done
}
while read -r k code; do
  tcase "encode with a bad checkpoint ($k) -> $code, no bundle" t_bad_ckpt "$k" "$code"
done <"$W/badck.list"

t_truncated_real() {
  need_ref || return
  local n prefix
  prefix=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["prefix_length"])' < <(MK info "$W/m.t")) ||
    { fail "mkckpt info"; return; }
  for n in 4 $((prefix / 2)) $((prefix - 1)) $((prefix + 1)) $(($(stat -c %s "$W/m.t") - 3)); do
    head -c "$n" "$W/m.t" >"$W/tt.st"
    rm -rf "$W/bd"
    mkdir "$W/bd"
    dcr encode "$W/m.b" "$W/tt.st" -o "$W/bd/x.dcr"
    expect_rc 1 "encode with the target cut to $n bytes" || return
    if [ "$n" -lt "$prefix" ]; then
      expect_code DCR_E_CHECKPOINT "cut to $n bytes" || return
    else
      expect_code DCR_E_LAYOUT "cut to $n bytes" || return
    fi
    [ -z "$(ls -A "$W/bd")" ] || { fail "failed encode left files"; return; }
  done
}
tcase "encode with a truncated safetensors target (header / data) -> DCR_E_CHECKPOINT / DCR_E_LAYOUT" t_truncated_real

# ---------------------------------------------------------------------------
# I/O errors

t_io() {
  need_ref || return
  dcr encode "$W/nonexistent" "$W/m.t" -o "$W/io.dcr"
  expect_rc 3 "encode with a missing base" || return
  expect_code DCR_E_IO "encode with a missing base" || return
  [ ! -e "$W/io.dcr" ] || { fail "bundle written"; return; }
  dcr encode "$W/m.b" "$W/m.t" -o "$W/no/such/dir/io.dcr"
  expect_rc 3 "encode into a missing directory" || return
  dcr apply "$W/m.b" "$W/nonexistent.dcr" -o "$W/io.out"
  expect_rc 3 "apply with a missing bundle" || return
  [ ! -e "$W/io.out" ] || { fail "output written"; return; }
  dcr apply "$W/nonexistent" "$W/m.dcr" -o "$W/io.out"
  expect_rc 3 "apply with a missing base" || return
  [ ! -e "$W/io.out" ] || { fail "output written"; return; }
  dcr validate "$W/nonexistent.dcr" --json
  expect_rc 3 "validate --json with a missing bundle" || return
  dcr inspect "$W/nonexistent.dcr"
  expect_rc 3 "inspect with a missing bundle" || return
  dcr apply "$W/m.b" "$W" -o "$W/io.out"
  expect_rc 3 "apply with a directory as bundle" || return
}
tcase "missing files and directories -> exit 3 DCR_E_IO" t_io

# ---------------------------------------------------------------------------
# Usage

t_usage() { # EXPECTED_RC ARGS...
  local want=$1
  shift
  dcr "$@"
  expect_rc "$want" "dcr $*" || return
  if [ "$want" = 2 ]; then
    [ -s "$W/e" ] || fail "no message on stderr"
  fi
}
t_help() { # ARGS...
  dcr "$@"
  expect_rc 0 "dcr $*" || return
  grep -qi usage "$W/o" || fail "no 'Usage' on stdout: $(head -c 200 "$W/o")"
}
tcase "no arguments -> exit 2" t_usage 2
tcase "unknown command -> exit 2" t_usage 2 frobnicate
tcase "unknown option -> exit 2" t_usage 2 --bogus
tcase "encode unknown option -> exit 2" t_usage 2 encode a b -o c --bogus
tcase "encode without -o -> exit 2" t_usage 2 encode "$W/m.b" "$W/m.t"
tcase "encode with one input -> exit 2" t_usage 2 encode "$W/m.b" -o "$W/u.dcr"
tcase "encode --chunk-size 5000 (not a power of two) -> exit 2" t_usage 2 encode "$W/m.b" "$W/m.t" -o "$W/u.dcr" --chunk-size 5000
tcase "encode --chunk-size 2048 (below 4096) -> exit 2" t_usage 2 encode "$W/m.b" "$W/m.t" -o "$W/u.dcr" --chunk-size 2048
tcase "encode --level abc -> exit 2" t_usage 2 encode "$W/m.b" "$W/m.t" -o "$W/u.dcr" --level abc
tcase "encode --meta without = -> exit 2" t_usage 2 encode "$W/m.b" "$W/m.t" -o "$W/u.dcr" --meta novalue
tcase "encode --meta with empty key -> exit 2" t_usage 2 encode "$W/m.b" "$W/m.t" -o "$W/u.dcr" --meta =v
tcase "apply without -o -> exit 2" t_usage 2 apply "$W/m.b" "$W/m.dcr"
tcase "validate without a bundle -> exit 2" t_usage 2 validate
tcase "inspect with two bundles -> exit 2" t_usage 2 inspect "$W/m.dcr" "$W/m.dcr"
tcase "synth --dtype XYZ -> exit 2" t_usage 2 synth "$W/u1" "$W/u2" --dtype XYZ
tcase "--help -> exit 0, Usage on stdout" t_help --help
tcase "-h -> exit 0, Usage on stdout" t_help -h
for c in encode apply validate inspect synth; do
  tcase "$c --help -> exit 0, Usage on stdout" t_help "$c" --help
done
t_version() {
  dcr --version
  expect_rc 0 "dcr --version" || return
  [ -s "$W/o" ] || { fail "--version printed nothing on stdout"; return; }
  note "$(head -n 1 "$W/o")"
}
tcase "--version -> exit 0" t_version
t_quiet() {
  need_ref || return
  dcr encode "$W/m.b" "$W/m.t" -o "$W/q.dcr" -q
  expect_rc 0 "encode -q" || return
  [ ! -s "$W/e" ] || fail "encode -q wrote to stderr: $(err)"
  dcr apply "$W/m.b" "$W/q.dcr" -o "$W/q.out" -q --no-progress
  expect_rc 0 "apply -q --no-progress" || return
  [ ! -s "$W/e" ] || fail "apply -q wrote to stderr: $(err)"
}
tcase "-q: nothing on stderr on success" t_quiet
t_validate_threads() {
  local v="$HERE/../testvectors/v1/invalid/chunks-two-bad.dcr" n
  for n in 1 2 5; do
    dcr validate "$v" --json --threads "$n"
    expect_rc 1 "validate --threads $n" || return
    cp "$W/o" "$W/vt$n.json"
  done
  [ "$(grep -c '"code"' "$W/vt1.json")" = 2 ] || { fail "expected two errors: $(head -c 300 "$W/vt1.json")"; return; }
  cmp -s "$W/vt1.json" "$W/vt2.json" && cmp -s "$W/vt1.json" "$W/vt5.json" ||
    fail "validate --json differs between --threads 1, 2 and 5"
}
tcase "validate --threads 1/2/5: the same errors in the same order" t_validate_threads

# ---------------------------------------------------------------------------

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]

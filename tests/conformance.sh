#!/usr/bin/env bash
# conformance.sh - plays every golden test vector (testvectors/) through the dcr CLI.
#
# usage: tests/conformance.sh [path/to/dcr] [testvectors-dir]
#        (defaults: build/dcr, testvectors)
#
# The bundle corpora are testvectors/index.json (format 1.0, files in v1/),
# testvectors/v1.1/index.json (format 1.1), testvectors/v1.2/index.json (format 1.2)
# and testvectors/v1.3/index.json (format 1.3), the files of each later one beside its
# index. Checks each index
# (testvectors/schema.json; every file's sha256 with sha256sum, the members of a
# checkpoint set's directory one by one; no unlisted file; the counts, repair
# checks included), then all of them together with the companion formats'
# (journal-v1/, journal-v1.1/, history-v1/, history-v1.1/): every SPEC.md error code that a bundle can cause has an invalid
# vector; every requirement id [R-...] of SPEC.md is covered by a vector or listed
# in requirements_without_vectors, and every id an index names exists in SPEC.md.
# Then runs
#   dcr validate --json BUNDLE [--base BASE] [--target TARGET]
# for each vector (BASE and TARGET are directories for a set) and compares the exit
# status, "valid", errors[0].code and its stage (and every code, where the index
# lists all_errors) with the index; for valid vectors with a base, also `dcr apply`
# and the sha256 of what it writes (of each member it writes, for a set) against
# the target's. Prints each failure and a summary; exits 1 if anything failed.
set -u

DCR=${1:-build/dcr}
TV=${2:-testvectors}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
case $TV in /*) ;; *) TV=$PWD/$TV ;; esac
SPEC=$HERE/../SPEC.md
SCHEMA=$HERE/../testvectors/schema.json

[ -x "$DCR" ] || { echo "conformance: $DCR is not an executable file"; exit 1; }
[ -f "$TV/index.json" ] || { echo "conformance: no $TV/index.json"; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/dcr-conformance.XXXXXX") || exit 3
trap 'rm -rf "$W"' EXIT
trap 'exit 130' INT TERM

python3 - "$DCR" "$TV" "$SPEC" "$SCHEMA" "$W" <<'PYEOF'
import hashlib, json, os, re, shutil, subprocess, sys

dcr, tv, spec_path, schema_path, work = sys.argv[1:6]
failures = []


def fail(what):
    failures.append(what)
    print("not ok - " + what[:800])


# ---- the index against its schema (a small validator: the keywords schema.json uses)

def check_schema(value, schema, defs, path):
    if "$ref" in schema:
        return check_schema(value, defs[schema["$ref"].split("/")[-1]], defs, path)
    if "oneOf" in schema:
        ok = sum(1 for s in schema["oneOf"] if not check_schema(value, s, defs, path))
        return [] if ok == 1 else ["%s: matches %d of oneOf" % (path, ok)]
    errs = []
    types = {"object": dict, "array": list, "string": str, "null": type(None), "boolean": bool}
    t = schema.get("type")
    if t == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return ["%s: not an integer" % path]
    elif t and not isinstance(value, types[t]):
        return ["%s: not of type %s" % (path, t)]
    if "const" in schema and value != schema["const"]:
        errs.append("%s: %r is not %r" % (path, value, schema["const"]))
    if "enum" in schema and value not in schema["enum"]:
        errs.append("%s: %r not in %r" % (path, value, schema["enum"]))
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errs.append("%s: %r does not match %s" % (path, value, schema["pattern"]))
        if len(value) < schema.get("minLength", 0):
            errs.append("%s: too short" % path)
    if isinstance(value, int) and "minimum" in schema and value < schema["minimum"]:
        errs.append("%s: below minimum" % path)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errs.append("%s: fewer than %d items" % (path, schema["minItems"]))
        for i, v in enumerate(value):
            errs += check_schema(v, schema.get("items", {}), defs, "%s[%d]" % (path, i))
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in value:
                errs.append("%s: missing %s" % (path, k))
        for k, v in value.items():
            if "propertyNames" in schema:
                errs += check_schema(k, schema["propertyNames"], defs, "%s key %r" % (path, k))
            if k in props:
                errs += check_schema(v, props[k], defs, "%s.%s" % (path, k))
            elif schema.get("additionalProperties") is False:
                errs.append("%s: unexpected key %s" % (path, k))
            elif isinstance(schema.get("additionalProperties"), dict):
                errs += check_schema(v, schema["additionalProperties"], defs, "%s.%s" % (path, k))
    return errs


with open(schema_path, encoding="utf-8") as f:
    schema = json.load(f)
try:
    import jsonschema  # a full validator, where one is installed
except ImportError:
    jsonschema = None

# The bundle corpora: 1.0 (its files in v1/), 1.1, 1.2 and 1.3 (their files beside their
# indexes).
corpora = []
for name, rel in (("1.0", "index.json"), ("1.1", os.path.join("v1.1", "index.json")),
                  ("1.2", os.path.join("v1.2", "index.json")),
                  ("1.3", os.path.join("v1.3", "index.json"))):
    path = os.path.join(tv, rel)
    if not os.path.isfile(path):
        fail("no %s" % path)
        continue
    with open(path, encoding="utf-8") as f:
        index = json.load(f)
    corpora.append((name, index, os.path.join(os.path.dirname(path), index["root"])))

for name, index, root in corpora:
    for e in check_schema(index, schema, schema.get("$defs", {}), "index")[:20]:
        fail("%s schema: %s" % (name, e))
    if jsonschema:
        try:
            jsonschema.validate(index, schema)
        except jsonschema.ValidationError as e:
            fail("%s schema (jsonschema): %s at %s" % (name, e.message, list(e.absolute_path)))


def file_refs(ref):
    """(path, sha256) of each file a file or a set's directory names"""
    if "members" not in ref:
        return [(ref["path"], ref["sha256"])]
    return [(ref["path"] + "/" + m, d) for m, d in
            list(ref["members"].items()) + list(ref.get("ignored", {}).items())]


# ---- files: sha256 of each, and nothing unlisted

for name, index, root in corpora:
    listed = {}
    for v in index["vectors"]:
        for role, ref in v["files"].items():
            for p, d in file_refs(ref):
                if listed.setdefault(p, d) != d:
                    fail("%s: %s listed with two digests" % (v["id"], p))
    present = set()
    for d, _, names in os.walk(root):
        for n in names:
            present.add(os.path.relpath(os.path.join(d, n), root))
    present.discard("index.json")  # a corpus whose root is its index's own folder
    for p in sorted(present - set(listed)):
        fail("file %s is not in the %s index" % (p, name))
    for p in sorted(set(listed) - present):
        fail("file %s is in the %s index but missing" % (p, name))
    paths = sorted(set(listed) & present)
    out = subprocess.run(["sha256sum", "--"] + paths, cwd=root, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        digest, fname = line.split(None, 1)
        fname = fname.lstrip("*")
        if listed.get(fname) != digest:
            fail("file %s: sha256 %s, index says %s" % (fname, digest, listed.get(fname)))
    if out.returncode:
        fail("sha256sum: " + out.stderr.strip())

# ---- coverage: codes, requirement ids, flags, ids

CODES = ["DCR_OK", "DCR_E_IO", "DCR_E_NOMEM", "DCR_E_ARGUMENT", "DCR_E_TRUNCATED",
         "DCR_E_MAGIC", "DCR_E_VERSION", "DCR_E_RESERVED", "DCR_E_CHECKSUM",
         "DCR_E_LIMIT", "DCR_E_STRUCTURE", "DCR_E_UNKNOWN_SECTION", "DCR_E_MANIFEST",
         "DCR_E_NAME", "DCR_E_DTYPE", "DCR_E_SHAPE", "DCR_E_LAYOUT", "DCR_E_INDEX",
         "DCR_E_ENCODING", "DCR_E_POSITION", "DCR_E_DECOMPRESS",
         "DCR_E_BASE_MISMATCH", "DCR_E_TARGET_MISMATCH", "DCR_E_CHECKPOINT",
         "DCR_E_INTERRUPTED", "DCR_E_JOURNAL", "DCR_E_ARCHIVE", "DCR_E_SIGNATURE",
         "DCR_E_FETCH", "DCR_E_CHANGED"]
# Companion formats (SPEC.md §18, §19, §20) and range readers (§21) have vectors and
# indexes of their own; their codes and requirement ids count as covered by them, as do
# those of every bundle corpus.
companions = [json.load(open(os.path.join(tv, p, "index.json"), encoding="utf-8"))
              for p in ("journal-v1", "journal-v1.1", "journal-v1.2", "history-v1", "history-v1.1",
                        "history-containers-v1", "history-append-v1", "sign-v1", "sign-v2", "range-v1",
                        "resource-v1", "walk-v1")]
spec = open(spec_path, encoding="utf-8").read()
spec_codes = set(re.findall(r"^\| \d+ \| (DCR_E_[A-Z_]+) \|", spec, re.M))
if spec_codes != set(CODES[1:]):
    fail("SPEC.md §13 lists %s; the runner knows %s" % (sorted(spec_codes), CODES[1:]))
all_vectors = [v for _, index, _ in corpora for v in index["vectors"]]
untestable = {c for _, index, _ in corpora for c in index["codes_without_vectors"]}
untestable |= {c for index in companions for c in index.get("codes_without_vectors", {})}
tested = {v["error"] for v in all_vectors if v["result"] == "invalid"}
tested |= {v.get("error") for c in companions for v in c["vectors"] if v.get("error")}
for code in sorted(spec_codes):
    if code not in tested and code not in untestable:
        fail("%s has no invalid vector and is not in codes_without_vectors" % code)
    if code in tested and code in untestable:
        fail("%s has vectors but is listed in codes_without_vectors" % code)
ids = set(re.findall(r"\[(R-[A-Z]+-[0-9]+)\]", spec))
sections = set(re.findall(r"^#+ (\d+(?:\.\d+)*)\.? ", spec, re.M))
seen_ids = set()
for name, index, root in corpora:
    used_flags = set()
    for v in index["vectors"]:
        if v["id"] in seen_ids:
            fail("duplicate vector id %s" % v["id"])
        seen_ids.add(v["id"])
        for c in v["covers"]:
            if c.startswith("R-") and c not in ids:
                fail("%s covers %s, which SPEC.md does not define" % (v["id"], c))
            if c.startswith("§") and c[1:] not in sections:
                fail("%s covers %s, which SPEC.md has no heading for" % (v["id"], c))
        used_flags.update(v["flags"])
        for fl in v["flags"]:
            if fl not in index["flags"]:
                fail("%s: undeclared flag %s" % (v["id"], fl))
        if (v["result"] == "valid") != (v["error"] is None) or (v["error"] is None) != (v["stage"] is None):
            fail("%s: error and stage must be null exactly for valid vectors" % v["id"])
        if v["error"] and v["error"] not in CODES[1:]:
            fail("%s: unknown error code %s" % (v["id"], v["error"]))
        if ("repair_checked" in v) != (v["result"] == "invalid"):
            fail("%s: repair_checked must be given exactly for invalid vectors" % v["id"])
    for fl in sorted(set(index["flags"]) - used_flags):
        fail("flag %s is declared but unused in the %s index" % (fl, name))
    covered_here = {c for v in index["vectors"] for c in v["covers"] if c.startswith("R-")}
    without_here = set(index["requirements_without_vectors"])
    for r in sorted(without_here - ids):
        fail("requirements_without_vectors lists %s, which SPEC.md does not define" % r)
    for r in sorted(without_here & covered_here):
        fail("requirements_without_vectors lists %s, which vectors cover" % r)
    counts = {r: sum(v["result"] == r for v in index["vectors"]) for r in ("valid", "invalid")}
    counts["repair_checked"] = sum(v.get("repair_checked") is True for v in index["vectors"])
    if counts != index["counts"]:
        fail("%s counts %r, index says %r" % (name, counts, index["counts"]))
covered = {c for v in all_vectors for c in v["covers"] if c.startswith("R-")}
without = {r for _, index, _ in corpora for r in index["requirements_without_vectors"]}
companion_ids = {c for x in companions for v in x["vectors"] for c in v.get("covers", [])}
companion_ids |= {r for x in companions for r in x.get("requirements_without_vectors", {})}
for r in sorted(ids - companion_ids - covered - without):
    fail("SPEC.md requirement %s is in no vector's covers nor in requirements_without_vectors" % r)

# ---- every vector through `dcr validate --json` (and `dcr apply` for valid ones)


def tree_digests(path):
    """{relative path: sha256} of every file under a directory"""
    out = {}
    for d, _, names in os.walk(path):
        for n in names:
            full = os.path.join(d, n)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = hashlib.sha256(f.read()).hexdigest()
    return out


STAGE = {"structure": "structure", "chunks": "chunks", "apply": "base", "target": "target"}
passed = total = 0
for name, index, root in corpora:
    for v in index["vectors"]:
        total += 1
        vid, files = v["id"], v["files"]
        bundle = os.path.join(root, files["bundle"]["path"])
        cmd = [dcr, "validate", "--json", bundle]
        if "base" in files:
            cmd += ["--base", os.path.join(root, files["base"]["path"])]
        if "target" in files:
            cmd += ["--target", os.path.join(root, files["target"]["path"])]
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=120)
        except subprocess.TimeoutExpired:
            fail("%s: dcr validate timed out" % vid)
            continue
        try:
            j = json.loads(r.stdout)
        except ValueError:
            fail("%s: dcr validate --json printed no JSON (exit %d): %r %r"
                 % (vid, r.returncode, r.stdout[:200], r.stderr[:200]))
            continue
        errs = j.get("errors", [])
        got = "valid" if j.get("valid") is True and not errs else errs[0]["code"] if errs else "?"
        got_stage = errs[0].get("stage") if errs else None
        want_rc = {True: 0, False: 1}[got == "valid"]
        ok = True
        if r.returncode != want_rc:
            fail("%s: exit status %d with valid=%r" % (vid, r.returncode, j.get("valid")))
            ok = False
        if v["result"] == "valid":
            accepted = got == "valid"
        else:
            accepted = got == v["error"] and got_stage == STAGE[v["stage"]]
        if not accepted:
            msg = errs[0].get("message") if errs else ""
            fail("%s: expected %s%s, got %s%s (%s)"
                 % (vid, v["error"] or "valid", " at " + v["stage"] if v["stage"] else "", got,
                    " at " + got_stage if got_stage else "", msg))
            ok = False
        if "all_errors" in v and got != "valid" and [e["code"] for e in errs] != v["all_errors"]:
            fail("%s: all errors %r, expected %r" % (vid, [e["code"] for e in errs], v["all_errors"]))
            ok = False
        if v["result"] == "valid" and "base" in files and "target" in files:
            out_path = os.path.join(work, "out")
            if os.path.isdir(out_path):
                shutil.rmtree(out_path)  # a set's output directory must not exist yet
            elif os.path.exists(out_path):
                os.unlink(out_path)
            a = subprocess.run([dcr, "apply", "-q", "--threads", "2",
                                os.path.join(root, files["base"]["path"]),
                                bundle, "-o", out_path], capture_output=True, timeout=120)
            target = files["target"]
            if a.returncode:
                fail("%s: dcr apply exit %d: %s" % (vid, a.returncode, a.stderr[:300]))
                ok = False
            elif "members" in target:
                if not os.path.isdir(out_path) or tree_digests(out_path) != target["members"]:
                    fail("%s: dcr apply wrote a directory whose members are not the target's" % vid)
                    ok = False
            else:
                s = subprocess.run(["sha256sum", out_path], capture_output=True, text=True)
                if s.stdout.split()[0] != target["sha256"]:
                    fail("%s: dcr apply wrote a file whose sha256 is not the target's" % vid)
                    ok = False
        passed += ok

counts = {r: sum(v["result"] == r for v in all_vectors) for r in ("valid", "invalid")}
counts["repair_checked"] = sum(v.get("repair_checked") is True for v in all_vectors)
print("conformance (dcr CLI): %d of %d vectors passed (%s; %d valid, %d invalid, %d of them with a "
      "repair check); %d failures" % (passed, total, " and ".join(
          "%d of format %s" % (len(i["vectors"]), n) for n, i, _ in corpora), counts["valid"],
          counts["invalid"], counts["repair_checked"], len(failures)))
sys.exit(1 if failures else 0)
PYEOF

#!/usr/bin/env bash
# history_vectors.sh - plays every history archive test vector
# (testvectors/history-v1/ or history-v1.1/index.json, SPEC.md §19) through the dcr CLI.
#
# usage: tests/history_vectors.sh [path/to/dcr] [testvectors/history-v1]
#
# For each vector: the file's sha256 against the index; `dcr history verify --json`
# gives the index's result and error code; `dcr history list` fails exactly when
# the error's stage is "index". For a valid vector, every step of `steps` is
# extracted (from the file, and the last one from a pipe too) and the result's
# sha256 and state id (dcr id) compared with the index. Exits 1 on any failure.
set -u
DCR=${1:-build/dcr}
TV=${2:-testvectors/history-v1}
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
[ -x "$DCR" ] || { echo "history_vectors: $DCR is not an executable file"; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/dcr-history-vectors.XXXXXX") || exit 3
trap 'rm -rf "$W"' EXIT
python3 - "$DCR" "$TV" "$W" <<'PYEOF'
import hashlib, json, os, subprocess, sys
dcr, tv, work = sys.argv[1:4]
index = json.load(open(os.path.join(tv, "index.json"), encoding="utf-8"))
failures, passed = [], 0

def fail(vid, msg):
    failures.append("%s: %s" % (vid, msg))

def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()

def tree(d):  # a directory step (history 1.1): each file's path and sha256
    return {os.path.relpath(os.path.join(r, n), d).replace(os.sep, "/"): sha256(os.path.join(r, n))
            for r, _, names in os.walk(d) for n in names}

def same(path, want):
    return tree(path) == want["files"] if "files" in want else sha256(path) == want["sha256"]

listed = {v["archive"] for v in index["vectors"]}
for root, _, names in os.walk(tv):
    for n in names:
        rel = os.path.relpath(os.path.join(root, n), tv)
        if rel != "index.json" and rel not in listed:
            fail(rel, "a file the index does not list")
for v in index["vectors"]:
    vid, path, before = v["id"], os.path.join(tv, v["archive"]), len(failures)
    if sha256(path) != v["sha256"]:
        fail(vid, "sha256 differs from the index")
    out = subprocess.run([dcr, "history", "verify", "--json", path], capture_output=True, text=True)
    doc = json.loads(out.stdout or "{}")
    got = None if doc.get("valid") else (doc.get("error") or {}).get("code")
    if doc.get("valid") is None:
        fail(vid, "no JSON from verify: " + out.stderr.strip())
    elif (v["result"] == "valid") != bool(doc["valid"]) or got != v["error"]:
        fail(vid, "verify says %s, the index %s" % (got or "valid", v["error"] or "valid"))
    if (out.returncode == 0) != (v["result"] == "valid"):
        fail(vid, "verify exit status %d" % out.returncode)
    listing = subprocess.run([dcr, "history", "list", path], capture_output=True, text=True)
    if (listing.returncode == 0) != (v["stage"] != "index"):
        fail(vid, "list exit status %d for a vector of stage %s" % (listing.returncode, v["stage"]))
    for step, want in sorted(v.get("steps", {}).items(), key=lambda kv: int(kv[0])):
        target = os.path.join(work, "step")
        x = subprocess.run([dcr, "history", "extract", path, "--step", step, "-o", target, "-f", "-q"],
                           capture_output=True, text=True)
        if x.returncode:
            fail(vid, "extract --step %s: %s" % (step, x.stderr.strip()))
            continue
        if os.path.isdir(target) != ("files" in want):
            fail(vid, "step %s: a %s, the index gives a %s" % (step, "directory" if os.path.isdir(target) else "file",
                                                            "directory" if "files" in want else "file"))
        elif "files" in want and tree(target) != want["files"]:
            fail(vid, "step %s: the directory's files differ" % step)
        elif "files" not in want and sha256(target) != want["sha256"]:
            fail(vid, "step %s: the checkpoint's sha256 differs" % step)
        ident = subprocess.run([dcr, "id", target], capture_output=True, text=True).stdout.split()
        if not ident or ident[0] != want["state"]:
            fail(vid, "step %s: state id %s, the index says %s" % (step, ident[:1], want["state"]))
    if v.get("steps"):
        last = max(v["steps"], key=int)
        with open(path, "rb") as f:
            x = subprocess.run([dcr, "history", "extract", "-", "--step", last, "-o", os.path.join(work, "pipe"),
                                "-f", "-q"], stdin=f, capture_output=True, text=True)
        if x.returncode or not same(os.path.join(work, "pipe"), v["steps"][last]):
            fail(vid, "extract from a pipe: %s" % x.stderr.strip())
    passed += len(failures) == before
for f in failures:
    print("not ok - " + f)
print("history vectors: %d passed, %d failed" % (passed, len(index["vectors"]) - passed))
sys.exit(1 if failures else 0)
PYEOF

#!/usr/bin/env bash
# append_vectors.sh - plays the append journal vectors (testvectors/history-append-v1/,
# SPEC.md §19.6) through the dcr CLI.
#
# usage: tests/append_vectors.sh [path/to/dcr] [testvectors/history-append-v1]
#
# For each vector: the files' sha256 against the index; the archive copied, with its
# journal beside it as ARCHIVE.dcr-append; `dcr history recover` must exit 0 and
# leave the archive with after_sha256 and no journal (then `dcr history verify`
# passes), or fail with the index's error code and leave both files as they were.
# A rolled-back vector is played a second time through `dcr history list`, which
# rolls back on its own. Exits 1 on any failure.
set -u
DCR=${1:-build/dcr}
TV=${2:-testvectors/history-append-v1}
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
[ -x "$DCR" ] || { echo "append_vectors: $DCR is not an executable file"; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/dcr-append-vectors.XXXXXX") || exit 3
trap 'rm -rf "$W"' EXIT
python3 - "$DCR" "$TV" "$W" <<'PYEOF'
import hashlib, json, os, shutil, subprocess, sys
dcr, tv, work = sys.argv[1:4]
index = json.load(open(os.path.join(tv, "index.json"), encoding="utf-8"))
failures, passed = [], 0

def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()

listed = {v["archive"] for v in index["vectors"]} | {v["journal"] for v in index["vectors"] if v["journal"]}
for root, _, names in os.walk(tv):
    for n in names:
        rel = os.path.relpath(os.path.join(root, n), tv)
        if rel != "index.json" and rel not in listed:
            failures.append("%s: a file the index does not list" % rel)
for v in index["vectors"]:
    vid, before = v["id"], len(failures)
    fail = lambda msg: failures.append("%s: %s" % (vid, msg))
    src = os.path.join(tv, v["archive"])
    if sha256(src) != v["sha256"] or (v["journal"] and sha256(os.path.join(tv, v["journal"])) != v["journal_sha256"]):
        fail("sha256 differs from the index")
    for how in (["recover"], ["list"]) if v["result"] == "rolled-back" else (["recover"],):
        archive = os.path.join(work, "a.tar")
        journal = archive + ".dcr-append"
        for p in (archive, journal):
            if os.path.exists(p):
                os.unlink(p)
        shutil.copyfile(src, archive)
        if v["journal"]:
            shutil.copyfile(os.path.join(tv, v["journal"]), journal)
        out = subprocess.run([dcr, "history"] + how + [archive], capture_output=True, text=True)
        if v["result"] == "error":
            if out.returncode == 0 or v["error"] + ":" not in out.stderr:
                fail("%s: exit %d, '%s'; the index says %s" % (how[0], out.returncode, out.stderr.strip(), v["error"]))
            if sha256(archive) != v["sha256"] or not os.path.exists(journal):
                fail("%s: the failed rollback changed the archive or removed the journal" % how[0])
            continue
        if out.returncode:
            fail("%s exits %d: %s" % (how[0], out.returncode, out.stderr.strip()))
        elif sha256(archive) != v["after_sha256"]:
            fail("%s: the archive's sha256 after differs from the index" % how[0])
        elif os.path.exists(journal):
            fail("%s left the journal" % how[0])
        elif how == ["recover"]:
            ver = subprocess.run([dcr, "history", "verify", archive], capture_output=True, text=True)
            if ver.returncode:
                fail("the archive rolled back to does not verify: " + ver.stderr.strip())
    passed += len(failures) == before
for f in failures:
    print("FAIL " + f)
print("append_vectors: %d passed, %d failed (%s)" % (passed, len(index["vectors"]) - passed, tv))
sys.exit(1 if failures else 0)
PYEOF

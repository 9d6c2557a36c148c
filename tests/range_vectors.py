#!/usr/bin/env python3
"""range_vectors.py DCR DIR - plays testvectors/range-v1 (SPEC.md §21.2) through the
CLI: `dcr validate` must give each bundle the walk's outcome, and `dcr apply BASE
BUNDLE --tensors PATTERN... -o OUT` (a partial range reader) each selection's: the
error named, with nothing written, or an OUT whose tensors are exactly the selected
ones, each with the target's dtype, shape and bytes."""
import fnmatch
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

from tap import Tally


def tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack_from("<Q", data)[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    return {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def code(stderr):
    for word in stderr.replace(":", " ").split():
        if word.startswith("DCR_E_"):
            return word
    return None


def main():
    dcr, root = sys.argv[1], sys.argv[2]
    index = json.load(open(os.path.join(root, "index.json")))
    tally = Tally()
    check = tally.check

    work = tempfile.mkdtemp(prefix="dcr-range.")
    for v in index["vectors"]:
        bundle, base = os.path.join(root, v["bundle"]), os.path.join(root, v["base"])
        check(hashlib.sha256(open(bundle, "rb").read()).hexdigest() == v["sha256"],
              "%s: sha256" % v["id"])
        walk = subprocess.run([dcr, "validate", "-q", bundle], capture_output=True, text=True)
        check(code(walk.stderr) == v["walk"] and (walk.returncode == 0) == (v["walk"] is None),
              "%s: walk %s" % (v["id"], v["walk"]))
        want = tensors(os.path.join(root, v["target"]))
        for s in v["selections"]:
            out = os.path.join(work, "out.safetensors")
            args = [dcr, "apply", "-q", base, bundle, "-o", out]
            for p in s["select"]:
                args += ["--tensors", p]
            r = subprocess.run(args, capture_output=True, text=True)
            what = "%s: --tensors %s -> %s" % (v["id"], " ".join(s["select"]), s["error"] or "valid")
            if s["error"]:
                check(r.returncode != 0 and code(r.stderr) == s["error"] and not os.path.exists(out),
                      what + (" (got %s)" % r.stderr.strip() if code(r.stderr) != s["error"] else ""))
                continue
            if r.returncode:
                check(False, what + " (got %s)" % r.stderr.strip())
                continue
            got = tensors(out)
            names = {k for k in want if any(fnmatch.fnmatchcase(k, p) for p in s["select"])}
            check(set(got) == names and all(got[k] == want[k] for k in names), what)
            os.unlink(out)
    os.rmdir(work)
    return tally.end()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""resource_vectors.py DCR DIR - plays testvectors/resource-v1 (SPEC.md §11, §14)
through the CLI: each run of each vector under its memory budget (--memory), its
peak resident memory measured (wait4's rusage of the child, as tests/hostile_test.sh
measures it) and its time limited, must give the outcome the index names (`result`),
within `peak_rss_mib` and `seconds`, leaving nothing at {out} after a failure and a
journal and its checkpoint as they were. Under sanitizers (SANITIZE set, as `make
asan` sets it) the bounds are relaxed as hostile_test.sh relaxes them."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from tap import Tally


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def code(stderr):
    for word in stderr.replace(":", " ").split():
        if word.startswith("DCR_E_"):
            return word
    return None


def measure(argv, seconds, stdin):
    """(exit status or 124 after `seconds`, peak resident MiB, seconds taken, stderr)."""
    err = tempfile.TemporaryFile()
    start = time.monotonic()
    p = subprocess.Popen(argv, stdin=open(stdin, "rb") if stdin else subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=err)
    timer = threading.Timer(seconds, lambda: os.kill(p.pid, signal.SIGKILL))
    timer.start()
    _, status, usage = os.wait4(p.pid, 0)
    took = time.monotonic() - start
    timer.cancel()
    p.returncode = 0  # reaped here, not by Popen
    rc = 124 if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL else \
        os.waitstatus_to_exitcode(status)
    err.seek(0)
    return rc, usage.ru_maxrss // 1024, took, err.read().decode(errors="replace")


def main():
    dcr, root = os.path.abspath(sys.argv[1]), sys.argv[2]
    index = json.load(open(os.path.join(root, "index.json")))
    sanitized = bool(os.environ.get("SANITIZE"))
    tally = Tally()
    check = tally.check

    work = tempfile.mkdtemp(prefix="dcr-resource.")
    for v in index["vectors"]:
        for run in v["runs"]:
            paths, kept = {}, {}
            for role, f in v["files"].items():
                if "zeros" in f:  # a sparse file of zeros, made here
                    paths[role] = os.path.join(work, role)
                    with open(paths[role], "wb") as z:
                        z.truncate(f["zeros"])
                else:
                    paths[role] = os.path.join(root, f["path"])
            if "journal" in paths:  # beside the checkpoint, as a crash would leave it
                shutil.copyfile(paths["journal"], paths["ckpt"] + ".dcr-journal")
                kept = {paths["ckpt"] + ".dcr-journal": v["files"]["journal"]["sha256"]}
                blocks = os.stat(paths["ckpt"]).st_blocks
            paths["out"] = os.path.join(work, "out")
            argv = [a.format(**paths) for a in run["argv"]] + ["--memory", "%dK" % (run["budget"] >> 10)]
            mib, secs = run["peak_rss_mib"], run["seconds"]
            if sanitized:  # shadow memory, quarantine and slower code
                mib, secs = mib * 2 + 512, secs * 4
            rc, peak, took, err = measure([dcr] + argv, secs, paths.get(run.get("stdin")))
            want = run["result"]
            what = "%s: dcr %s -> %s (exit %d, %s; peak %d MiB of %d, %.1f s of %d)" % (
                v["name"], " ".join(run["argv"]), want or "success", rc, code(err) or "no code", peak,
                mib, took, secs)
            ok = rc != 124 and peak <= mib and code(err) == want and \
                rc == (0 if want is None else 3 if want == "DCR_E_NOMEM" else 1)
            if want == "DCR_E_NOMEM":
                ok = ok and "memory budget" in err
            if "{out}" in run["argv"]:
                if want is None and "output_sha256" in run:
                    ok = ok and os.path.exists(paths["out"]) and sha256(paths["out"]) == run["output_sha256"]
                elif want is not None:
                    ok = ok and not os.path.lexists(paths["out"])
            for path, digest in kept.items():  # a kept journal: both files as they were
                ok = ok and os.path.exists(path) and sha256(path) == digest and \
                    os.stat(paths["ckpt"]).st_blocks == blocks
            check(ok, what + ("" if ok or not err.strip() else ": " + err.strip().splitlines()[-1]))
            for name in os.listdir(work):
                p = os.path.join(work, name)
                shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
        for role, f in v["files"].items():
            if "path" in f:
                check(sha256(os.path.join(root, f["path"])) == f["sha256"], "%s: %s sha256" % (v["name"], role))
    shutil.rmtree(work)
    return tally.end()


if __name__ == "__main__":
    sys.exit(main())

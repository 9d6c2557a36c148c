#!/usr/bin/env python3
"""walk_vectors.py DCR DIR - plays testvectors/walk-v1 (SPEC.md §2.3): builds each
vector's tree (links, pipes, names that are not UTF-8, paths over max_name_length,
which a repository cannot hold) in a temporary directory and reads it as a set
with `dcr id`: the error named, or the state id of the tree's one safetensors
member read alone."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from tap import Tally


def build(root, tree, model):
    for e in tree:
        parts = [bytes.fromhex(c) for c in e["path"]]
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:  # component by component (openat), so paths over PATH_MAX can be made
            for c in parts[:-1]:
                try:
                    os.mkdir(c, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = nfd
            leaf, kind = parts[-1], e["type"]
            if kind == "link":
                os.symlink(e["to"].encode(), leaf, dir_fd=fd)
            elif kind == "fifo":
                os.mkfifo(leaf, dir_fd=fd)
            elif kind == "dir":
                os.mkdir(leaf, dir_fd=fd)
            else:
                data = model if kind == "safetensors" else e["text"].encode()
                f = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
                os.write(f, data)
                os.close(f)
        finally:
            os.close(fd)


def state_id(dcr, path):
    r = subprocess.run([dcr, "id", path], capture_output=True)
    return r.returncode, r.stdout.split()[0].decode() if r.returncode == 0 else None, r.stderr


def main():
    dcr, root = os.path.abspath(sys.argv[1]), sys.argv[2]
    index = json.load(open(os.path.join(root, "index.json")))
    model = bytes.fromhex(index["safetensors"])
    tally = Tally()
    work = tempfile.mkdtemp(prefix="dcr-walk.")
    try:
        alone = os.path.join(work, "alone.safetensors")
        with open(alone, "wb") as f:
            f.write(model)
        rc, want, err = state_id(dcr, alone)
        tally.check(rc == 0, "the vectors' safetensors member reads alone (%s)" % err.strip())
        for k, v in enumerate(index["vectors"]):
            tree = os.path.join(work, "t%d" % k)
            os.mkdir(tree)
            build(tree, v["tree"], model)
            rc, got, err = state_id(dcr, tree)
            if v["error"] is None:
                tally.check(rc == 0 and got == want, "%s: reads, state id %s (got %s%s)" %
                            (v["id"], want, got, "" if rc == 0 else ": " + err.decode(errors="replace").strip()))
            else:
                words = err.decode(errors="replace").split()
                code = next((w.rstrip(":") for w in words if w.startswith("DCR_E_")), None)
                tally.check(rc == 1 and code == v["error"], "%s: %s (got %s)" % (v["id"], v["error"], code))
    finally:
        shutil.rmtree(work)
    return tally.end()


if __name__ == "__main__":
    sys.exit(main())

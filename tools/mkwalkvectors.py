#!/usr/bin/env python3
"""mkwalkvectors.py [OUT_DIR] - writes OUT_DIR/walk-v1/index.json (OUT_DIR: testvectors): directory trees
that a repository cannot hold portably (symbolic links, pipes, file names that are
not UTF-8, paths longer than max_name_length), each given as a recipe for the
runner to build, with the outcome SPEC.md §2.3 gives reading it as a set. The
outcomes are written here from §2.3's text, not from any reader: the only reader
output kept is none (a valid tree's state id is checked against the state id of
its one safetensors member, which §2.3 makes equal).

Entries of a recipe, in order: {"path": [components as hex bytes], "type": "file",
"text": ...} | {"type": "safetensors"} (the fixed model below) | {"type": "link",
"to": TARGET} | {"type": "fifo"} | {"type": "dir"}. Parent directories are made as
needed. Standard library only; run only to add vectors."""
import json
import os
import struct
import sys

MAX_NAME_LENGTH = 4096  # SPEC.md §11's default


def safetensors():
    """One BF16 tensor of 4 elements: the set's only tensor, so its state id is this
    file's (§2.3: the state id of a set is that of its safetensors members' tensors)."""
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}},
                        separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + bytes([0x80, 0x3f, 0, 0x40, 0x40, 0x40, 0x80, 0x40])


def comp(s):
    return (s if isinstance(s, bytes) else s.encode()).hex()


def entry(path, kind, **kw):
    return dict({"path": [comp(c) for c in path], "type": kind}, **kw)


# A path of more than MAX_NAME_LENGTH bytes: 17 directories of 250 bytes, then a leaf
# (each component under NAME_MAX, the whole under PATH_MAX-free openat).
LONG = [b"d%03d" % i + b"x" * 246 for i in range(17)]
assert sum(len(c) + 1 for c in LONG) > MAX_NAME_LENGTH

MODEL = entry(["model.safetensors"], "safetensors")
CONFIG = entry(["config.json"], "file", text='{"model_type": "llama"}\n')

VECTORS = [
    # -- valid: hidden entries are passed over by name, whatever they are
    ("valid/hidden-dangling-link", "a hidden link that leads nowhere beside the members: "
     "passed over by its name, not an error", [MODEL, CONFIG, entry([".lock"], "link", to="nowhere")],
     None),
    ("valid/hidden-directory-of-bad-entries", "a hidden directory holding a link that leads "
     "nowhere, a pipe, a link to a directory, a name that is not UTF-8 and a safetensors "
     "file: none of it is looked at", [MODEL, CONFIG,
     entry([".cache", "gone"], "link", to="nowhere"), entry([".cache", "pipe"], "fifo"),
     entry([".cache", "up"], "link", to=".."), entry([".cache", b"\xff\xfe"], "file", text="x"),
     entry([".cache", "old.safetensors"], "safetensors")], None),
    ("valid/hidden-pipe-and-directory-link", "a hidden pipe and a hidden link to a "
     "directory", [MODEL, entry([".pipe"], "fifo"), entry([".snapshot"], "link", to=".")], None),
    ("valid/hidden-component-deep", "a hidden directory below a member directory, holding "
     "a link that leads nowhere", [MODEL, entry(["tokenizer", "vocab.txt"], "file", text="a b\n"),
     entry(["tokenizer", ".git", "HEAD"], "link", to="nowhere")], None),
    ("valid/link-to-file", "a visible link to a regular file is followed: a member with the "
     "file's bytes (the blob, not named .safetensors, a raw member beside it)", [entry(["blobs", "m"], "safetensors"),
     entry(["model.safetensors"], "link", to="blobs/m")], None),
    # -- invalid: one rule broken
    ("invalid/dangling-link", "a visible link that leads nowhere", [MODEL,
     entry(["tokenizer.json"], "link", to="nowhere")], "DCR_E_CHECKPOINT"),
    ("invalid/link-to-directory", "a visible link to a directory is not followed",
     [MODEL, entry(["sub", "a.txt"], "file", text="a"), entry(["alias"], "link", to="sub")],
     "DCR_E_CHECKPOINT"),
    ("invalid/pipe", "a pipe", [MODEL, entry(["events"], "fifo")], "DCR_E_CHECKPOINT"),
    ("invalid/not-utf8", "a file name that is not UTF-8", [MODEL, entry([b"vocab-\xff.txt"], "file",
     text="a")], "DCR_E_CHECKPOINT"),
    ("invalid/backslash", "a file name holding a backslash", [MODEL,
     entry(["a\\b.txt"], "file", text="a")], "DCR_E_CHECKPOINT"),
    ("invalid/long-path", "a regular file whose path is over max_name_length",
     [MODEL, entry(LONG + [b"leaf.txt"], "file", text="a")], "DCR_E_LIMIT"),
    # -- invalid: one entry, two rules: the first of §2.3's order
    ("invalid/long-path-dangling-not-utf8", "a link that leads nowhere, its name not "
     "UTF-8, its path over max_name_length: the length is the first rule",
     [MODEL, entry(LONG + [b"\xff"], "link", to="nowhere")], "DCR_E_LIMIT"),
    # -- invalid: two entries: the first in path order
    ("invalid/path-order-checkpoint-first", "a pipe 'a-events' and a file under a path over "
     "max_name_length starting 'd000': the pipe comes first in path order",
     [MODEL, entry(["a-events"], "fifo"), entry(LONG + [b"leaf.txt"], "file", text="a")],
     "DCR_E_CHECKPOINT"),
    ("invalid/path-order-limit-first", "a file under a path over max_name_length starting "
     "'d000' and a pipe 'z-events': the long path comes first in path order",
     [MODEL, entry(["z-events"], "fifo"), entry(LONG + [b"leaf.txt"], "file", text="a")],
     "DCR_E_LIMIT"),
]


def main():
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "testvectors", "walk-v1")
    os.makedirs(out, exist_ok=True)
    index = {
        "format": "DCR checkpoint sets: reading a directory (SPEC.md §2.3)",
        "format_version": "1.1",
        "spec": "SPEC.md §2.3",
        "generator": "tools/mkwalkvectors.py (standard library; outcomes from §2.3's text)",
        "usage": "for each vector, build `tree` in an empty directory (entries in order; "
                 "each path's components are hex bytes; parents made as needed; `link` a "
                 "symbolic link whose target is `to`; `fifo` a named pipe; `safetensors` "
                 "the file whose hex is `safetensors`), then read the directory as a set "
                 "with the default limits (dcr id DIR). `error` null: it reads, and its "
                 "state id is that of `safetensors` read alone; else it fails with `error`",
        "safetensors": safetensors().hex(),
        "vectors": [{"id": i, "result": "invalid" if err else "valid", "error": err,
                     "covers": ["R-SET-4", "§2.3"], "description": d, "tree": tree}
                    for i, d, tree, err in VECTORS],
    }
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

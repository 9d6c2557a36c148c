#!/usr/bin/env python3
"""mkhistory_hostile.py - small history archives that ask a reader for much memory
or time (issue 32), for tests/cli_history_test.sh. Nothing is held whole: long
runs of zeros are holes in a .tar and RLE blocks in a .tar.zst (a zstd frame of
RLE blocks is 4 bytes per 128 KiB), so a 3 GiB member costs kilobytes.

  index KIND SIZE ARCHIVE
      an archive whose index is a SIZE-byte JSON bomb: KIND is
      array   {"members":[{},{},...]}: 2^20 members allowed, each a DOM object;
      nested  members of 2000 nested arrays each, under jansson's depth limit;
      string  a run_id of SIZE bytes;
      members realistic members (~300 bytes each), as many as SIZE holds.
  members INDEX ARCHIVE MEMBER...
      INDEX (a JSON file), then one member per MEMBER, named as the index names
      them: a file's path (its bytes); zeros:SIZE[:FILE:N], SIZE bytes, FILE's first
      N bytes (a real bundle's header) and then zeros; or cut:SIZE, a member of
      SIZE bytes whose first 8 (a bundle's magic) end the archive: a member
      declared larger than the archive.
ARCHIVE's suffix says its container: .tar, .tar.zst or .zip (index bombs only,
with a data descriptor: its size is known to a reader of the file, not of a pipe).
"""
import json
import os
import struct
import subprocess
import sys
import tarfile
import zipfile

MIB = 1 << 20
HEAD = b'{"format":"dcr-history","version":"1.0",'


def repeat(piece, total):
    block = piece * max(1, MIB // len(piece))
    while total > 0:
        yield block[:total]
        total -= len(block)


def index_bomb(kind, size):
    """(chunks, length) of an index text of about `size` bytes."""
    if kind == "members":
        one = ('{"name":"bundles/step-%08d.dcr","kind":"bundle","step":%d,"size":3136,"xxh3_128":'
               '"15f6aa55aa55aa55aa55aa55aa55aa55","base_state":"37da55aa55aa55aa55aa55aa55aa55aa",'
               '"target_state":"9dbb55aa55aa55aa55aa55aa55aa55aa","metadata":{"run_id":"run-0412"}},')
        n = size // len(one % (0, 0))
        blocks = range(0, n, 4096)
        text = lambda first: "".join(one % (i, i) for i in range(first, min(n, first + 4096))).encode()
        chunks = [HEAD + b'"members":[', *map(text, blocks), b'{"name":"k","kind":"keyframe"}]}']
        return chunks, sum(map(len, chunks))  # a list of ~64 KiB pieces
    if kind == "array":
        chunks = [HEAD + b'"members":[', *repeat(b"{},", size // 3 * 3), b"{}]}"]
    elif kind == "nested":
        one = b"[" * 2000 + b"]" * 2000 + b","
        chunks = [HEAD + b'"members":[', *repeat(one, size // len(one) * len(one)), b"[]]}"]
    elif kind == "string":
        chunks = [HEAD + b'"run_id":"', *repeat(b"a", size), b'"}']
    else:
        raise SystemExit("unknown index bomb " + kind)
    return chunks, sum(map(len, chunks))


def tar_member(name, size):
    t = tarfile.TarInfo(name)
    t.size, t.mtime, t.mode = size, 315532800, 0o644
    return t.tobuf(tarfile.PAX_FORMAT)


class Out:
    """A tar stream written as data and runs of zeros: a sparse .tar, or a .tar.zst
    of zstd frames (data through the zstd program, zeros as RLE blocks)."""

    def __init__(self, path):
        self.zst = path.endswith(".zst")
        self.f = open(path, "wb")
        self.z = None
        self.at = 0

    def data(self, chunks):
        for c in chunks:
            if not c:
                continue
            if self.zst and not self.z:
                self.f.flush()
                self.z = subprocess.Popen(["zstd", "-q", "-c"], stdin=subprocess.PIPE, stdout=self.f)
            (self.z.stdin if self.zst else self.f).write(c)
            self.at += len(c)

    def zeros(self, n):
        if n == 0:
            return
        self.at += n
        if not self.zst:
            self.f.seek(n, os.SEEK_CUR)
            return
        self.end_frame()
        self.f.write(struct.pack("<IBB", 0xFD2FB528, 0, 7 << 3))  # no content size; a 128 KiB window
        while n:
            k = min(n, 128 << 10)
            n -= k
            self.f.write(struct.pack("<I", (k << 3 | 1 << 1 | (n == 0)))[:3] + b"\0")

    def end_frame(self):
        if self.z:
            self.z.stdin.close()
            assert self.z.wait() == 0
            self.z = None

    def member(self, name, chunks, size, cut=None):
        self.data([tar_member(name, size)])
        start = self.at
        for c in chunks:
            if isinstance(c, int):
                self.zeros(c)
            else:
                self.data([c])
        if cut is not None:
            return
        assert self.at - start == size, (name, self.at - start, size)
        self.zeros(-size % 512)

    def close(self, end=True):
        if end:
            self.zeros(1024)
        self.end_frame()
        if not self.zst:
            self.f.truncate(self.at)
        self.f.close()


class Unseekable:
    """A file zipfile cannot seek in: it writes each member's sizes after its data
    (a data descriptor), so that a reader of a stream learns them only at the end."""

    def __init__(self, f):
        self.f, self.at = f, 0

    def write(self, b):
        self.at += len(b)
        return self.f.write(b)

    def tell(self):
        return self.at

    def flush(self):
        self.f.flush()


def zip_index(path, chunks):
    with open(path, "wb") as f, zipfile.ZipFile(Unseekable(f), "w", zipfile.ZIP_STORED) as z:
        with z.open(zipfile.ZipInfo("dcr-history.json", (1980, 1, 1, 0, 0, 0)), "w", force_zip64=True) as f:
            for c in chunks:
                f.write(c)


def main():
    what = sys.argv[1]
    if what == "index":
        chunks, total = index_bomb(sys.argv[2], int(sys.argv[3]))
        path = sys.argv[4]
        if path.endswith(".zip"):
            return zip_index(path, chunks)
        o = Out(path)
        o.member("dcr-history.json", chunks, total)
        return o.close()
    index, path = sys.argv[2], sys.argv[3]
    ix = open(index, "rb").read()
    names = [m["name"] for m in json.loads(ix)["members"]]
    o = Out(path)
    o.member("dcr-history.json", [ix], len(ix))
    for name, spec in zip(names, sys.argv[4:]):
        kind, _, arg = spec.partition(":")
        if kind == "zeros":
            size, _, head = arg.partition(":")
            head, _, length = head.partition(":")
            head = open(head, "rb").read()[:int(length)] if head else b""
            o.member(name, [head, int(size) - len(head)], int(size))
        elif kind == "cut":
            o.member(name, [b"\x89DCR\r\n\x1a\n"], int(arg), cut=True)
            return o.close(end=False)
        else:
            data = open(spec, "rb").read()
            o.member(name, [data], len(data))
    o.close()


main()

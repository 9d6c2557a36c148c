#!/usr/bin/env python3
"""mkrangevectors.py OUT_DIR - writes OUT_DIR/range-v1/: vectors for partial range
readers (SPEC.md §21.2, R-RAN-6), from the frozen testvectors/v1/ bundle
valid/model.dcr, each broken in one place, with the outcome of a reader that uses
the chunks of some tensors only, next to the walk's (dcr validate).

Python's own struct, json and hashlib, and libxxhash by ctypes (XXH3-64 for the
section checks of §4.2): nothing of libdcr.
"""
import ctypes
import ctypes.util
import hashlib
import json
import os
import struct
import sys

xxh = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

HERE = os.path.dirname(os.path.abspath(__file__))
V1 = os.path.join(HERE, "..", "testvectors", "v1")
SOURCE = "valid/model.dcr"  # chunks: a.0, a.1, b.0, d.0 (entries a b c d e)


def xxh3(b):
    return xxh.XXH3_64bits(bytes(b), len(b))


def seal(b, at):
    """Recomputes the payload check and header check of the section at `at`."""
    length = struct.unpack_from("<Q", b, at + 8)[0]
    struct.pack_into("<Q", b, at + 16, xxh3(b[at + 32:at + 32 + length]))
    struct.pack_into("<Q", b, at + 24, xxh3(b[at:at + 24]))


def chunks(b):
    """The index: (offset, tensor, chunk, count, payload_length) per record."""
    _, _, indx, count = struct.unpack_from("<QQQQ", b, len(b) - 32)
    out = []
    for i in range(count):
        off, t, c, _, _, _, n, pl = struct.unpack_from("<QIIBBHIQ", b, indx + 32 + 32 * i)
        out.append((off, t, c, n, pl))
    return indx, out


def flip_payload(b):
    off = chunks(b)[1][1][0]  # a, chunk 1
    b[off + 32 + 40] ^= 0x01


def dirty_padding(b):
    off, _, _, _, pl = chunks(b)[1][2]  # b, chunk 0
    end = off + 32 + pl
    assert end % 64
    b[end] = 0x5A


def record_count(b):
    off = chunks(b)[1][3][0]  # d, chunk 0
    n = struct.unpack_from("<I", b, off + 32 + 12)[0]
    struct.pack_into("<I", b, off + 32 + 12, n - 1)
    seal(b, off)


def swap_offsets(b):
    indx, c = chunks(b)
    struct.pack_into("<Q", b, indx + 32 + 32 * 2, c[3][0])
    struct.pack_into("<Q", b, indx + 32 + 32 * 3, c[2][0])
    seal(b, indx)


def unknown_type(b):
    off = chunks(b)[1][2][0]  # b, chunk 0 (not the first chunk: the head walk would meet it)
    b[off:off + 4] = b"CHNX"
    seal(b, off)


# (id, how, walk's code, [(selection, code or None)], covers, description)
BROKEN = [
    ("chunk-payload-flipped", flip_payload, "DCR_E_CHECKSUM",
     [(["a"], "DCR_E_CHECKSUM"), (["b", "d"], None), (["c", "e"], None)],
     ["R-RAN-3", "R-RAN-6"], "a byte of the payload of tensor a's chunk 1 flipped"),
    ("chunk-padding-dirty", dirty_padding, "DCR_E_RESERVED",
     [(["b"], "DCR_E_RESERVED"), (["a"], None)],
     ["R-RAN-3", "R-RAN-6"], "a padding byte after tensor b's chunk is 0x5a"),
    ("chunk-record-count", record_count, "DCR_E_INDEX",
     [(["d"], "DCR_E_INDEX"), (["[abce]"], None)],
     ["R-RAN-3", "R-RAN-6"], "tensor d's chunk record says one change fewer than the "
     "index (its section checks made to match)"),
    ("chunk-type-unknown", unknown_type, "DCR_E_UNKNOWN_SECTION",
     [(["b"], "DCR_E_UNKNOWN_SECTION"), (["a", "d"], None)],
     ["R-RAN-3", "R-RAN-4", "R-RAN-6"], "tensor b's chunk section has the type CHNX, "
     "critical (checks made to match): a range reader using it finds a section that is "
     "not CHNK where the index points, and reports what the walk finds first"),
    ("index-offsets-swapped", swap_offsets, "DCR_E_INDEX",
     [(["a"], "DCR_E_INDEX"), (["b"], "DCR_E_INDEX")],
     ["R-RAN-2", "R-RAN-4"], "the index records of b.0 and d.0 swap their offsets (INDX "
     "checks made to match): every reader fails at open, whatever it selects"),
]


def main():
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "testvectors", "range-v1")
    os.makedirs(os.path.join(out, "invalid"), exist_ok=True)
    source = open(os.path.join(V1, SOURCE), "rb").read()
    base, target = "../v1/ckpt/model-base.safetensors", "../v1/ckpt/model-target.safetensors"
    vectors = [{
        "id": "valid/model-whole", "bundle": "../v1/" + SOURCE,
        "sha256": hashlib.sha256(source).hexdigest(), "base": base, "target": target,
        "walk": None, "selections": [{"select": ["*"], "error": None},
                                     {"select": ["a", "d"], "error": None}],
        "covers": ["R-RAN-1", "R-RAN-2", "R-RAN-5"],
        "description": "the v1 bundle as it is: every tensor, and two of them"}]
    for name, how, walk, selections, covers, description in BROKEN:
        b = bytearray(source)
        how(b)
        path = "invalid/%s.dcr" % name
        with open(os.path.join(out, path), "wb") as f:
            f.write(b)
        vectors.append({
            "id": "invalid/" + name, "bundle": path, "sha256": hashlib.sha256(b).hexdigest(),
            "base": base, "target": target, "walk": walk,
            "selections": [{"select": s, "error": e} for s, e in selections],
            "covers": covers, "description": description})
    index = {
        "format": "DCR delta bundle, range readers (random-access profile)",
        "format_version": "1.2",
        "spec": "SPEC.md §21",
        "generator": "tools/mkrangevectors.py, from testvectors/v1/" + SOURCE,
        "usage": "for each vector and each selection, a range reader (SPEC.md §21) that uses "
                 "the chunks of the tensors matching `select` (fnmatch patterns; '*' is every "
                 "tensor) applies `bundle` to `base`: with `error` null, each selected tensor's "
                 "result equals the tensor of `target`; else it fails with `error`. `walk` is "
                 "the outcome of the walk (dcr validate BUNDLE): null for valid. dcr apply "
                 "BASE BUNDLE --tensors PATTERN... -o OUT is such a reader",
        "codes_without_vectors": {
            "DCR_E_FETCH": "a transport failure or an HTTP error status: a property of the "
                           "server and the network, not of any bundle (tests/http_test.sh)",
            "DCR_E_CHANGED": "the object changed between two responses: a property of the "
                             "server, not of any bundle (tests/http_test.sh)"},
        "requirements_without_vectors": {
            "R-RAN-7": "about HTTP responses, not bundle bytes: tests/http_test.sh changes the "
                       "object between requests (fault server and nginx) and expects "
                       "DCR_E_CHANGED with nothing written; fuzz/fuzz_http.c",
            "R-RAN-8": "about HTTP responses: tests/http_test.sh (a server that ignores Range; "
                       "a 206 of the wrong range) and fuzz/fuzz_http.c",
            "R-RAN-9": "about the transport: tests/http_test.sh (dropped connections, resets, "
                       "503s, stalls, retries exhausted)",
            "R-RAN-10": "about HTTP responses: tests/http_test.sh (a 200 that announces more "
                        "than max_bundle_size, or more than TMPDIR holds; 200 bodies of random "
                        "bytes and of a bundle followed by zeros, refused at their first bytes "
                        "or where they stop being a bundle) and fuzz/fuzz_http.c",
            "R-RAN-11": "about the transport: tests/http_test.sh (an origin sending a byte a "
                        "second; --http-deadline)",
            "R-RAN-12": "about HTTP requests: tests/http_test.sh (a 302 to another port: the "
                        "header does not arrive there, nginx's log; it does with "
                        "--header-follow)"},
        "counts": {"valid": 1, "invalid": len(BROKEN)},
        "vectors": vectors,
    }
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print("range-v1: %d vectors in %s" % (len(vectors), out))


if __name__ == "__main__":
    main()

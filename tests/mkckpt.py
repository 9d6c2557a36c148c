#!/usr/bin/env python3
"""mkckpt.py - make checkpoint files for the dcr tests (standard library only).

Modes:

  mkckpt.py pair SPEC BASE_OUT TARGET_OUT [--seed S]
      Write a base and a target safetensors file from a JSON spec (a file name,
      or the JSON text itself if it starts with '{'); --seed overrides its seed.
  mkckpt.py raw SIZE RATE SEED BASE_OUT TARGET_OUT
      Write two raw files of SIZE bytes; a fraction RATE of the bytes differ.
  mkckpt.py bad KIND OUT
      Write a malformed safetensors file (see BAD_KINDS below); prints the
      DCR_E_ code a strict reader must report for it. KIND "all" writes every
      kind as OUT/KIND.safetensors (OUT a directory) and prints "KIND CODE" lines.
  mkckpt.py info FILE [--hash]
      Parse FILE strictly as safetensors (SPEC.md 2.1) and print a JSON summary;
      with --hash, also the tensor hashes and the state id (SPEC.md 7), computed
      with the external `xxh128sum` tool (XXH3-128 of each 4096-byte piece, then
      of the pieces' digests; canonical hex).
  mkckpt.py diff BASE TARGET [--chunk-size N]
      Print, as JSON, what a bundle from BASE to TARGET must carry per tensor:
      status, changed_elements, changed_chunks (SPEC.md 6.2, 8.1), and totals.
  mkckpt.py flip FILE OFFSET [BIT]
      Flip bit BIT (default 0) of the byte at OFFSET of FILE, in place.

Spec format (pair mode):

  {"seed": 1,
   "metadata": {"k": "v"},              optional __metadata__ for both sides
   "base_metadata": {...}, "target_metadata": {...}   optional, per side
   "base_order": "list"|"reverse"|"name", "target_order": ...   data layout order
   "json_style": "compact"|"spaced",    JSON separators in the header
   "pad": true|false|N,                 pad header with spaces to 8-byte alignment
                                        (default true), or add exactly N spaces
   "base_json_style", "target_json_style", "base_pad", "target_pad": per side
   "tensors": [
     {"name": "a", "dtype": "BF16", "shape": [64, 33],
      "fill": "random"|"zeros"|"same-as-base"|"mutate",
      "rate": 0.01,                     fraction of elements that change
      "only": "base"|"target",          removed / added tensor
      "target_shape": [...], "target_dtype": "F16",   reshape / recode
      "target_fill": "random"|"zeros"}  target made afresh, not from the base
   ]}

  fill: how the base bytes are made ("random", the default, or "zeros"); the
  target is the base with a fraction `rate` of its elements changed (default
  0.01 for "random"/"mutate", 0 for "zeros"/"same-as-base"; "same-as-base" forces
  0). An element change flips low bits mostly; for float dtypes sometimes the
  sign bit, +0 -> -0 (the base element is made +0 first), or a new NaN payload.
  rate 1.0 changes every element. For an added tensor ("only": "target") the
  target bytes are made from `fill` the same way against an all-zero base when
  fill is "zeros", else random. A reshape (same dtype and byte length) keeps
  the base bytes (then `rate` applies); a recode with the same byte length
  mutates the base bytes, otherwise the target bytes are random.
  Everything is deterministic given the seed and the tensor names.
"""

import array
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

DTYPES = {
    # name: (code, size, is_float)
    "BOOL": (1, 1, False),
    "U8": (2, 1, False),
    "I8": (3, 1, False),
    "F8_E5M2": (4, 1, True),
    "F8_E4M3": (5, 1, True),
    "I16": (6, 2, False),
    "U16": (7, 2, False),
    "F16": (8, 2, True),
    "BF16": (9, 2, True),
    "I32": (10, 4, False),
    "U32": (11, 4, False),
    "F32": (12, 4, True),
    "I64": (13, 8, False),
    "U64": (14, 8, False),
    "F64": (15, 8, True),
}

# (exponent mask, mantissa mask) of each float dtype, as integers over the element
NAN_MASKS = {
    "F16": (0x7C00, 0x03FF),
    "BF16": (0x7F80, 0x007F),
    "F32": (0x7F800000, 0x007FFFFF),
    "F64": (0x7FF0000000000000, 0x000FFFFFFFFFFFFF),
    "F8_E5M2": (0x7C, 0x03),
    # F8_E4M3 has a single NaN per sign (S.1111.111): no payload to change
}


def die(msg):
    sys.stderr.write("mkckpt.py: %s\n" % msg)
    sys.exit(2)


def nelem(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def rand_bytes(rng, n, dtype):
    if dtype == "BOOL":
        return bytearray(rng.getrandbits(1) for _ in range(n))
    return bytearray(rng.randbytes(n)) if n else bytearray()


def mutate(rng, data, dtype, rate):
    """Change round(rate * n) elements of data (bytearray) in place, at least one if
    rate > 0 and n > 0. Returns the modified base (which may differ from the input
    for the +0 -> -0 case) and the target, as (base, target) bytearrays."""
    code, E, is_float = DTYPES[dtype]
    n = len(data) // E
    base = bytearray(data)
    if n == 0 or rate <= 0:
        return base, bytearray(base)
    k = int(round(rate * n))
    if k == 0:
        k = 1
    k = min(k, n)
    positions = range(n) if k == n else rng.sample(range(n), k)
    target = bytearray(base)
    for p in positions:
        o = p * E
        old = int.from_bytes(base[o:o + E], "little")
        if dtype == "BOOL":
            new = old ^ 1
        elif is_float:
            r = rng.random()
            nbits = 8 * E
            if r < 0.80:
                new = old ^ (1 << rng.randrange(min(3, nbits - 1)))
            elif r < 0.90:
                new = old ^ (1 << (nbits - 1))
            elif r < 0.95 and dtype in NAN_MASKS:
                emask, mmask = NAN_MASKS[dtype]
                sign = old & (1 << (nbits - 1))
                new = old
                while new == old:
                    m = rng.getrandbits(mmask.bit_length()) & mmask
                    if m == 0:
                        m = 1
                    new = sign | emask | m
            else:
                # +0 -> -0: make the base element +0, the target -0
                old = 0
                base[o:o + E] = bytes(E)
                new = 1 << (nbits - 1)
        else:
            if rng.random() < 0.9:
                new = old ^ (1 << rng.randrange(4 if E > 1 else 3))
            else:
                new = old ^ (1 << rng.randrange(8 * E))
        assert new != old
        target[o:o + E] = new.to_bytes(E, "little")
    return base, target


def header_bytes(tensors, metadata, style, pad):
    """tensors: list of (name, dtype, shape, begin, end) in data order."""
    h = {}
    if metadata is not None:
        h["__metadata__"] = metadata
    for name, dtype, shape, b, e in tensors:
        h[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [b, e]}
    if style == "spaced":
        text = json.dumps(h, ensure_ascii=False)
    else:
        text = json.dumps(h, ensure_ascii=False, separators=(",", ":"))
    raw = text.encode("utf-8")
    if pad is True:
        raw += b" " * ((-len(raw)) % 8)
    elif pad is not False and pad is not None:
        raw += b" " * int(pad)
    return raw


def write_safetensors(path, items, metadata=None, style="compact", pad=True):
    """items: list of (name, dtype, shape, bytes) in data order."""
    off = 0
    layout = []
    for name, dtype, shape, data in items:
        assert len(data) == nelem(shape) * DTYPES[dtype][1], name
        layout.append((name, dtype, shape, off, off + len(data)))
        off += len(data)
    hdr = header_bytes(layout, metadata, style, pad)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for item in items:
            f.write(item[3])


def order(items, how):
    if how in (None, "list"):
        return items
    if how == "reverse":
        return list(reversed(items))
    if how == "name":
        return sorted(items, key=lambda t: t[0].encode("utf-8"))
    die("unknown order %r" % how)


def load_spec(arg):
    if arg.lstrip().startswith("{"):
        return json.loads(arg)
    with open(arg, "r", encoding="utf-8") as f:
        return json.load(f)


def mode_pair(spec_arg, base_out, target_out, seed=None):
    spec = load_spec(spec_arg)
    if seed is None:
        seed = spec.get("seed", 1)
    base_items, target_items = [], []
    for t in spec.get("tensors", []):
        name = t["name"]
        dtype = t.get("dtype", "F32")
        if dtype not in DTYPES:
            die("unknown dtype %r" % dtype)
        shape = t.get("shape", [16])
        fill = t.get("fill", "random")
        if fill not in ("random", "zeros", "same-as-base", "mutate"):
            die("unknown fill %r" % fill)
        default_rate = 0.01 if fill in ("random", "mutate") else 0.0
        rate = 0.0 if fill == "same-as-base" else float(t.get("rate", default_rate))
        only = t.get("only")
        tdtype = t.get("target_dtype", dtype)
        if tdtype not in DTYPES:
            die("unknown dtype %r" % tdtype)
        tshape = t.get("target_shape", shape)
        rng = random.Random("%s/%s" % (seed, name))
        blen = nelem(shape) * DTYPES[dtype][1]
        tlen = nelem(tshape) * DTYPES[tdtype][1]
        if only == "target":
            if "target_fill" in t or fill != "zeros":
                tfill = t.get("target_fill", "random")
                tdata = bytes(tlen) if tfill == "zeros" else rand_bytes(rng, tlen, tdtype)
            else:
                _, tdata = mutate(rng, bytes(tlen), tdtype, rate)
            target_items.append((name, tdtype, tshape, bytes(tdata)))
            continue
        bdata = bytes(blen) if fill == "zeros" else rand_bytes(rng, blen, dtype)
        if only == "base":
            base_items.append((name, dtype, shape, bytes(bdata)))
            continue
        if only is not None:
            die("unknown only %r" % only)
        if "target_fill" in t:
            tfill = t["target_fill"]
            tdata = bytes(tlen) if tfill == "zeros" else rand_bytes(rng, tlen, tdtype)
        elif tlen == blen:
            # same byte length (reshape, or recode to a dtype of the same total
            # size): mutate element-wise as the target dtype
            bdata, tdata = mutate(rng, bdata, tdtype, rate)
        else:
            tdata = rand_bytes(rng, tlen, tdtype)
        base_items.append((name, dtype, shape, bytes(bdata)))
        target_items.append((name, tdtype, tshape, bytes(tdata)))
    meta_both = spec.get("metadata")
    style = spec.get("json_style", "compact")
    pad = spec.get("pad", True)
    for side, items, out in (("base", base_items, base_out),
                             ("target", target_items, target_out)):
        write_safetensors(out, order(items, spec.get(side + "_order")),
                          spec.get(side + "_metadata", meta_both),
                          spec.get(side + "_json_style", style),
                          spec.get(side + "_pad", pad))


def mode_raw(size, rate, seed, base_out, target_out):
    size = int(size)
    rate = float(rate)
    rng = random.Random("raw/%s" % seed)
    base = rand_bytes(rng, size, "U8")
    base, target = mutate(rng, base, "U8", rate)
    with open(base_out, "wb") as f:
        f.write(base)
    with open(target_out, "wb") as f:
        f.write(target)


# Malformed safetensors files: kind -> (description, expected code)
BAD_KINDS = {
    "short": ("fewer than 8 bytes", "DCR_E_CHECKPOINT"),
    "cut-header": ("file ends inside the JSON header", "DCR_E_CHECKPOINT"),
    "cut-data": ("file ends inside the data region", "DCR_E_LAYOUT"),
    "gap": ("a gap between two tensors' data_offsets", "DCR_E_LAYOUT"),
    "overlap": ("two tensors overlap", "DCR_E_LAYOUT"),
    "not-from-zero": ("the first tensor does not begin at 0", "DCR_E_LAYOUT"),
    "trailing": ("bytes after the last tensor", "DCR_E_LAYOUT"),
    "not-json": ("the header is not JSON", "DCR_E_CHECKPOINT"),
    "not-object": ("the header is a JSON array", "DCR_E_CHECKPOINT"),
    "extra-key": ("a tensor has an extra key", "DCR_E_CHECKPOINT"),
    "missing-key": ("a tensor has no shape", "DCR_E_CHECKPOINT"),
    "bad-dtype": ("an unknown dtype name", "DCR_E_DTYPE"),
    "bad-shape": ("shape x size differs from end - begin", "DCR_E_SHAPE"),
    "negative-dim": ("a negative dimension", "DCR_E_CHECKPOINT"),
    "begin-after-end": ("data_offsets with begin > end", "DCR_E_CHECKPOINT"),
    "meta-not-string": ("__metadata__ with a non-string value", "DCR_E_CHECKPOINT"),
    "duplicate": ("a duplicated tensor name", "DCR_E_NAME"),
    "empty-name": ("an empty tensor name", "DCR_E_NAME"),
    "bad-utf8": ("a header that is not valid UTF-8", "DCR_E_CHECKPOINT"),
    "nul-name": ("a tensor name containing U+0000", "DCR_E_NAME"),
    "dup-inner-key": ("a key repeated inside a tensor object", "DCR_E_CHECKPOINT"),
    "float-number": ("a dimension written as 16.0", "DCR_E_CHECKPOINT"),
    "huge-number": ("a data offset of 2^63", "DCR_E_CHECKPOINT"),
    "shape-overflow": ("a shape whose byte size overflows 64 bits", "DCR_E_SHAPE"),
    "zero-dim-overflow": ("shape [0, 2^62, 8]: zero bytes, but overflowing", "DCR_E_SHAPE"),
}


def mode_bad(kind, out):
    if kind == "all":
        # every kind, as OUT/KIND.safetensors; prints "KIND CODE" lines
        for k in BAD_KINDS:
            sys.stdout.write("%s " % k)
            mode_bad(k, os.path.join(out, k + ".safetensors"))
        return
    if kind not in BAD_KINDS:
        die("unknown bad kind %r (known: %s)" % (kind, ", ".join(sorted(BAD_KINDS))))
    a = bytes(range(64))            # "a": F32 [16] = 64 bytes
    b = bytes(range(100, 132))      # "b": U8 [32] = 32 bytes

    def ent(dtype, shape, b0, e0):
        return '{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}' % (
            dtype, json.dumps(shape), b0, e0)

    def build(header_text, data, pad=True):
        raw = header_text if isinstance(header_text, bytes) else header_text.encode()
        if pad:
            raw += b" " * ((-len(raw)) % 8)
        return struct.pack("<Q", len(raw)) + raw + data

    good_hdr = '{"a":%s,"b":%s}' % (ent("F32", [16], 0, 64), ent("U8", [32], 64, 96))
    good = build(good_hdr, a + b)
    if kind == "short":
        blob = good[:5]
    elif kind == "cut-header":
        blob = good[:8 + 10]
    elif kind == "cut-data":
        blob = good[:-7]
    elif kind == "gap":
        h = '{"a":%s,"b":%s}' % (ent("F32", [16], 0, 64), ent("U8", [32], 72, 104))
        blob = build(h, a + bytes(8) + b)
    elif kind == "overlap":
        h = '{"a":%s,"b":%s}' % (ent("F32", [16], 0, 64), ent("U8", [32], 60, 92))
        blob = build(h, a + b[:28])
    elif kind == "not-from-zero":
        h = '{"a":%s,"b":%s}' % (ent("F32", [16], 8, 72), ent("U8", [32], 72, 104))
        blob = build(h, bytes(8) + a + b)
    elif kind == "trailing":
        blob = good + b"\0" * 8
    elif kind == "not-json":
        blob = build('{"a":' + ent("F32", [16], 0, 64) + ',', a)
    elif kind == "not-object":
        blob = build('[1,2,3]', b"")
    elif kind == "extra-key":
        h = '{"a":{"dtype":"F32","shape":[16],"data_offsets":[0,64],"x":1}}'
        blob = build(h, a)
    elif kind == "missing-key":
        h = '{"a":{"dtype":"F32","data_offsets":[0,64]}}'
        blob = build(h, a)
    elif kind == "bad-dtype":
        h = '{"a":%s}' % ent("F31", [16], 0, 64)
        blob = build(h, a)
    elif kind == "bad-shape":
        h = '{"a":%s}' % ent("F32", [15], 0, 64)
        blob = build(h, a)
    elif kind == "negative-dim":
        h = '{"a":%s}' % ent("F32", [-16], 0, 64)
        blob = build(h, a)
    elif kind == "begin-after-end":
        h = '{"a":{"dtype":"U8","shape":[0],"data_offsets":[64,0]},"b":%s}' % ent(
            "F32", [16], 0, 64)
        blob = build(h, a)
    elif kind == "meta-not-string":
        h = '{"__metadata__":{"k":1},"a":%s}' % ent("F32", [16], 0, 64)
        blob = build(h, a)
    elif kind == "duplicate":
        h = '{"a":%s,"a":%s}' % (ent("F32", [16], 0, 64), ent("U8", [32], 64, 96))
        blob = build(h, a + b)
    elif kind == "empty-name":
        h = '{"":%s}' % ent("F32", [16], 0, 64)
        blob = build(h, a)
    elif kind == "bad-utf8":
        h = b'{"__metadata__":{"k":"v\xff"},"a":' + ent("F32", [16], 0, 64).encode() + b'}'
        blob = build(h, a)
    elif kind == "nul-name":
        h = '{"a\\u0000b":%s}' % ent("F32", [16], 0, 64)
        blob = build(h, a)
    elif kind == "dup-inner-key":
        h = '{"a":{"dtype":"F32","shape":[16],"shape":[16],"data_offsets":[0,64]}}'
        blob = build(h, a)
    elif kind == "float-number":
        h = '{"a":{"dtype":"F32","shape":[16.0],"data_offsets":[0,64]}}'
        blob = build(h, a)
    elif kind == "huge-number":
        h = '{"a":%s,"e":%s}' % (ent("F32", [16], 0, 64), ent("U8", [0], 2 ** 63, 2 ** 63))
        blob = build(h, a)
    elif kind == "shape-overflow":
        h = '{"a":%s}' % ent("F32", [2 ** 62, 8], 0, 64)
        blob = build(h, a)
    elif kind == "zero-dim-overflow":
        h = '{"a":%s,"e":%s}' % (ent("F32", [16], 0, 64), ent("F32", [0, 2 ** 62, 8], 64, 64))
        blob = build(h, a)
    with open(out, "wb") as f:
        f.write(blob)
    print(BAD_KINDS[kind][1])


def is_num(v):
    return isinstance(v, int) and not isinstance(v, bool)


def parse(path):
    """Strict safetensors parse (SPEC.md 2.1); raises ValueError(code, msg)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("DCR_E_CHECKPOINT", "shorter than 8 bytes")
    (n,) = struct.unpack_from("<Q", blob, 0)
    if 8 + n > len(blob):
        raise ValueError("DCR_E_CHECKPOINT", "header runs past the end")

    class Obj(dict):
        dup = False

    def no_dups(pairs):
        o = Obj(pairs)
        o.dup = len(o) != len(pairs)
        return o

    try:
        h = json.loads(blob[8:8 + n].decode("utf-8"), object_pairs_hook=no_dups)
    except UnicodeDecodeError as e:
        raise ValueError("DCR_E_CHECKPOINT", str(e))
    except json.JSONDecodeError as e:
        raise ValueError("DCR_E_CHECKPOINT", str(e))
    if not isinstance(h, dict):
        raise ValueError("DCR_E_CHECKPOINT", "header is not an object")

    def check_inner(v):  # duplicate keys and numbers below the top level
        if isinstance(v, dict):
            if v.dup:
                raise ValueError("DCR_E_CHECKPOINT", "duplicate key in a tensor object")
            for x in v.values():
                check_inner(x)
        elif isinstance(v, list):
            for x in v:
                check_inner(x)
        elif isinstance(v, float) or (is_num(v) and not 0 <= v < 2 ** 63):
            raise ValueError("DCR_E_CHECKPOINT", "number %r not an integer in 0..2^63-1" % v)

    for v in h.values():
        check_inner(v)
    if h.dup:
        raise ValueError("DCR_E_NAME", "duplicate tensor name")
    meta = h.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and
                                 all(isinstance(v, str) for v in meta.values())):
        raise ValueError("DCR_E_CHECKPOINT", "bad __metadata__")
    tensors = []
    for name, v in h.items():
        if not isinstance(v, dict) or set(v) != {"dtype", "shape", "data_offsets"}:
            raise ValueError("DCR_E_CHECKPOINT", "bad tensor entry %r" % name)
        if not name or "\0" in name:
            raise ValueError("DCR_E_NAME", "empty name or name with U+0000")
        dt, shape, offs = v["dtype"], v["shape"], v["data_offsets"]
        if dt not in DTYPES:
            raise ValueError("DCR_E_DTYPE", "dtype %r" % dt)
        if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ValueError("DCR_E_CHECKPOINT", "bad shape")
        if not (isinstance(offs, list) and len(offs) == 2 and
                all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                    for x in offs) and offs[0] <= offs[1]):
            raise ValueError("DCR_E_CHECKPOINT", "bad data_offsets")
        nonzero = DTYPES[dt][1]
        for dim in shape:
            nonzero *= dim or 1
        if nonzero >= 2 ** 64 or nelem(shape) * DTYPES[dt][1] != offs[1] - offs[0]:
            raise ValueError("DCR_E_SHAPE", "shape of %r" % name)
        tensors.append({"name": name, "dtype": dt, "shape": shape,
                        "begin": offs[0], "end": offs[1]})
    pos = 0
    for t in sorted(tensors, key=lambda t: (t["begin"], t["end"])):
        if t["begin"] != pos:
            raise ValueError("DCR_E_LAYOUT", "not contiguous at %r" % t["name"])
        pos = t["end"]
    if pos != len(blob) - 8 - n:
        raise ValueError("DCR_E_LAYOUT", "data region is %d bytes, tensors end at %d"
                         % (len(blob) - 8 - n, pos))
    tensors.sort(key=lambda t: t["name"].encode("utf-8"))
    for t in tensors:
        t["data"] = blob[8 + n + t["begin"]:8 + n + t["end"]]
    return {"prefix_length": 8 + n, "data_length": len(blob) - 8 - n,
            "metadata": meta, "tensors": tensors}


def xxh128(data):
    p = subprocess.run(["xxh128sum", "-"], input=data, stdout=subprocess.PIPE,
                       check=True)
    return p.stdout.split()[0].decode()


PIECE = 4096


def xxh128_files(paths):
    """XXH3-128 hex of each file, in order, with one xxh128sum run."""
    hashes = []
    for i in range(0, len(paths), 1000):
        p = subprocess.run(["xxh128sum", "--"] + paths[i:i + 1000], stdout=subprocess.PIPE,
                           check=True)
        hashes += [line.split()[0].decode() for line in p.stdout.splitlines()]
    return hashes


def tensor_hash(data):
    """SPEC.md 7: XXH3-128 of the digests of the 4096-byte pieces of data."""
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i in range(0, len(data), PIECE):
            paths.append(os.path.join(d, "%08d" % len(paths)))
            with open(paths[-1], "wb") as f:
                f.write(data[i:i + PIECE])
        pieces = b"".join(bytes.fromhex(h) for h in xxh128_files(paths)) if paths else b""
    return xxh128(pieces)


def state_id(tensors):
    """Sets t["hash"] (the tensor hash, hex) on each tensor of a parse() result's
    list (sorted by name) and returns the state id (SPEC.md 7) as hex."""
    ser = bytearray()
    for t in tensors:
        t["hash"] = tensor_hash(t["data"])
        nb = t["name"].encode("utf-8")
        ser += struct.pack("<H", len(nb)) + nb
        ser += struct.pack("<BB", DTYPES[t["dtype"]][0], len(t["shape"]))
        for dim in t["shape"]:
            ser += struct.pack("<Q", dim)
        ser += struct.pack("<Q", t["end"] - t["begin"]) + bytes.fromhex(t["hash"])
    return xxh128(bytes(ser))


def mode_info(path, want_hash):
    try:
        c = parse(path)
    except ValueError as e:
        print(json.dumps({"error": e.args[0], "message": e.args[1]}))
        sys.exit(1)
    out = {"prefix_length": c["prefix_length"], "data_length": c["data_length"],
           "metadata": c["metadata"], "tensors": []}
    if want_hash:
        out["state"] = state_id(c["tensors"])
    for t in c["tensors"]:
        d = {"name": t["name"], "dtype": t["dtype"], "shape": t["shape"],
             "byte_length": t["end"] - t["begin"], "offset": t["begin"]}
        if want_hash:
            d["hash"] = t["hash"]
        out["tensors"].append(d)
    print(json.dumps(out))


def count_changed(a, b, E):
    """Number of E-byte elements that differ between a and b (equal lengths)."""
    n = len(a)
    if n == 0:
        return 0
    x = (int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).to_bytes(n, "little")
    arr = array.array({1: "B", 2: "H", 4: "I", 8: "Q"}[E])
    assert arr.itemsize == E
    arr.frombytes(x)
    return len(arr) - arr.count(0)


def mode_diff(base, target, chunk_size):
    print(json.dumps(diff(parse(base)["tensors"], parse(target)["tensors"], chunk_size)))


def diff(base_tensors, target_tensors, chunk_size):
    """What a bundle must carry, from two parse() tensor lists."""
    b = {t["name"]: t for t in base_tensors}
    t = {x["name"]: x for x in target_tensors}
    res = {"tensors": {}, "totals": {"changed_elements": 0, "changed_chunks": 0}}
    for name in sorted(set(b) | set(t), key=lambda s: s.encode("utf-8")):
        bt, tt = b.get(name), t.get(name)
        if tt is None:
            r = {"status": "removed", "changed_elements": 0, "changed_chunks": 0}
        else:
            E = DTYPES[tt["dtype"]][1]
            tdata = tt["data"]
            delta = (bt is not None and bt["dtype"] == tt["dtype"] and
                     len(bt["data"]) == len(tdata))
            # the reference writer's resized tensors (SPEC.md 6.5): the same dtype
            # and rank, other bytes, a shape that differs in its first dimension
            # only; coded against the base's common prefix, then zeros
            resized = (bt is not None and not delta and bt["dtype"] == tt["dtype"] and
                       len(bt["shape"]) == len(tt["shape"]) >= 1 and
                       bt["shape"][1:] == tt["shape"][1:] and bt["data"] and tdata)
            if delta:
                bdata = bt["data"]
            elif resized:
                common = bt["data"][:len(tdata)]
                bdata = common + bytes(len(tdata) - len(common))
            else:
                bdata = bytes(len(tdata))
            elems = count_changed(bdata, tdata, E)
            chunks = sum(1 for i in range(0, len(tdata), chunk_size)
                         if bdata[i:i + chunk_size] != tdata[i:i + chunk_size])
            if bt is None:
                status = "added"
            elif resized:
                status = "resized"
            elif not delta:
                status = "recoded"
            else:
                status = "changed" if elems else "unchanged"
            r = {"status": status, "changed_elements": elems, "changed_chunks": chunks}
        res["tensors"][name] = r
        res["totals"]["changed_elements"] += r["changed_elements"]
        res["totals"]["changed_chunks"] += r["changed_chunks"]
    return res


def mode_flip(path, offset, bit):
    offset, bit = int(offset), int(bit)
    with open(path, "r+b") as f:
        f.seek(offset)
        c = f.read(1)
        if len(c) != 1:
            die("offset %d is past the end of %s" % (offset, path))
        f.seek(offset)
        f.write(bytes([c[0] ^ (1 << bit)]))


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        sys.stdout.write(__doc__)
        return 0 if len(argv) >= 2 else 2
    mode, args = argv[1], argv[2:]
    if mode == "pair" and len(args) in (3, 5):
        seed = None
        if len(args) == 5:
            if args[3] != "--seed":
                die("usage: pair SPEC BASE_OUT TARGET_OUT [--seed S]")
            seed = args[4]
        mode_pair(args[0], args[1], args[2], seed)
    elif mode == "raw" and len(args) == 5:
        mode_raw(*args)
    elif mode == "bad" and len(args) == 2:
        mode_bad(*args)
    elif mode == "info" and len(args) in (1, 2):
        mode_info(args[0], len(args) == 2 and args[1] == "--hash")
    elif mode == "diff" and len(args) in (2, 4):
        cs = 4 << 20
        if len(args) == 4:
            if args[2] != "--chunk-size":
                die("usage: diff BASE TARGET [--chunk-size N]")
            cs = int(args[3])
        mode_diff(args[0], args[1], cs)
    elif mode == "flip" and len(args) in (2, 3):
        mode_flip(args[0], args[1], args[2] if len(args) == 3 else 0)
    else:
        die("bad arguments; see mkckpt.py --help")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

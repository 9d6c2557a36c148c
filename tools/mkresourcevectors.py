#!/usr/bin/env python3
"""mkresourcevectors.py OUT_DIR - writes OUT_DIR/resource-v1/: small files that would
cost a naive reader gigabytes of memory or minutes (SPEC.md §11, §14), each with the
outcome a reader must give at a stated memory budget and the peak resident memory
and time it must give it within. Bundles, safetensors checkpoints, history archives
(§19) and apply journals (§18).

Written from SPEC.md alone: Python's struct, json and hashlib, libxxhash by
ctypes (XXH3, as tools/mkrangevectors.py), and zstd frames built here block by block
(raw, RLE, and compressed blocks of one repeat match, RFC 8878), so that the bytes
depend on no zstd version: nothing of libdcr or libzstd. Large runs are never held:
a frame of 3 GiB of zeros is 96 KB of RLE block headers, and the hashes of uniform
data are computed from one piece's digest.
"""
import ctypes
import ctypes.util
import hashlib
import json
import os
import re
import struct
import sys

KIB, MIB, GIB, TIB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
BUDGET = 256 * MIB           # the memory budget every vector is run at (--memory 256M)
RSS_BOUND = 512              # MiB of peak resident memory: the budget + 256 MiB
SECONDS = 15                 # and wall-clock seconds

# ---- XXH3 (SPEC.md §1), from libxxhash


class XXH128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


xxh = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
xxh.XXH3_128bits.restype = XXH128
xxh.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
xxh.XXH3_createState.restype = ctypes.c_void_p
xxh.XXH3_freeState.argtypes = [ctypes.c_void_p]
for _w in ("64", "128"):
    getattr(xxh, "XXH3_%sbits_reset" % _w).argtypes = [ctypes.c_void_p]
    getattr(xxh, "XXH3_%sbits_update" % _w).argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    getattr(xxh, "XXH3_%sbits_digest" % _w).argtypes = [ctypes.c_void_p]
xxh.XXH3_64bits_digest.restype = ctypes.c_uint64
xxh.XXH3_128bits_digest.restype = XXH128


def canonical(h):
    return struct.pack(">QQ", h.high64, h.low64)


def xxh64(b):
    return xxh.XXH3_64bits(bytes(b), len(b))


def xxh128(b):
    return canonical(xxh.XXH3_128bits(bytes(b), len(b)))


def xxh_runs(width, parts):
    """XXH3-64 (an int) or XXH3-128 (canonical bytes) of `parts`, each bytes or (unit,
    times): unit repeated, fed a MiB at a time, so that gigabytes are hashed without
    being held."""
    st = xxh.XXH3_createState()
    getattr(xxh, "XXH3_%dbits_reset" % width)(st)
    update = getattr(xxh, "XXH3_%dbits_update" % width)
    for p in parts:
        unit, times = (p, 1) if isinstance(p, bytes) else p
        block = unit * max(1, MIB // len(unit))
        per = len(block) // len(unit)
        while times:
            k = min(times, per)
            update(st, block, k * len(unit))
            times -= k
    h = getattr(xxh, "XXH3_%dbits_digest" % width)(st)
    xxh.XXH3_freeState(st)
    return h if width == 64 else canonical(h)


def xxh_repeat(width, unit, times):
    return xxh_runs(width, [(unit, times)])


PIECE = 4096


def piece_list(data):
    return b"".join(xxh128(data[i:i + PIECE]) for i in range(0, len(data), PIECE))


def tensor_hash(data):
    """§7: XXH3-128 of the piece list."""
    return xxh128(piece_list(data))


def uniform_hash(fill, length, width=128):
    """The tensor hash (or, width 64, the chunk check of §8.2) of `length` bytes of
    `fill`, a multiple of the piece size: every piece has one digest."""
    assert length % PIECE == 0
    return xxh_repeat(width, xxh128(bytes([fill]) * PIECE), length // PIECE)


# ---- zstd frames by hand (RFC 8878)

BLOCK = 128 * KIB
# Match_Length_Code 32..52: (baseline, extra bits), RFC 8878 §3.1.1.3.2.1.1
ML_CODES = [(35, 1), (37, 1), (39, 1), (41, 1), (43, 2), (47, 2), (51, 3), (59, 3), (67, 4),
            (83, 4), (99, 5), (131, 7), (259, 8), (515, 9), (1027, 10), (2051, 11), (4099, 12),
            (8195, 13), (16387, 14), (32771, 15), (65539, 16)]


def block_header(kind, size):
    """Not the last block: frame() marks the last one."""
    return struct.pack("<I", kind << 1 | size << 3)[:3]


def match_block(offset, length):
    """A compressed block (type 2) of no literals and one sequence copying `length`
    bytes from `offset` back: raw literals of size 0; one sequence; every symbol table
    in RLE mode (Accuracy_Log 0, so no state bits); then the sequence's extra bits,
    written in the reverse of their reading order (offset, match length, literal
    length) and closed by the 1 bit that marks the stream's start."""
    value = offset + 3  # Offset_Value above 3: a plain offset, no repeat code
    of_code = value.bit_length() - 1
    if length < 35:
        ml_code, ml_extra, ml_bits = length - 3, 0, 0
    else:
        i = max(i for i, (base, _) in enumerate(ML_CODES) if base <= length)
        ml_code, ml_extra, ml_bits = 32 + i, length - ML_CODES[i][0], ML_CODES[i][1]
    bits = ml_extra | (value - (1 << of_code)) << ml_bits | 1 << (ml_bits + of_code)
    body = bytes([0x00, 1, 0x54, 0, of_code, ml_code]) + bits.to_bytes((ml_bits + of_code + 8) // 8, "little")
    return block_header(2, len(body)) + body


def part_size(p):
    if isinstance(p, (bytes, bytearray)):
        return len(p)
    return p[2] if p[0] == "run" else len(p[1]) * p[2]


def frame(parts, content_size=True):
    """One zstd frame whose content is `parts` in order: bytes (raw blocks), ("run",
    BYTE, N) (RLE blocks: 4 bytes per 128 KiB) or ("repeat", PATTERN, COUNT) (the
    pattern once, then blocks of one match: 12 bytes per 128 KiB). With content_size,
    the frame declares its size (SPEC.md §4.4 steps 2 and 4: single segment below 128
    KiB, else a 128 KiB window); without, a 128 KiB window and no size, as a stream
    compressor writes (a .tar.zst)."""
    total = sum(map(part_size, parts))
    blocks = []

    def raw(b):
        for i in range(0, len(b), BLOCK):
            blocks.append(block_header(0, len(b[i:i + BLOCK])) + b[i:i + BLOCK])

    for p in parts:
        if isinstance(p, (bytes, bytearray)):
            raw(bytes(p))
        elif p[0] == "run":
            n = p[2]
            while n:
                k = min(n, BLOCK)
                blocks.append(block_header(1, k) + bytes([p[1]]))
                n -= k
        elif p[2]:
            pattern = p[1]
            raw(pattern)
            left, at = len(pattern) * (p[2] - 1), 0
            while left:
                take = min(left, BLOCK)
                if 0 < left - take < 3:  # a match copies at least 3 bytes
                    take -= 3
                if take < 3:
                    raw(bytes(pattern[(at + i) % len(pattern)] for i in range(take)))
                else:
                    blocks.append(match_block(len(pattern), take))
                at, left = at + take, left - take
    if not blocks:
        blocks.append(block_header(0, 0))
    last = blocks[-1]
    blocks[-1] = bytes([last[0] | 1]) + last[1:]
    if not content_size:
        head = struct.pack("<IBB", 0xFD2FB528, 0, 7 << 3)
    elif total < BLOCK:
        head = struct.pack("<IBQ", 0xFD2FB528, 3 << 6 | 1 << 5, total)
    else:
        head = struct.pack("<IBBQ", 0xFD2FB528, 3 << 6, 7 << 3, total)
    return head + b"".join(blocks)


def frame_head(size):
    """Only a frame header declaring `size` bytes (a 128 KiB window): a frame no
    reader should look at, or one a reader must refuse from its header."""
    return struct.pack("<IBBQ", 0xFD2FB528, 3 << 6, 7 << 3, size)


# ---- bundles (SPEC.md §4 to §8)

MAGIC = b"\x89DCR\r\n\x1a\n"
U8 = 2
KIND_RAW, KIND_SAFETENSORS = 0, 1
ENC_XOR_DENSE, ENC_XOR_SPARSE = 1, 2
EMPTY_HASH = xxh128(b"")


def section(kind, payload, critical=True, compression=0):
    head = kind + struct.pack("<HBBQQ", int(critical), compression, 0, len(payload), xxh64(payload))
    head += struct.pack("<Q", xxh64(head))
    return head + payload + bytes(-(32 + len(payload)) % 64)


def descriptor(d, target):
    dtype, dims, length = d[:3]
    b = struct.pack("<BB", dtype, len(dims)) + struct.pack("<%dQ" % len(dims), *dims) + struct.pack("<Q", length)
    return b + (struct.pack("<Q", d[3]) if target else b"")


def manifest(kind, chunk_size, entries=(), prefix=b"", data_length=0):
    """§6.1. entries: (name, base descriptor or None, target descriptor or None), a
    descriptor being (dtype, dims, byte_length[, offset])."""
    m = struct.pack("<IIB7xQQ", len(entries), chunk_size, kind, len(prefix), data_length) + prefix
    for name, base, target in entries:
        m += struct.pack("<H", len(name)) + name + bytes([bool(base) | bool(target) << 1, 0])
        m += (descriptor(base, False) if base else b"") + (descriptor(target, True) if target else b"")
    return m


def state_id(tensors):
    """§7: tensors are (name, dtype, dims, byte_length, hash)."""
    s = b""
    for name, dtype, dims, length, h in sorted(tensors):
        s += struct.pack("<H", len(name)) + name + struct.pack("<BB", dtype, len(dims))
        s += struct.pack("<%dQ" % len(dims), *dims) + struct.pack("<Q", length) + h
    return xxh128(s)


def identities(entries, hashes):
    """IDEN for entries (as for manifest()) with hashes: (base hash, target hash)."""
    base = [(n, b[0], b[1], b[2], h[0]) for (n, b, _), h in zip(entries, hashes) if b]
    target = [(n, t[0], t[1], t[2], h[1]) for (n, _, t), h in zip(entries, hashes) if t]
    iden = state_id(base) + state_id(target)
    for (_, b, t), (hb, ht) in zip(entries, hashes):
        iden += (hb if b else b"") + (ht if t else b"")
    return iden


def bundle(mani, iden, chunks=(), ancillary=(), mani_compressed=False):
    """A bundle: MANI (its payload as given: a frame when mani_compressed), the
    ancillary sections (already written), CHNK sections (record fields, data), IDEN,
    INDX and FOOT. A chunk is (tensor, chunk, encoding, compression, count,
    base_check, target_check, data)."""
    head = MAGIC + struct.pack("<HHI40x", 1, 0, 0)
    out = bytearray(head + struct.pack("<Q", xxh64(head)))
    out += section(b"MANI", mani, compression=int(mani_compressed))
    for a in ancillary:
        out += a
    index = b""
    for t, c, enc, comp, count, bcheck, tcheck, data in chunks:
        rec = struct.pack("<IIBBHIQQ", t, c, enc, comp, 0, count, bcheck, tcheck)
        index += struct.pack("<QIIBBHIQ", len(out), t, c, enc, comp, 0, count, len(rec) + len(data))
        out += section(b"CHNK", rec + data)
    iden_at = len(out)
    out += section(b"IDEN", iden)
    indx_at = len(out)
    out += section(b"INDX", index)
    out += section(b"FOOT", struct.pack("<QQQQ", 64, iden_at, indx_at, len(chunks)))
    return bytes(out)


def st_prefix(header):
    """A safetensors prefix: the 8-byte length, then the header padded with spaces
    to a multiple of 8, as safetensors writers pad it."""
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header


EMPTY_ST = st_prefix(b"{}")  # a safetensors file of no tensors


def json_bundle(header):
    """A bundle of two safetensors checkpoints with no tensors whose target prefix (the
    manifest's, §6.1) is the 8-byte length, then the header (frame parts): compressed,
    so that a header of 100 MB is a few KB here."""
    n = sum(map(part_size, header))
    mani = frame([struct.pack("<IIB7xQQ", 0, 4096, KIND_SAFETENSORS, 8 + n, 0), struct.pack("<Q", n)] + header)
    return bundle(mani, identities([], []), mani_compressed=True)


def empty_bundle(ancillary=()):
    """The bundle from a safetensors file of no tensors to itself (EMPTY_ST)."""
    return bundle(manifest(KIND_SAFETENSORS, 4096, prefix=EMPTY_ST), identities([], []), ancillary=ancillary)


def raw_entries(base_length, target_length):
    return [(b"raw", (U8, [base_length], base_length), (U8, [target_length], target_length, 0))]


def one_chunk(encoding, log2):
    """A raw pair of 2^log2 bytes, zeros to bytes 0x01, in one chunk coded `encoding`
    (every element changed), each stream one frame of RLE blocks."""
    n = 1 << log2
    entries = raw_entries(n, n)
    data = frame([("run", 1, n)])
    if encoding == ENC_XOR_SPARSE:  # Rice k = 0 and every gap 0: one 0 bit each
        data = frame([("run", 0, 1 + n // 8)]) + data
    chunk = (0, 0, encoding, 1, n, uniform_hash(0, n, 64), uniform_hash(1, n, 64), data)
    iden = identities(entries, [(uniform_hash(0, n), uniform_hash(1, n))])
    return bundle(manifest(KIND_RAW, n, entries, data_length=n), iden, [chunk])


def small_raw_chunk(encoding, count, data):
    """A raw pair of one 4096-byte chunk, zeros to byte 0 = 0x01, whose chunk is
    coded `encoding` (an XOR), zstd-compressed, with `count` and `data` as given."""
    entries = raw_entries(PIECE, PIECE)
    target = b"\x01" + bytes(PIECE - 1)
    chunk = (0, 0, encoding, 1, count, xxh64(xxh128(bytes(PIECE))), xxh64(xxh128(target)), data)
    iden = identities(entries, [(tensor_hash(bytes(PIECE)), tensor_hash(target))])
    return bundle(manifest(KIND_RAW, PIECE, entries, data_length=PIECE), iden, [chunk])


def many_chunks(count):
    """A raw pair of `count` chunks of 4096 bytes, zeros to the first byte of each
    chunk 0x01: one CHNK section each (XOR_SPARSE, stored: Rice k 0, one gap 0, the
    value 0x01)."""
    n = count * PIECE
    entries = raw_entries(n, n)
    target_piece = b"\x01" + bytes(PIECE - 1)
    zero_check, one_check = xxh64(xxh128(bytes(PIECE))), xxh64(xxh128(target_piece))
    chunks = [(0, c, ENC_XOR_SPARSE, 0, 1, zero_check, one_check, b"\x00\x00\x01") for c in range(count)]
    iden = identities(entries, [(uniform_hash(0, n), xxh_repeat(128, xxh128(target_piece), count))])
    return bundle(manifest(KIND_RAW, PIECE, entries, data_length=n), iden, chunks)


def terabyte_target():
    """A raw file of no bytes to one of 2^40 zero bytes: coded against the zero base
    (its size changes), so no chunk changes: a bundle of a few hundred bytes."""
    entries = raw_entries(0, TIB)
    iden = identities(entries, [(EMPTY_HASH, uniform_hash(0, TIB))])
    return bundle(manifest(KIND_RAW, GIB, entries, data_length=TIB), iden)


def mani_entries_frame(size):
    """A MANI frame of exactly `size` bytes whose fixed fields (§6.2) are valid and
    declare one entry of a raw checkpoint (chunks of 4096), then zeros."""
    head = struct.pack("<IIB7xQQ", 1, 4096, KIND_RAW, 0, 0)
    return frame([head, ("run", 0, size - len(head))])


def ancillary_frames(count):
    """`count` unknown ancillary sections (type 'zbmb', critical flag clear), each
    compression 1 with a payload of one zstd frame header declaring 2^31 bytes and
    nothing after it: skipped after their checks (R-SEC-7), never decompressed."""
    s = section(b"zbmb", frame_head(2 * GIB), critical=False, compression=1)
    return [s] * count


# ---- safetensors checkpoints (SPEC.md §2.1)


def tensor_json(name, dtype, shape, begin, end):
    return b'"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}' % (
        name, dtype, b",".join(b"%d" % d for d in shape), begin, end)


# ---- history archives (SPEC.md §19)

HISTORY_HEAD = b'{"format":"dcr-history","version":"1.0",'


def ustar(name, size, kind):
    """A ustar header block: mode 0644, owner and group 0, time 1980-01-01."""
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:124] = b"0000644\0" + b"0000000\0" * 2
    h[124:136] = b"%011o\0" % size
    h[136:148] = b"%011o\0" % 315532800
    h[148:156] = b" " * 8  # the checksum counts its own field as spaces
    h[156] = kind
    h[257:265] = b"ustar\x0000"
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def tar_header(name, size):
    """A member's header; a size of 8 GiB or more, which ustar cannot hold, in a pax
    extended header before it (SPEC.md §19.1)."""
    name = name.encode()
    if size < 8 * GIB:
        return ustar(name, size, ord("0"))
    record = b" size=%d\n" % size
    record = b"%d" % (len(record) + len(b"%d" % (len(record) + 2))) + record
    pax = ustar(b"././@PaxHeader", len(record), ord("x")) + record + bytes(-len(record) % 512)
    return pax + ustar(name, 0, ord("0"))


def tar_parts(members, end=True):
    """Frame parts of a tar stream: members are (name, parts, declared size or None):
    a member whose parts hold fewer bytes than it declares ends the archive there."""
    out = []
    for name, parts, size in members:
        have = sum(map(part_size, parts))
        out += [tar_header(name, have if size is None else size)] + parts
        if size is not None and size != have:
            return out
        out.append(bytes(-have % 512))
    return out + ([bytes(1024)] if end else [])


def flatten(parts):
    """The bytes of frame parts that hold no run or repeat."""
    assert all(isinstance(p, (bytes, bytearray)) for p in parts)
    return b"".join(parts)


KEYFRAME = st_prefix(b"{" + tensor_json(b"w", b"U8", [16], 0, 16) + b"}") + bytes(range(16))
KEYFRAME_STATE = state_id([(b"w", U8, [16], 16, tensor_hash(bytes(range(16))))])
OTHER_STATE = state_id([(b"w", U8, [16], 16, tensor_hash(bytes(16)))])
KEYFRAME_NAME = "keyframes/step-00000000.safetensors"
BUNDLE_NAME = "bundles/step-00000001.dcr"


def history_index(keyframe=None, bundle_member=None):
    """The index of an archive of a keyframe (size, digest, state) and optionally a
    step-1 bundle (size, digest) from it: what the members declare, right."""
    members = []
    if keyframe:
        members.append({"name": KEYFRAME_NAME, "kind": "keyframe", "step": 0, "size": keyframe[0],
                        "xxh3_128": keyframe[1].hex(), "state": keyframe[2].hex()})
    if bundle_member:
        members.append({"name": BUNDLE_NAME, "kind": "bundle", "step": 1, "size": bundle_member[0],
                        "xxh3_128": bundle_member[1].hex(), "base_state": KEYFRAME_STATE.hex(),
                        "target_state": OTHER_STATE.hex()})
    return json.dumps({"format": "dcr-history", "version": "1.0", "members": members},
                      separators=(",", ":")).encode()


def zeros_digest(n):
    return xxh_repeat(128, bytes(1), n)


def archive_tar_zst(members):
    return frame(tar_parts(members), content_size=False)


def zip_cut(name, size, data):
    """A zip of one stored member declaring `size` bytes (ZIP64: local header, central
    directory, ZIP64 end records), of which only `data` is there: the central
    directory follows it at once, so the member runs past the end of the file."""
    name = name.encode()
    extra = struct.pack("<HHQQ", 1, 16, size, size)
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, 0, 0xFFFFFFFF, 0xFFFFFFFF,
                        len(name), len(extra)) + name + extra + data
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, 0, 0xFFFFFFFF,
                          0xFFFFFFFF, len(name), len(extra), 0, 0, 0, 0o100644 << 16, 0) + name + extra
    end64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, 1, 1, len(central), len(local))
    locator = struct.pack("<IIQI", 0x07064B50, 0, len(local) + len(central), 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), len(local), 0)
    return local + central + end64 + locator + end


# ---- apply journals (SPEC.md §18)

JMAGIC = b"\x89DCJ\r\n\x1a\n"


def journal(file_size, records, record_count=None):
    """A committed journal 1.1: records are (offset, length, form, element_size,
    compression, count, region_check, payload); record_count overrides the trailer's."""
    head = JMAGIC + struct.pack("<HHIQ", 1, 1, 0, file_size) + bytes(16) + bytes(16)
    out = bytearray(head + struct.pack("<Q", xxh64(head)))
    for offset, length, form, es, comp, count, check, payload in records:
        out += struct.pack("<QQBBBBIQQ", offset, length, form, es, comp, 0, count, len(payload), check)
        out += payload
    tail = b"DCJEND\r\n" + struct.pack("<QQ", len(records) if record_count is None else record_count,
                                       len(out) + 32)
    out += tail
    out += struct.pack("<Q", xxh64(out))
    return bytes(out)


def wrong_region_check(length):
    """A region check no replay gives: XXH3-64 of `length` zero bytes (the file the
    records are played onto), plus 1."""
    return (xxh_repeat(64, bytes(1), length) + 1) % (1 << 64)


# ---- the vectors

def cmd(*argv, result, accept=(), output=None, stdin=None, note=None):
    """One run: argv of `dcr` with {names} of the vector's files (and {out}, a path
    that does not exist yet); the reference's outcome `result` (null: success, else the
    code); `accept`, the outcomes a conforming reader may give instead; `output`, the
    sha256 of {out} after a success; `stdin`, the role whose file is standard input."""
    run = {"argv": list(argv), "budget": BUDGET, "result": result,
           "accept": sorted(set(accept) | {result}, key=lambda r: r or ""),
           "peak_rss_mib": RSS_BOUND, "seconds": SECONDS}
    if output:
        run["output_sha256"] = output
    if stdin:
        run["stdin"] = stdin
    if note:
        run["note"] = note
    return run


def vectors():
    """(name, {role: bytes or {"zeros": N}}, runs, verdict, covers, description)"""
    v = []
    nomem = "DCR_E_NOMEM"

    # -- bundles: the manifest frame
    v.append(("bundle/mani-over-budget", {"bundle": bundle(frame([("run", 0, 320 * MIB)]), b"", mani_compressed=True)},
              [cmd("validate", "{bundle}", result=nomem, accept=["DCR_E_MANIFEST"]),
               cmd("inspect", "{bundle}", result=nomem, accept=["DCR_E_MANIFEST"])],
              "DCR_E_MANIFEST", ["§11", "§14", "R-CMP-5"],
              "a 10 KB bundle whose MANI frame (RLE blocks) declares 320 MiB of zeros, over "
              "the budget: refused before inflating. Inflated, its fixed fields say chunk_size "
              "0 (DCR_E_MANIFEST)"))
    v.append(("bundle/mani-over-limit", {"bundle": bundle(frame([("run", 0, 2 * GIB + 4096)]), b"", mani_compressed=True)},
              [cmd("validate", "{bundle}", result="DCR_E_LIMIT")],
              "DCR_E_LIMIT", ["R-CMP-2", "R-SEC-3", "§11"],
              "a 64 KB bundle whose MANI frame declares 2 GiB + 4096 bytes, over "
              "max_section_size (§4.4 step 5): DCR_E_LIMIT at any budget, from the frame "
              "header; a naive reader allocates 2 GiB and inflates it"))
    v.append(("bundle/mani-at-budget", {"bundle": bundle(mani_entries_frame(BUDGET), b"", mani_compressed=True)},
              [cmd("validate", "{bundle}", result=nomem, accept=["DCR_E_NAME"])],
              "DCR_E_NAME", ["§11", "R-MAN-2", "R-MAN-4"],
              "an 8 KB bundle whose MANI frame is exactly the budget (256 MiB), its fixed fields "
              "valid and declaring one raw entry: the frame fits the budget, but not with what "
              "parsing it takes; the reference inflates the first 32 bytes alone and refuses "
              "before the rest. Parsed, the entry's name_length is 0 (DCR_E_NAME)"))

    # -- bundles: the target's safetensors header carried in the manifest (compressed):
    # (name, header, the reference's result, what else a reader may give, verdict,
    # covers, description), each run by validate
    for name, header, result, accept, verdict, covers, what in (
            ("json-array", [b"[", ("repeat", b"{},", 30_000_000 - 1), b"{}]"],
             "DCR_E_CHECKPOINT", [], "DCR_E_CHECKPOINT", ["R-ST-2", "R-MAN-8", "§11"],
             "an 8.6 KB bundle whose target header is 90 MB of [{},{},...] (30 million objects: "
             "gigabytes as a parsed document): the root is not an object, which a reader sees at "
             "its first byte (§11)"),
            ("json-nested", [b'{"a":[', ("repeat", b"{},", 13_000_000 - 1), b"{}]}"],
             nomem, ["DCR_E_CHECKPOINT"], "DCR_E_CHECKPOINT", ["R-ST-2", "R-ST-7", "§11"],
             "a target header of 39 MB, {\"a\":[{},{},...]} with 13 million empty objects: one "
             "tensor whose value is not an object (DCR_E_CHECKPOINT), but a document of gigabytes "
             "to a reader that parses the whole header first, as §2.1 rule 2 comes before rule 3"),
            ("json-shape", [b'{"a":{"dtype":"U8","shape":[', ("repeat", b"1,", 49_500_000 - 1),
                            b'1],"data_offsets":[0,1]}}'],
             nomem, ["DCR_E_LIMIT"], "DCR_E_LIMIT", ["R-ST-2", "§11"],
             "a target header of 99 MB whose one tensor has a shape of 49.5 million 1s: rank over "
             "max_rank (DCR_E_LIMIT), but 2.3 GiB as a parsed document"),
            ("json-deep", [b'{"a":', ("run", ord("["), 45_000_000), ("run", ord("]"), 45_000_000), b"}"],
             nomem, ["DCR_E_CHECKPOINT"], "DCR_E_CHECKPOINT", ["R-ST-7", "§2.2", "§11"],
             "a target header of 90 MB nesting 45 million arrays: the bracket that opens level "
             "2049 is an error where it stands (§2.2); a recursive parser runs out of stack, a "
             "document of 45 million arrays takes gigabytes"),
            ("json-name", [b'{"', ("run", ord("a"), 50_000_000), b'":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'],
             "DCR_E_LIMIT", [nomem], "DCR_E_LIMIT", ["R-ST-5", "§11"],
             "a target header of 50 MB whose one tensor name is 50 million bytes: over "
             "max_name_length (DCR_E_LIMIT)"),
            ("json-header-max", [b"{}", ("run", ord(" "), 100_000_000 - 2)],
             None, [nomem], None, ["R-ST-1", "§11"],
             "valid: a target header of exactly max_header_size (100,000,000 bytes), {} and "
             "spaces, no tensors: within the defaults, so no reader rejects it (§11), though one "
             "may refuse the work for its budget"),
            ("json-header-over", [b"{}", ("run", ord(" "), 100_000_001 - 2)],
             "DCR_E_LIMIT", [], "DCR_E_LIMIT", ["R-MAN-8", "R-ST-1", "§11"],
             "the same with a header of max_header_size + 1 bytes: DCR_E_LIMIT from its 8-byte "
             "length, before its text is read")):
        v.append(("bundle/" + name, {"bundle": json_bundle(header)},
                  [cmd("validate", "{bundle}", result=result, accept=accept)], verdict, covers, what))

    # -- bundles: chunks
    for enc, name in ((ENC_XOR_SPARSE, "sparse"), (ENC_XOR_DENSE, "dense")):
        v.append(("bundle/chunk-1g-" + name, {"bundle": one_chunk(enc, 30), "base": {"zeros": GIB}},
                  [cmd("validate", "{bundle}", result=nomem, accept=[None]),
                   cmd("apply", "{base}", "{bundle}", "-o", "{out}", result=nomem, accept=[None])],
                  None, ["§11", "§14", "R-CMP-3"],
                  "valid: a raw file of 1 GiB of zeros to one of bytes 0x01 in one chunk of 2^30 "
                  "bytes, %s, every element changed, each stream a frame of RLE blocks (%s). "
                  "Checking the chunk takes about 1.2 GiB, applying it 3 to 3.5 GiB (§11): "
                  "refused before a byte is decoded or read, from its record" %
                  ("XOR_SPARSE (count = n: a position stream of 2^30 gaps of 0)" if enc == ENC_XOR_SPARSE
                   else "XOR_DENSE", "37 KB" if enc == ENC_XOR_SPARSE else "33 KB")))
    v.append(("bundle/chunk-plane-frame-2g", {"bundle": small_raw_chunk(
        ENC_XOR_DENSE, 1, frame([("run", 1, 2 * GIB)]))},
        [cmd("validate", "{bundle}", result="DCR_E_DECOMPRESS")],
        "DCR_E_DECOMPRESS", ["R-CMP-3"],
        "a chunk of 4096 bytes (XOR_DENSE, zstd) whose plane frame declares 2 GiB (and holds "
        "it: 64 KB of RLE blocks) instead of n = 4096: refused from the frame header (§9.3); "
        "a naive reader allocates and inflates 2 GiB"))
    v.append(("bundle/chunk-positions-frame-1g", {"bundle": small_raw_chunk(
        ENC_XOR_SPARSE, 1, frame([("run", 0, GIB)]) + frame([b"\x01"]))},
        [cmd("validate", "{bundle}", result="DCR_E_DECOMPRESS")],
        "DCR_E_DECOMPRESS", ["R-CMP-3"],
        "a sparse chunk of 4096 bytes whose position stream's frame declares 1 GiB, above 1 + "
        "n/8 = 513 (§9.3)"))
    v.append(("bundle/target-1t", {"bundle": terabyte_target(), "base": b""},
              [cmd("validate", "{bundle}", result=None),
               cmd("apply", "{base}", "{bundle}", "-o", "{out}", "--max-size", "1G", result="DCR_E_LIMIT",
                   note="--max-size 1G: the caller's cap on the target size (§14, max_target_size)")],
              None, ["§14", "R-MAN-6"],
              "valid: an empty raw file to one of 2^40 zero bytes (1 TiB), a bundle of 448 bytes "
              "with no chunk (§14, output amplification). Validating it is instant; applying it "
              "under a cap of 1 GiB fails before anything is written"))
    v.append(("bundle/ancillary-frames", {"bundle": empty_bundle(ancillary_frames(2000)), "base": EMPTY_ST},
              [cmd("validate", "{bundle}", result=None),
               cmd("apply", "{base}", "{bundle}", "-o", "{out}", result=None,
                   output=hashlib.sha256(EMPTY_ST).hexdigest())],
              None, ["R-SEC-7", "§4.4"],
              "valid: 2000 unknown ancillary sections, each zstd-compressed with a frame header "
              "declaring 2 GiB and nothing after it (128 KB in all): skipped after their payload "
              "checks, never decompressed (§4.4); 4 TiB to a reader that inflates every section"))
    v.append(("bundle/meta-1g", {"bundle": bundle(manifest(KIND_SAFETENSORS, 4096, prefix=EMPTY_ST),
                                                  identities([], []),
                                                  ancillary=[section(b"META", frame([("run", 0, GIB)]), False, 1)])},
              [cmd("validate", "{bundle}", result=nomem, accept=["DCR_E_MANIFEST"])],
              "DCR_E_MANIFEST", ["R-META-1", "§11"],
              "a META section whose frame declares 1 GiB of zeros (count 0, then bytes left: "
              "DCR_E_MANIFEST): a known section, so checked, over the budget"))
    v.append(("bundle/chunks-1000", {"bundle": many_chunks(1000), "base": {"zeros": 1000 * PIECE}},
              [cmd("validate", "{bundle}", result=None),
               cmd("apply", "{base}", "{bundle}", "-o", "{out}", result=None,
                   output=hashlib.sha256((b"\x01" + bytes(PIECE - 1)) * 1000).hexdigest())],
              None, ["R-IDX-1", "§8.3"],
              "valid: 1000 CHNK sections of one change each (a raw file of 4 MB): per-section "
              "work, not quadratic"))

    # -- safetensors checkpoints
    for name, n, code, what in (
            ("header-2e63", 1 << 63, "DCR_E_LIMIT", "2^63: over max_header_size"),
            ("header-u64max", (1 << 64) - 1, "DCR_E_LIMIT", "2^64 - 1, which wraps 8 + N to 7"),
            ("header-beyond-file", 100_000_000, "DCR_E_CHECKPOINT",
             "100,000,000 (max_header_size) in a file of 16 bytes: 8 + N is beyond the file")):
        v.append(("ckpt/" + name, {"ckpt": struct.pack("<Q", n) + b"{}      "},
                  [cmd("id", "{ckpt}", result=code)],
                  code, ["R-ST-1"],
                  "a safetensors file whose header length N is %s; a naive reader allocates N "
                  "bytes first" % what))
    depth = 90_000
    v.append(("ckpt/header-deep", {"ckpt": st_prefix(b'{"a":' + b"[" * depth + b"]" * depth + b"}")},
              [cmd("id", "{ckpt}", result="DCR_E_CHECKPOINT")],
              "DCR_E_CHECKPOINT", ["R-ST-7", "§2.2"],
              "a 180 KB header nesting 90,000 arrays: an error at the bracket that opens level "
              "2049 (§2.2); a recursive parser runs out of stack"))
    rank = 90_000
    v.append(("ckpt/shape-rank-90k", {"ckpt": st_prefix(b"{" + tensor_json(b"a", b"U8", [1] * rank, 0, 1) + b"}") + b"\x00"},
              [cmd("id", "{ckpt}", result="DCR_E_LIMIT")],
              "DCR_E_LIMIT", ["R-ST-2"],
              "a tensor whose shape has 90,000 dimensions of 1: over max_rank"))
    v.append(("ckpt/offsets-1t", {"ckpt": st_prefix(b"{" + tensor_json(b"a", b"U8", [TIB], 0, TIB) + b"}") + bytes(8)},
              [cmd("id", "{ckpt}", result="DCR_E_LAYOUT")],
              "DCR_E_LAYOUT", ["R-ST-6"],
              "one tensor of 2^40 bytes in a file with 8 bytes of data: the last tensor must end "
              "at the end of the file; a reader that maps or reads data_offsets first asks for a "
              "terabyte"))

    # -- history archives
    def index_bomb(name, parts, verdict, what):
        total = sum(map(part_size, parts))
        blob = archive_tar_zst([("dcr-history.json", parts, None)])
        v.append(("archive/" + name, {"archive": blob},
                  [cmd("history", "list", "{archive}", result=nomem, accept=[verdict]),
                   cmd("history", "verify", "{archive}", result=nomem, accept=[verdict])],
                  verdict, ["R-HIS-2", "§19.4", "§11"],
                  "a %d KB .tar.zst whose index is %d MB: %s" % (len(blob) // 1000 + 1, total // 1000000, what)))

    n = 250 * 1000 * 1000
    index_bomb("index-array.tar.zst", [HISTORY_HEAD + b'"members":[', ("repeat", b"{},", n // 3), b"{}]}"],
               "DCR_E_ARCHIVE", "{\"members\":[{},{},...]}, 83 million members (each a document "
               "object); members without keys (DCR_E_ARCHIVE)")
    one = b"[" * 2000 + b"]" * 2000 + b","
    index_bomb("index-nested.tar.zst", [HISTORY_HEAD + b'"members":[', ("repeat", one, n // len(one)), b"[]]}"],
               "DCR_E_ARCHIVE", "members of 2000 nested arrays each, under a JSON parser's "
               "usual depth limit; members that are not objects (DCR_E_ARCHIVE)")
    index_bomb("index-string.tar.zst", [HISTORY_HEAD + b'"run_id":"', ("run", ord("a"), n), b'"}'],
               "DCR_E_ARCHIVE", "a run_id of 250 million bytes (at most 256: DCR_E_ARCHIVE)")
    member = (b'{"name":"bundles/step-00000001.dcr","kind":"bundle","step":1,"size":3136,'
              b'"xxh3_128":"15f6aa55aa55aa55aa55aa55aa55aa55","base_state":"37da55aa55aa55aa55aa55aa55aa55aa",'
              b'"target_state":"9dbb55aa55aa55aa55aa55aa55aa55aa","metadata":{"run_id":"run-0412"}},')
    index_bomb("index-members.tar.zst", [HISTORY_HEAD + b'"members":[', ("repeat", member, 1_000_000),
                                         b'{"name":"k","kind":"keyframe"}]}'],
               "DCR_E_ARCHIVE", "a million realistic members (~2.5 KB each as a document), the "
               "last one without a step (DCR_E_ARCHIVE)")
    depth = 125_000_000
    index_bomb("index-deep.tar.zst", [HISTORY_HEAD + b'"members":', ("run", ord("["), depth),
                                      ("run", ord("]"), depth), b"}"],
               "DCR_E_ARCHIVE", "members nested 125 million arrays deep; not JSON a reader "
               "parses (DCR_E_ARCHIVE)")

    tar_index_1t = flatten(tar_parts([("dcr-history.json", [HISTORY_HEAD], TIB)]))
    v.append(("archive/index-declared-1t.tar", {"archive": tar_index_1t},
              [cmd("history", "list", "{archive}", result="DCR_E_LIMIT")],
              "DCR_E_LIMIT", ["R-HIS-1", "§19.2"],
              "a 1.5 KB tar whose index member declares 2^40 bytes: over the index's 256 MiB "
              "(§19.2; a limit, §11), from its header; a naive reader allocates a terabyte for it"))
    v.append(("archive/index-declared-1t.zip", {"archive": zip_cut("dcr-history.json", TIB, HISTORY_HEAD)},
              [cmd("history", "list", "{archive}", result="DCR_E_LIMIT"),
               cmd("history", "list", "-", stdin="archive", result="DCR_E_LIMIT")],
              "DCR_E_LIMIT", ["R-HIS-1", "§19.2", "§11"],
              "a 286-byte zip whose one member, the index, is declared of 2^40 bytes (ZIP64, "
              "in its local header and its central directory) and holds 41: over the index's "
              "256 MiB, from its header, whether the zip is read by its central directory or "
              "as a stream (standard input)"))

    # a small valid keyframe (a tar member), and what the index says of it
    kf, kf_fields = (KEYFRAME_NAME, [KEYFRAME], None), (len(KEYFRAME), xxh128(KEYFRAME), KEYFRAME_STATE)
    gib3 = 3 * GIB
    zero_bundle = (BUNDLE_NAME, [("run", 0, gib3)], None)
    ix = history_index(kf_fields, (gib3, zeros_digest(gib3)))
    blob = archive_tar_zst([("dcr-history.json", [ix], None), kf, zero_bundle])
    v.append(("archive/member-zeros-3g.tar.zst", {"archive": blob},
              [cmd("history", "verify", "{archive}", result="DCR_E_MAGIC"),
               cmd("history", "extract", "{archive}", "--step", "1", "-o", "{out}", result="DCR_E_MAGIC")],
              "DCR_E_MAGIC", ["R-HIS-8"],
              "a %d KB .tar.zst whose bundle member is 3 GiB of zeros, as the index says (size, "
              "digest): not a bundle from its first byte (R-HIS-8), which a reader sees before "
              "it reads, holds or hashes the member" % (len(blob) // 1000 + 1)))
    head = one_chunk(ENC_XOR_DENSE, 12)[:96]  # a bundle's header and first section header
    size = GIB
    digest = xxh_runs(128, [head, (bytes(1), size - len(head))])
    ix = history_index(kf_fields, (size, digest))
    blob = archive_tar_zst([("dcr-history.json", [ix], None), kf,
                            (BUNDLE_NAME, [head, ("run", 0, size - len(head))], None)])
    v.append(("archive/member-head-1g.tar.zst", {"archive": blob},
              [cmd("history", "verify", "{archive}", result="DCR_E_CHECKSUM"),
               cmd("history", "extract", "{archive}", "--step", "1", "-o", "{out}", result="DCR_E_CHECKSUM")],
              "DCR_E_CHECKSUM", ["R-HIS-8", "R-SEC-4"],
              "a bundle member of 1 GiB, as the index says: a bundle's header and first section "
              "header (the first 96 bytes of a valid raw bundle), then zeros: read whole (to a temporary "
              "file, not memory: over a quarter of the budget) before its digest, which "
              "matches; then its MANI payload check fails"))
    zero_kf = (KEYFRAME_NAME, [("run", 0, gib3)], None)
    ix = history_index((gib3, zeros_digest(gib3), KEYFRAME_STATE))
    blob = archive_tar_zst([("dcr-history.json", [ix], None), zero_kf])
    v.append(("archive/keyframe-zeros-3g.tar.zst", {"archive": blob},
              [cmd("history", "verify", "{archive}", result="DCR_E_CHECKPOINT"),
               cmd("history", "extract", "{archive}", "--step", "0", "-o", "{out}", result="DCR_E_CHECKPOINT")],
              "DCR_E_CHECKPOINT", ["R-HIS-8", "R-ST-1"],
              "a keyframe member of 3 GiB of zeros: its safetensors prefix says a header of 0 "
              "bytes, not JSON (DCR_E_CHECKPOINT), at its first 8 bytes"))
    n = 49_500_000
    text = b'{"w":{"dtype":"U8","shape":[', b'],"data_offsets":[0,1]}}'
    text_len = len(text[0]) + 2 * n - 1 + len(text[1])
    kf_parts = [struct.pack("<Q", text_len), text[0], ("repeat", b"1,", n - 1), b"1", text[1], b"\x00"]
    kf_size = sum(map(part_size, kf_parts))
    ix = history_index((kf_size, b"\x5a" * 16, KEYFRAME_STATE))
    blob = archive_tar_zst([("dcr-history.json", [ix], None), (KEYFRAME_NAME, kf_parts, None)])
    v.append(("archive/keyframe-shape.tar.zst", {"archive": blob},
              [cmd("history", "verify", "{archive}", result=nomem, accept=["DCR_E_LIMIT"]),
               cmd("history", "extract", "{archive}", "--step", "0", "-o", "{out}", result=nomem,
                   accept=["DCR_E_LIMIT"])],
              "DCR_E_LIMIT", ["R-HIS-8", "R-ST-2", "§11"],
              "a keyframe whose safetensors header (99 MB, checked as it arrives, R-HIS-8) is one "
              "tensor with a shape of 49.5 million 1s: over max_rank, 2.3 GiB as a document"))
    ix = history_index((16, b"\x5a" * 16, KEYFRAME_STATE))
    v.append(("archive/keyframe-header-2e63.tar", {"archive": flatten(tar_parts([
        ("dcr-history.json", [ix], None), (KEYFRAME_NAME, [struct.pack("<Q", 1 << 63) + b"{}      "], None)]))},
              [cmd("history", "verify", "{archive}", result="DCR_E_LIMIT")],
              "DCR_E_LIMIT", ["R-HIS-8", "R-ST-1"],
              "a keyframe whose safetensors header length is 2^63: over max_header_size, at its "
              "first 8 bytes (R-HIS-8)"))
    for c in ("tar", "tar.zst"):
        members = [("dcr-history.json", [history_index(kf_fields, (TIB, b"\x5a" * 16))], None), kf,
                   (BUNDLE_NAME, [MAGIC], TIB)]
        parts = tar_parts(members, end=False)
        blob = flatten(parts) if c == "tar" else frame(parts, content_size=False)
        v.append(("archive/member-declared-1t." + c, {"archive": blob},
                  [cmd("history", "verify", "{archive}", result="DCR_E_TRUNCATED"),
                   cmd("history", "extract", "{archive}", "--step", "1", "-o", "{out}", result="DCR_E_TRUNCATED")],
                  "DCR_E_TRUNCATED", ["R-HIS-1", "R-HIS-8"],
                  "a bundle member that the index and the %s header declare of 2^40 bytes, the "
                  "archive ending after its first 8 (a bundle's magic)" % c))

    # -- apply journals: recovered by an in-place apply (R-JNL-3) before it reads its
    # bundle's base (the bundle: a valid one, of another file); the checkpoint is a raw
    # file of zeros, which proves nothing (R-JNL-4), so a journal that cannot be
    # replayed is kept
    applied = ("journal/apply.dcr", small_raw_chunk(ENC_XOR_DENSE, 1, frame([b"\x01" + bytes(PIECE - 1)])))
    two = 2 * GIB
    rec = (0, two, 0, 1, 1, 0, wrong_region_check(two), frame([("run", 1, two)]))
    v.append(("journal/region-2g", {"journal": journal(two, [rec]), "ckpt": {"zeros": two},
                                    "bundle": applied},
              [cmd("apply", "--in-place", "{ckpt}", "{bundle}", result=nomem, accept=["DCR_E_JOURNAL"])],
              "DCR_E_JOURNAL", ["R-JNL-1", "R-JNL-3", "§18.3", "§11"],
              "a committed journal of one record: a region of 2^31 bytes (the largest), its "
              "content a zstd frame of 2^31 bytes (64 KB of RLE blocks), whose region_check "
              "no replay gives: every record is checked before one is written (step 8), and "
              "neither file changes. Checking it holds the content and the region: 4 GiB to a "
              "reader that holds them whole, which the reference refuses for its budget "
              "before reading the record; a reader that streams them gives the verdict"))
    count = 1 << 31
    bound = 1 + count // 8 + count
    rec = (0, two, 1, 1, 1, count, wrong_region_check(two), frame([("run", 0, 1 + count // 8), ("run", 1, count)]))
    v.append(("journal/positions-2g", {"journal": journal(two, [rec]), "ckpt": {"zeros": two},
                                       "bundle": applied},
              [cmd("apply", "--in-place", "{ckpt}", "{bundle}", result=nomem, accept=["DCR_E_JOURNAL"])],
              "DCR_E_JOURNAL", ["R-JNL-1", "§18.3", "§11"],
              "a record of form 1 (elements) over 2^31 bytes with count = 2^31 (every element): "
              "its content (%d bytes, 74 KB of RLE blocks) is a position stream of 2^31 gaps of 0 "
              "and 2^31 values (region_check wrong again); 8 GiB more to a reader that holds "
              "positions as 32-bit integers" % bound))
    v.append(("journal/record-count", {"journal": journal(PIECE, [], record_count=(1 << 64) - 1),
                                       "ckpt": {"zeros": PIECE},
                                       "bundle": applied},
              [cmd("apply", "--in-place", "{ckpt}", "{bundle}", result="DCR_E_JOURNAL")],
              "DCR_E_JOURNAL", ["R-JNL-1"],
              "a committed journal of no records whose trailer says 2^64 - 1 records: they "
              "cannot fit between the header and the trailer (step 7)"))
    return v




def check_covers(entries):
    """Every requirement id a vector covers is tagged in SPEC.md, every section is one
    of its headings: the index names nothing the specification does not have."""
    text = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "SPEC.md"),
                encoding="utf-8").read()
    sections = set(re.findall(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", text, re.M))
    for e in entries:
        for c in e["covers"]:
            if not ("[%s]" % c in text if c.startswith("R-") else c[1:] in sections):
                raise SystemExit("%s covers %s, which SPEC.md does not have" % (e["name"], c))


# The file of each role: the vector's name, then this (an archive's name has its own).
SUFFIX = {"bundle": ".dcr", "base": ".base", "ckpt": ".safetensors", "journal": ".dcr-journal",
          "archive": ""}


def main():
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "testvectors", "resource-v1")
    paths, entries = {}, []
    for name, files, runs, verdict, covers, description in vectors():
        listed = {}
        for role, data in files.items():
            if isinstance(data, dict):  # made by the runner: a file of zeros
                listed[role] = data
                continue
            path, data = data if isinstance(data, tuple) else (None, data)
            sha = hashlib.sha256(data).hexdigest()
            if sha not in paths:  # the same bytes in two vectors are one file
                paths[sha] = path or name + SUFFIX[role] + (
                    "" if role != "base" else ".safetensors" if data.startswith(EMPTY_ST[:8]) else ".bin")
                os.makedirs(os.path.dirname(os.path.join(out, paths[sha])), exist_ok=True)
                with open(os.path.join(out, paths[sha]), "wb") as f:
                    f.write(data)
            listed[role] = {"path": paths[sha], "sha256": sha, "size": len(data)}
        entries.append({"name": name, "files": listed, "verdict": verdict, "runs": runs,
                        "covers": covers, "description": description})
    check_covers(entries)
    index = {
        "format": "DCR resource vectors",
        "format_version": "1.0",
        "spec": "SPEC.md §11 (memory), §14 (decompression, output amplification), §18.3, §19.4",
        "root": ".",
        "generator": "tools/mkresourcevectors.py (make vectors): Python's struct, json and "
                     "hashlib, libxxhash by ctypes, zstd frames written block by block; no libdcr, "
                     "no libzstd",
        "usage": "for each vector and each of its runs: make the files of `files` (a role given as "
                 "{\"zeros\": N} is a file of N zero bytes, best made sparse; a role `journal` goes "
                 "beside `ckpt` as CKPT.dcr-journal), run the reader as `argv` says (the dcr "
                 "command line, {ROLE} standing for that file's path and {out} for a path that "
                 "does not exist; the file of the role `stdin` names, if any, on standard input) with a memory budget of `budget` bytes (dcr: --memory), and "
                 "measure its peak resident memory and wall-clock time. It passes when it ends "
                 "within `peak_rss_mib` MiB and `seconds` s with one of `accept`: null is "
                 "success (then {out}, if named and `output_sha256` given, has that sha256), a "
                 "code is a failure with that code and nothing at {out}, and for a journal CKPT "
                 "and CKPT.dcr-journal exactly as they were. `result` is what this "
                 "implementation gives; `verdict` what every reader gives that does the work",
        "outcomes": {
            "null": "success: the input is valid and the work was done",
            "DCR_E_NOMEM": "the work does not fit the budget: refused, not a verdict on the input "
                           "(SPEC.md §11); accepted where `accept` lists it, when a reader that "
                           "needs less could give the verdict instead",
            "DCR_E_*": "the input's verdict, whatever the budget (SPEC.md §13)"},
        "bounds": "peak resident memory within the budget + 256 MiB and 15 s on one core of a "
                  "2020s machine: a reader that holds, parses or writes what the input declares "
                  "needs gigabytes or minutes for every vector",
        "counts": {"vectors": len(entries), "runs": sum(len(e["runs"]) for e in entries)},
        "vectors": entries,
    }
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("resource-v1: %d vectors in %s" % (len(entries), out))


if __name__ == "__main__":
    main()

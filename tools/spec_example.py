#!/usr/bin/env python3
"""spec_example.py - print the worked example of SPEC.md Appendix A.

usage: python3 tools/spec_example.py DCR_BINARY > fragment.md

Writes a tiny safetensors base/target pair, has DCR_BINARY encode it, and prints
the Markdown that goes between the markers <!-- spec-example:begin --> and
<!-- spec-example:end --> of SPEC.md: the inputs, an annotated dump of every byte
of the bundle, its decompressed streams, and test values for XXH3, pieces(),
tensor hashes and state ids. tests/spec_example.sh checks that SPEC.md holds
exactly this output.

The bundle is parsed here from its bytes by SPEC.md alone; libdcr only writes it
(and gives one tensor hash, as a cross-check). Every checksum, hash and state id
printed is recomputed from the inputs, and every chunk is decoded and compared
with the target, so a wrong value stops the script (exit 1) instead of reaching
the spec. XXH3 comes from the xxHash tools (xxhsum) and zstd decompression from
the zstd tool, as the standard library has neither.
"""
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
import textwrap

CHUNK_SIZE = 4096
PIECE = 4096
LEVEL = 3
DTYPES = {"BOOL": (1, 1), "U8": (2, 1), "I8": (3, 1), "F8_E5M2": (4, 1), "F8_E4M3": (5, 1),
          "I16": (6, 2), "U16": (7, 2), "F16": (8, 2), "BF16": (9, 2), "I32": (10, 4),
          "U32": (11, 4), "F32": (12, 4), "I64": (13, 8), "U64": (14, 8), "F64": (15, 8)}
DTYPE_NAMES = {code: name for name, (code, _) in DTYPES.items()}
ENCODINGS = {1: "XOR_DENSE", 2: "XOR_SPARSE", 3: "OVERWRITE_DENSE", 4: "OVERWRITE_SPARSE",
             5: "DELTA_DENSE", 6: "DELTA_SPARSE"}
COMPRESSIONS = {0: "none", 1: "zstd"}
# What the appendix's prose says about the chunks. If the encoder chooses
# otherwise, the inputs need retuning, rather than the example changing silently.
EXPECTED_CHUNKS = [("bias", "XOR_SPARSE", "none"), ("weight", "DELTA_DENSE", "zstd")]
ZSTD_MAGIC = 0xFD2FB528
X_LENGTH = 5000  # the pieces() test input: two pieces, the second one short
NAME, DTYPE, SHAPE, BASE, TARGET = range(5)  # fields of a tensor tuple


def fail(message):
    sys.exit("spec_example: " + message)


def check(condition, what):
    if not condition:
        fail("check failed: " + what)


# ---------------------------------------------------------------------------
# XXH3 and zstd, by their reference command-line tools

def run(argv, data=b"", cwd=None):
    try:
        done = subprocess.run(argv, input=data, capture_output=True, cwd=cwd)
    except OSError as e:
        fail(f"cannot run {argv[0]}: {e.strerror} (make all builds dcr; sh tools/deps.sh "
             "installs xxhsum and zstd)")
    if done.returncode:
        fail(f"{' '.join(argv)} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def xxhsum(algorithm, data):
    # --tag prints "NAME (stdin) = HEX" in every xxhsum since 0.8.0 (the untagged
    # format changed in 0.8.2); the hex is the canonical big-endian form.
    out = run(["xxhsum", "-H" + algorithm, "--tag", "-"], data).decode()
    match = re.search(r"= ([0-9a-f]+)\s*$", out)
    check(match is not None, f"xxhsum output {out!r}")
    return match.group(1)


def xxh3_64(data):
    return int(xxhsum("3", data), 16)


def xxh3_128(data):
    return bytes.fromhex(xxhsum("128", data))


def pieces(data):
    return b"".join(xxh3_128(data[i:i + PIECE]) for i in range(0, len(data), PIECE))


def tensor_hash(data):
    return xxh3_128(pieces(data))


# ---------------------------------------------------------------------------
# The inputs

def example_tensors():
    """(name, dtype, shape, base bytes, target bytes), sorted by name."""
    bias = [0.25 * i - 2 for i in range(16)]
    new_bias = list(bias)
    # Positions 1, 4, 8 are SPEC.md §9.1's Rice example; 3 changes in 16 elements
    # make a sparse chunk.
    new_bias[1], new_bias[4], new_bias[8] = 1.5, -0.75, 3.25
    # 64 BF16 values of either sign from 1/128 to 1, from a fixed hash of i.
    weight = []
    for i in range(64):
        h = (i + 1) * 0x9E3779B1 & 0xFFFFFFFF
        weight.append((h >> 31) << 15 | (0x78 + (h >> 24 & 7)) << 7 | (h >> 8 & 0x7F))
    # +1 in every element's bits moves it one ULP away from zero: a delta of +1
    # (zigzag 2) for a positive value, -1 (zigzag 1) for a negative one.
    new_weight = [w + 1 for w in weight]
    return [("bias", "F32", [16], struct.pack("<16f", *bias), struct.pack("<16f", *new_bias)),
            ("empty", "F32", [0], b"", b""),
            ("weight", "BF16", [4, 16], struct.pack("<64H", *weight),
             struct.pack("<64H", *new_weight))]


def safetensors_header(tensors):
    """The JSON header, a tensor a line, padded with spaces so that the data region
    starts at a multiple of 8 (as the safetensors library pads)."""
    lines, at = [], 0
    for t in tensors:
        entry = {"dtype": t[DTYPE], "shape": t[SHAPE], "data_offsets": [at, at + len(t[BASE])]}
        lines.append(json.dumps(t[NAME]) + ":" + json.dumps(entry, separators=(",", ":")))
        at += len(t[BASE])
    text = ("{" + ",\n".join(lines) + "}").encode()
    return text + b" " * (-(8 + len(text)) % 8)


def safetensors(tensors, side):
    header = safetensors_header(tensors)
    return struct.pack("<Q", len(header)) + header + b"".join(t[side] for t in tensors)


# ---------------------------------------------------------------------------
# Annotated dumps

class Dump:
    """Walks bytes front to back. Every field read becomes a row (offset, bytes,
    note, shown), so a rendering covers each byte once and in order; `shown`
    replaces the hex of bytes not worth repeating (outside the bundle's dump)."""

    def __init__(self, data):
        self.data, self.at, self.rows = data, 0, []

    def peek(self, fmt):
        check(self.at + struct.calcsize(fmt) <= len(self.data),
              f"structure at {self.at:#x} runs past the end")
        return struct.unpack_from(fmt, self.data, self.at)

    def field(self, n, note, shown=None):
        check(self.at + n <= len(self.data), f"field at {self.at:#x} runs past the end")
        if n:
            self.rows.append((self.at, self.data[self.at:self.at + n], note, shown))
        self.at += n


HEX_WIDTH = 48  # 16 bytes, with a gap after the eighth


def hex_column(b):
    first, rest = b[:8].hex(" "), b[8:].hex(" ")
    return first + "  " + rest if rest else first


def render(rows, relative=False):
    """Lines "OFFSET  HEX  NOTE" of at most 16 bytes; a run of more than 16 equal
    bytes is one line "XX ×COUNT". Relative offsets (not in the bundle) get a +."""
    lines = []
    for offset, b, note, shown in rows:
        if shown is not None:
            parts = [shown]
        elif len(b) > 16 and len(set(b)) == 1:
            parts = [f"{b[0]:02x} ×{len(b)}"]
        else:
            parts = [hex_column(b[i:i + 16]) for i in range(0, len(b), 16)]
        for i, part in enumerate(parts):
            at = offset + 16 * i
            label = f"+{at:05x}" if relative else f"{at:06x}"
            lines.append(f"{label}  {part:<{HEX_WIDTH}}  {note if i == 0 else ''}".rstrip())
    return lines


def undump(lines):
    """The bytes a reader rebuilds from a rendered dump: proof that none is lost."""
    out = bytearray()
    for line in lines:
        check(int(line[:6], 16) == len(out), f"dump line out of order: {line}")
        column = line[8:8 + HEX_WIDTH].strip()
        if "×" in column:
            value, count = column.split(" ×")
            out += bytes([int(value, 16)]) * int(count)
        else:
            out += bytes.fromhex(column)
    return bytes(out)


# ---------------------------------------------------------------------------
# The bundle, by SPEC.md

def hex64(value):
    return f"0x{value:016x}"


class Example:
    def __init__(self, tensors, bundle):
        self.tensors = {t[NAME]: t for t in tensors}
        self.target_file = safetensors(tensors, TARGET)
        self.bundle = bundle
        self.entries = []  # manifest entry names, in order
        self.chunks = []   # (section offset, record fields, payload length)
        self.offsets = {}  # section type -> offset, for IDEN, INDX and FOOT
        self.streams = []  # (title, rows): what the zstd frames decompress to

    def walk(self):
        """The bundle's dump rows, every structure checked on the way."""
        d = Dump(self.bundle)
        self.bundle_header(d)
        types = []
        while not types or types[-1] != "FOOT":
            check(d.at < len(self.bundle), "no FOOT section before the end")
            types.append(self.section(d))
        check(d.at == len(self.bundle), "bytes after FOOT")
        expected = ["MANI"] + ["CHNK"] * len(self.chunks) + ["IDEN", "INDX", "FOOT"]
        check(types == expected, f"section order {types} (no META was asked for)")
        return d.rows

    def bundle_header(self, d):
        check(self.bundle[:8] == b"\x89DCR\r\n\x1a\n", "magic")
        d.field(8, "bundle header: magic \\x89 D C R \\r \\n \\x1a \\n")
        major, minor, flags = d.peek("<HHI")
        check(major == 1 and flags == 0 and not any(self.bundle[16:56]),
              "version 1, reserved flags and bytes zero")
        d.field(8, f"u16 major {major}, u16 minor {minor}, u32 flags 0 (reserved)")
        d.field(40, "reserved")
        (stored,) = d.peek("<Q")
        check(stored == xxh3_64(self.bundle[:56]), "bundle header check")
        d.field(8, f"u64 check = XXH3-64(bytes 0..55) = {hex64(stored)}")

    def section(self, d):
        start = d.at
        check(start % 64 == 0, f"section at {start:#x} is not 64-aligned")
        raw_type, flags, compression, reserved, length, payload_check, header_check = \
            d.peek("<4sHBBQQQ")
        kind = raw_type.decode("ascii")
        check(header_check == xxh3_64(self.bundle[start:start + 24]), f"{kind} header check")
        check(flags == 1 and reserved == 0, f"{kind}: critical, no reserved bits")
        check(compression == (1 if kind == "MANI" else 0),
              f"{kind} compression {compression} (A.3 expects a compressed MANI only)")
        d.field(8, f'{kind} section: type "{kind}", flags 0x{flags:04x} (critical), '
                   f"compression {compression} ({COMPRESSIONS[compression]}), reserved")
        d.field(8, f"u64 length {length}")
        payload = self.bundle[start + 32:start + 32 + length]
        check(len(payload) == length and payload_check == xxh3_64(payload),
              f"{kind} payload check")
        d.field(8, f"u64 payload check = XXH3-64(the {length} payload bytes) = "
                   f"{hex64(payload_check)}")
        d.field(8, f"u64 header check = XXH3-64(header bytes 0..23) = {hex64(header_check)}")
        self.offsets[kind] = start
        {"MANI": self.mani, "CHNK": self.chnk, "IDEN": self.iden, "INDX": self.indx,
         "FOOT": self.foot}[kind](d, start, length)
        check(d.at == start + 32 + length, f"{kind} content ends at {d.at:#x}, not where "
                                             "its length says")
        pad = -d.at % 64
        check(not any(self.bundle[d.at:d.at + pad]), f"{kind} padding is not zero")
        d.field(pad, "zero padding to a multiple of 64")
        return kind

    # -- MANI (§6)

    def mani(self, d, start, length):
        check(start == 64, "MANI is the section at 64")
        content = zstd_frame(d, "the manifest")
        m = Dump(content)
        self.manifest(m)
        check(m.at == len(content), "bytes after the last manifest entry")
        self.streams.append((f"The MANI frame decompresses to the {len(content)}-byte "
                             "manifest (the JSON header is not repeated):", m.rows))

    def manifest(self, d):
        count, chunk_size, kind = d.peek("<IIB")
        check(chunk_size == CHUNK_SIZE and kind == 1 and not any(d.data[9:16]),
              "chunk size, kind, reserved bytes")
        d.field(8, f"u32 entry_count {count}, u32 chunk_size {chunk_size}")
        d.field(8, "u8 kind 1 (safetensors), 7 reserved bytes")
        prefix_length, data_length = d.peek("<QQ")
        d.field(8, f"u64 prefix_length {prefix_length}")
        d.field(8, f"u64 data_length {data_length}")
        check(d.data[d.at:d.at + prefix_length] == self.target_file[:prefix_length]
              and prefix_length + data_length == len(self.target_file),
              "the carried prefix and data length are the target's")
        d.field(8, f"prefix: u64 header length {prefix_length - 8}")
        d.field(prefix_length - 8, "prefix: the JSON header of A.1, padding included",
                f"({prefix_length - 8} bytes)")
        offset = 0
        for i in range(count):
            (name_length,) = d.peek("<H")
            name = d.data[d.at + 2:d.at + 2 + name_length].decode()
            check(name in self.tensors
                  and (not self.entries or self.entries[-1].encode() < name.encode()),
                  f"entry name {name!r}: a tensor's, in order")
            check(d.data[d.at + 2 + name_length:d.at + 4 + name_length] == b"\x03\x00",
                  f"{name}: presence")
            d.field(4 + name_length, f'entry {i}: u16 name_length {name_length}, "{name}", '
                                     "u8 presence 3 (both), u8 reserved")
            t = self.tensors[name]
            self.descriptor(d, "base", t[DTYPE], t[SHAPE], len(t[BASE]), None)
            self.descriptor(d, "target", t[DTYPE], t[SHAPE], len(t[TARGET]), offset)
            offset += len(t[TARGET])
            self.entries.append(name)
        check(offset == data_length and sorted(self.entries) == sorted(self.tensors),
              "the entries are the tensors, covering the data region")

    def descriptor(self, d, side, dtype, shape, byte_length, offset):
        code, rank = d.peek("<BB")
        check(DTYPE_NAMES.get(code) == dtype and rank == len(shape), f"{side} dtype, rank")
        dims = list(d.peek(f"<2x{rank}Q"))
        check(dims == shape, f"{side} dims")
        d.field(2 + 8 * rank,
                f"{side}: u8 dtype {code} ({dtype}), u8 rank {rank}, u64 dims {dims}")
        (length,) = d.peek("<Q")
        check(length == byte_length == math.prod(dims) * DTYPES[dtype][1], f"{side} byte_length")
        if offset is None:
            d.field(8, f"{side}: u64 byte_length {length}")
        else:
            check(d.peek("<8xQ") == (offset,), "target offset")
            d.field(16, f"{side}: u64 byte_length {length}, u64 offset {offset} "
                        "(in the data region)")

    # -- CHNK (§8.2, §9)

    def chnk(self, d, start, length):
        tensor, chunk, encoding, compression, reserved, count, base_check, target_check = \
            d.peek("<IIBBHIQQ")
        check(tensor < len(self.entries) and encoding in ENCODINGS and reserved == 0,
              "chunk record")
        name = self.entries[tensor]
        got = (name, ENCODINGS[encoding], COMPRESSIONS[compression])
        check(got == EXPECTED_CHUNKS[len(self.chunks)],
              f"the encoder wrote {got}; Appendix A's prose and inputs expect "
              f"{EXPECTED_CHUNKS[len(self.chunks)]}: retune example_tensors()")
        t = self.tensors[name]
        size = DTYPES[t[DTYPE]][1]
        lo, hi = chunk * CHUNK_SIZE, min((chunk + 1) * CHUNK_SIZE, len(t[TARGET]))
        check(lo < hi, "chunk number within the tensor")
        old, new = t[BASE][lo:hi], t[TARGET][lo:hi]
        n = (hi - lo) // size
        changed = sum(old[i:i + size] != new[i:i + size] for i in range(0, hi - lo, size))
        check(count == changed, "count is the number of changed elements")
        d.field(8, f"chunk record: u32 tensor {tensor} ({name}), u32 chunk {chunk}")
        d.field(8, f"u8 encoding {encoding} ({ENCODINGS[encoding]}), u8 compression "
                   f"{compression} ({COMPRESSIONS[compression]}), u16 reserved, count {count}")
        check(base_check == xxh3_64(pieces(old)), "base_check")
        d.field(8, f"u64 base_check = XXH3-64(pieces(base bytes {lo}..{hi - 1})) = "
                   f"{hex64(base_check)}")
        check(target_check == xxh3_64(pieces(new)), "target_check")
        d.field(8, f"u64 target_check = XXH3-64(pieces(target bytes {lo}..{hi - 1})) = "
                   f"{hex64(target_check)}")

        sparse = ENCODINGS[encoding].endswith("SPARSE")
        op = ENCODINGS[encoding].split("_")[0].lower()
        k = count if sparse else n
        positions = range(n)
        # EXPECTED_CHUNKS leaves two cases: a sparse chunk stored as it is, and a
        # dense one in one zstd frame.
        if sparse:
            positions, used, bits = rice_decode(self.bundle[d.at:start + 32 + length], count, n)
            d.field(1, f"position stream: Rice parameter k = {self.bundle[d.at]}")
            d.field(used - 1, f"gap bits from bit 0 up: {' | '.join(bits)}: gaps "
                              f"{', '.join(map(str, gaps(positions)))}, positions "
                              f"{', '.join(map(str, positions))}")
        what = f"planes of {k} {op} values"
        if compression:
            planes = zstd_frame(d, what)
            check(len(planes) == k * size, "plane stream size")
            self.streams.append((f"The {name} frame decompresses to the {len(planes)} "
                                 f"bytes of {what}:", plane_rows(planes, k, size)))
        else:
            planes = d.data[d.at:start + 32 + length]
            check(len(planes) == k * size, "plane stream size")
            values = [bytes(planes[b * k + i] for b in range(size))[::-1].hex() for i in range(k)]
            d.field(k * size, f"{what}: 0x{', 0x'.join(values)}")
        rebuilt = bytearray(old)
        for j, p in enumerate(positions):
            value = bytes(planes[b * k + j] for b in range(size))
            rebuilt[p * size:(p + 1) * size] = apply_value(op, old[p * size:(p + 1) * size],
                                                           value, sparse)
        check(bytes(rebuilt) == new, f"{name} chunk {chunk} decodes to the target")
        self.chunks.append((start, (tensor, chunk, encoding, compression, count), length))

    # -- IDEN (§7), INDX (§8.3), FOOT (§5)

    def iden(self, d, start, length):
        for side, index in (("base", BASE), ("target", TARGET)):
            check(d.peek("16s")[0] == state_id(self.tensors.values(), index)[0],
                  f"{side} state id")
            d.field(16, f"{side}_state_id (its serialization is in A.4)")
        for name in self.entries:
            for side, index in (("base", BASE), ("target", TARGET)):
                data = self.tensors[name][index]
                check(d.peek("16s")[0] == tensor_hash(data), f"{side} tensor hash of {name}")
                d.field(16, f"{side} tensor hash of {name} = XXH3-128(pieces(its "
                            f"{len(data)} bytes))")

    def indx(self, d, start, length):
        check(length == 32 * len(self.chunks), "INDX length")
        for offset, (tensor, chunk, encoding, compression, count), payload in self.chunks:
            check(d.peek("<QIIBBHIQ") == (offset, tensor, chunk, encoding, compression, 0,
                                          count, payload), "index record")
            d.field(8, f"index record: u64 offset 0x{offset:x} (the CHNK section)")
            d.field(8, f"u32 tensor {tensor} ({self.entries[tensor]}), u32 chunk {chunk}")
            d.field(8, f"u8 encoding {encoding}, u8 compression {compression}, u16 reserved, "
                       f"u32 count {count}")
            d.field(8, f"u64 length {payload} (of that CHNK payload)")

    def foot(self, d, start, length):
        check(length == 32 and start + 64 == len(self.bundle), "FOOT is the last 64 bytes")
        fields = (64, self.offsets["IDEN"], self.offsets["INDX"], len(self.chunks))
        check(d.peek("<QQQQ") == fields, "footer fields")
        for label, value in zip(("MANI", "IDEN", "INDX"), fields):
            d.field(8, f"u64 offset of {label}: 0x{value:x}")
        d.field(8, f"u64 chunk_count {fields[3]}")


def zstd_frame(d, content):
    """Annotates one zstd frame (RFC 8878 §3.1.1) and returns what it decompresses
    to, after checking the declared content size (SPEC.md §4.4, §9.3)."""
    start = d.at
    check(d.peek("<I") == (ZSTD_MAGIC,), f"zstd magic at {start:#x}")
    d.field(4, f"zstd frame ({content}): magic 0x{ZSTD_MAGIC:08X}")
    (descriptor,) = d.peek("<B")
    single, has_checksum = descriptor >> 5 & 1, descriptor >> 2 & 1
    fcs_size = (single, 2, 4, 8)[descriptor >> 6]
    check(fcs_size and not descriptor & 0x0B,
          "frame declares its content size, has no dictionary id, reserved bit 0")
    d.field(1, f"frame header descriptor 0x{descriptor:02x}: {fcs_size}-byte content size"
               + ", single segment" * single + ", checksum" * has_checksum)
    if not single:
        (window,) = d.peek("<B")
        base = 1 << (10 + (window >> 3))
        d.field(1, f"window descriptor 0x{window:02x}: {base + base // 8 * (window & 7)} bytes")
    declared = int.from_bytes(d.data[d.at:d.at + fcs_size], "little")
    declared += 256 if fcs_size == 2 else 0
    d.field(fcs_size, f"frame content size {declared}"
                      + (" (stored as size - 256)" if fcs_size == 2 else ""))
    last = 0
    while not last:
        low, high = d.peek("<HB")
        header = low | high << 16
        last, kind, size = header & 1, header >> 1 & 3, header >> 3
        check(kind != 3, "reserved block type")
        d.field(3, f"block header 0x{header:06x}: {'last ' if last else ''}"
                   f"{('raw', 'RLE', 'compressed')[kind]} block, Block_Size {size}")
        d.field(1 if kind == 1 else size, (
            "raw block: the bytes themselves", f"RLE block: this byte, {size} times",
            "compressed block: literals and sequences (RFC 8878 §3.1.1.3)")[kind])
    if has_checksum:
        d.field(4, "content checksum: low 4 bytes of XXH64 of the content")
    out = run(["zstd", "-d", "-c", "-q"], d.data[start:d.at])
    check(len(out) == declared, "zstd frame gives its declared content size")
    return out


def rice_decode(stream, count, n):
    """A position stream (§9.1): (positions, bytes used, the bits of each gap as
    text, then the unused bits of the last byte)."""
    check(len(stream) >= 1 and stream[0] <= 31, "Rice parameter")
    k, at, positions, bits = stream[0], 8, [], []

    def bit():
        nonlocal at
        check(at // 8 < len(stream), "position stream ends inside a gap")
        at += 1
        return stream[(at - 1) // 8] >> ((at - 1) % 8) & 1

    for _ in range(count):
        q = 0
        while bit():
            q += 1
        low = [bit() for _ in range(k)]
        gap = q << k | sum(b << i for i, b in enumerate(low))
        positions.append(positions[-1] + 1 + gap if positions else gap)
        bits.append("1" * q + "0" + (" " + "".join(map(str, low)) if k else ""))
    used, unused = (at + 7) // 8, -at % 8
    check(positions[-1] < n, "positions within the chunk")
    check(not unused or stream[used - 1] >> (8 - unused) == 0, "unused bits zero")
    if unused:
        bits.append("0" * unused + " unused")
    return positions, used, bits


def gaps(positions):
    return [p - (positions[i - 1] + 1 if i else 0) for i, p in enumerate(positions)]


def key(u, width):
    return u ^ ((1 << (width - 1)) - 1) if u >> (width - 1) else u


def apply_value(op, old, value, sparse):
    """One element's target bytes from its base bytes and its stored value (§9)."""
    check(not sparse or any(value), "a sparse value of zero")
    if op == "xor":
        return bytes(a ^ b for a, b in zip(old, value))
    if op == "overwrite":
        return value
    width, z = 8 * len(old), int.from_bytes(value, "little")
    delta = z >> 1 ^ ((1 << width) - 1 if z & 1 else 0)
    t = key((key(int.from_bytes(old, "little"), width) + delta) % (1 << width), width)
    return t.to_bytes(len(old), "little")


def plane_rows(planes, k, size):
    return [(b * k, planes[b * k:(b + 1) * k], f"plane {b}: byte {b} of each of the {k} values",
             None) for b in range(size)]


def state_id(tensors, side):
    """A checkpoint's state id and the annotated rows of its serialization (§7)."""
    rows, data = [], b""
    for t in sorted(tensors, key=lambda t: t[NAME].encode()):
        name, code, rank = t[NAME].encode(), DTYPES[t[DTYPE]][0], len(t[SHAPE])
        for part, note in (
                (struct.pack("<H", len(name)) + name + bytes([code, rank]),
                 f'u16 name_length {len(name)}, "{t[NAME]}", u8 dtype {code} ({t[DTYPE]}), '
                 f"u8 rank {rank}"),
                (struct.pack(f"<{rank}QQ", *t[SHAPE], len(t[side])),
                 f"u64 dims {t[SHAPE]}, u64 byte_length {len(t[side])}"),
                (tensor_hash(t[side]), f"tensor hash of {t[NAME]}")):
            rows.append((len(data), part, note, None))
            data += part
    return xxh3_128(data), rows


# ---------------------------------------------------------------------------
# The fragment

def prose(text):
    """A paragraph wrapped like the rest of SPEC.md."""
    return textwrap.wrap(text, width=86, break_on_hyphens=False)


def code_block(lines):
    return ["```text", *lines, "```"]


def data_rows(tensors, side):
    """A data region, 16 bytes a row, noting the elements (and F32 values)."""
    rows, at = [], 0
    for t in tensors:
        body, size = t[side], DTYPES[t[DTYPE]][1]
        for i in range(0, len(body), 16):
            note = f"{t[NAME]}[{i // size}..{(i + 16) // size - 1}]"
            if t[DTYPE] == "F32":
                note += " = " + ", ".join(f"{v:g}" for v in struct.unpack_from("<4f", body, i))
            rows.append((at + i, body[i:i + 16], note, None))
        at += len(body)
    return rows


def fragment(dcr):
    tensors = example_tensors()
    header = safetensors_header(tensors)
    encode = ["encode", "base.safetensors", "target.safetensors", "-o", "example.dcr",
              "--chunk-size", str(CHUNK_SIZE), "--threads", "1", "--level", str(LEVEL),
              "--format", "1.0"]  # the example is a 1.0 bundle: it shows the encodings of §9.1
    x = bytes(i % 256 for i in range(X_LENGTH))
    with tempfile.TemporaryDirectory() as work:
        for name, data in (("base.safetensors", safetensors(tensors, BASE)),
                           ("target.safetensors", safetensors(tensors, TARGET)), ("x.bin", x)):
            with open(os.path.join(work, name), "wb") as f:
                f.write(data)
        run([dcr, *encode, "-q"], cwd=work)
        run([dcr, "encode", "--raw", "x.bin", "x.bin", "-o", "x.dcr", "-q"], cwd=work)
        x_report = json.loads(run([dcr, "inspect", "--json", "x.dcr"], cwd=work))
        with open(os.path.join(work, "example.dcr"), "rb") as f:
            bundle = f.read()
    example = Example(tensors, bundle)
    dump = render(example.walk())
    check(undump(dump) == bundle, "the dump rebuilds the bundle")

    x_pieces = pieces(x)
    check(x_report["tensors"][0]["target"]["hash"] == xxh3_128(x_pieces).hex(),
          "libdcr's tensor hash of X")
    abc_64 = xxh3_64(b"abc")
    weight = example.tensors["weight"][TARGET]
    header_check = xxh3_64(bundle[:56])
    json_lines = header.rstrip(b" ").decode().split("\n")
    data_length = len(example.target_file) - 8 - len(header)
    streams = []
    for title, rows in example.streams:
        streams += [*prose(title), "", *code_block(render(rows, relative=True)), ""]
    states = []
    for side, label in ((BASE, "Base"), (TARGET, "Target")):
        state, rows = state_id(tensors, side)
        states += ["", f"{label} state id {state.hex()}, the XXH3-128 of:", "",
                   *code_block(render(rows, relative=True))]
    chunks = ", ".join(f"`{name}` as {enc} ({'uncompressed' if comp == 'none' else 'zstd'})"
                       for name, enc, comp in EXPECTED_CHUNKS)

    out = [
        "### A.1 Inputs", "",
        *prose(f"`base.safetensors` and `target.safetensors` ({len(example.target_file)} "
               f"bytes each) start with the u64 header length {len(header)} and the same "
               f"JSON header: these {len(json_lines)} lines (separated by `0a`), then "
               f"{len(header) - len(header.rstrip(b' '))} spaces."), "",
        *code_block(json_lines), "",
        *prose(f"Then come their data regions ({data_length} bytes; offsets within the "
               "region; `empty` has no bytes). The target changes elements 1, 4 and 8 of "
               "`bias`, and adds 1 to the bits of every `weight` element."), "",
        "Base:", "", *code_block(render(data_rows(tensors, BASE))), "",
        "Target:", "", *code_block(render(data_rows(tensors, TARGET))), "",
        "The bundle is made with", "", *code_block(["dcr " + " ".join(encode)]), "",
        "### A.2 The bundle", "",
        *prose(f"`example.dcr`, {len(bundle)} bytes, with {len(example.chunks)} chunks: "
               f"{chunks}. The u64 checks are shown as numbers and stored little-endian; "
               "16-byte hashes and state ids are stored as shown."), "",
        *code_block(dump), "",
        "### A.3 Decompressed streams", "",
        *streams,
        "### A.4 Test values", "",
        *code_block([
            f'XXH3-64("abc")  = {hex64(abc_64)}, stored as {struct.pack("<Q", abc_64).hex(" ")}',
            f'XXH3-128("abc") = {xxh3_128(b"abc").hex()}',
            f"XXH3-64(example.dcr bytes 0..55) = {hex64(header_check)}, the header check",
            "",
            f"X = the {X_LENGTH} bytes 00 01 02 ... ff 00 01 ... (byte i is i mod 256)",
            f"pieces(X) = XXH3-128(X[0..4095]) followed by XXH3-128(X[4096..{X_LENGTH - 1}]):",
            *("  " + x_pieces[i:i + 16].hex(" ") for i in (0, 16)),
            f"tensor hash of X = XXH3-128(pieces(X)) = {xxh3_128(x_pieces).hex()}",
            f"chunk check of X = XXH3-64(pieces(X))  = {hex64(xxh3_64(x_pieces))}",
            "",
            f"pieces(weight, target) = {pieces(weight).hex()} (one piece)",
            f"tensor hash of weight, target = {tensor_hash(weight).hex()}",
            f"pieces(empty) has no bytes; tensor hash of empty = {xxh3_128(b'').hex()}"]),
        *states]
    check(all(line == line.rstrip() for line in out), "no trailing spaces in the fragment")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 tools/spec_example.py DCR_BINARY")
    # UTF-8 whatever the locale: the fragment has § and × in it.
    sys.stdout.buffer.write(fragment(os.path.abspath(sys.argv[1])).encode())


if __name__ == "__main__":
    main()

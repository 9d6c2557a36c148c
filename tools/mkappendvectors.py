#!/usr/bin/env python3
"""mkappendvectors.py [OUT_DIR] - writes OUT_DIR/history-append-v1/ (OUT_DIR:
testvectors): the append journal of an append in place (SPEC.md §19.6) and the
rollback a reader owes a torn append.

From the frozen testvectors/history-v1/valid/tar.tar, with Python's tarfile, json
and struct and libxxhash by ctypes (not libdcr): archive A holds steps 0 to 2 with
its index padded in a slot (§19.3), archive B is A appended to in place with steps
3 and 4 as §19.6 writes it (the new members over A's end blocks, the new index in
A's slot), and journal J is the one an appender writes before it changes A. Each
vector is an archive and, beside it, a journal or none; `dcr history recover` (or
any reader's rollback) must leave the archive with `after_sha256` and the journal
gone, or fail with `error` and change neither. Played by tests/append_vectors.sh.
Run only to add vectors."""
import ctypes
import ctypes.util
import hashlib
import io
import json
import os
import struct
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "testvectors", "history-v1", "valid", "tar.tar")
OUT = os.path.join(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "testvectors"),
                   "history-append-v1")
MAGIC = b"\x89DCA\r\n\x1a\n"
TAIL_MAX = 65536

xxh = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


class H128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


xxh.XXH3_128bits.restype = H128
xxh.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def xxh3_64(data):
    return xxh.XXH3_64bits(data, len(data))


def xxh3_128(data):  # canonical: big-endian, high half first
    h = xxh.XXH3_128bits(data, len(data))
    return struct.pack(">QQ", h.high64, h.low64)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def source():
    with tarfile.open(SOURCE) as t:
        members = [(m.name, t.extractfile(m).read()) for m in t.getmembers()]
    return json.loads(members[0][1]), members[1:]


def index_text(doc, upto):
    d = dict(doc)
    d["members"] = doc["members"][:upto]
    return (json.dumps(d, indent=1) + "\n").encode()


def tar_body(members):
    """The members' headers and data, without the end blocks: where they end."""
    buf = io.BytesIO()
    t = tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
    for name, data in members:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(data), 315532800, 0o644
        t.addfile(info, io.BytesIO(data))
    body = buf.getvalue()[:t.offset]
    t.close()
    return body, buf.getvalue()


def journal(a, index_offset, slot, members_end, major=1, minor=0, reserved=0, fields=None):
    index_end = index_offset + slot
    tail = members_end - TAIL_MAX if members_end - index_end > TAIL_MAX else index_end
    f = {"archive_size": len(a), "members_end": members_end, "index_offset": index_offset,
         "index_length": slot, "tail_offset": tail}
    f.update(fields or {})
    head = MAGIC + struct.pack("<HHIQQQQQ", major, minor, reserved, f["archive_size"], f["members_end"],
                               f["index_offset"], f["index_length"], f["tail_offset"])
    head += xxh3_128(a[tail:members_end])
    body = head + a[index_offset:index_offset + slot]
    return body + struct.pack("<Q", xxh3_64(body))


def main():
    doc, members = source()
    steps_a = 3  # the keyframe and bundles 1, 2: steps 0 to 2
    text_a, text_b = index_text(doc, steps_a), index_text(doc, len(members))
    slot = (len(text_b) + 1024 + 511) // 512 * 512
    pad = lambda t: t + b" " * (slot - len(t))
    body_a, a = tar_body([("dcr-history.json", pad(text_a))] + members[:steps_a])
    members_end = len(body_a)
    with tarfile.open(fileobj=io.BytesIO(a)) as t:
        index_offset = t.getmembers()[0].offset_data
    new_body, _ = tar_body(members[steps_a:])
    appended = bytearray(a[:members_end] + new_body + bytes(1024))
    appended[index_offset:index_offset + len(text_b)] = text_b  # the rest of the slot: spaces already
    b = bytes(appended)
    j = journal(a, index_offset, slot, members_end)

    def rejournal(**kw):
        return journal(a, index_offset, slot, members_end, **kw)

    WRAP = (1 << 64) - 512

    def tail_of(offset):  # the tail rule with the slot's end taken modulo 2^64
        end = (offset + slot) % (1 << 64)
        return members_end - TAIL_MAX if members_end - end > TAIL_MAX else end

    def damaged(at, value):
        x = bytearray(j)
        x[at] = value
        return bytes(x)

    torn_index = bytearray(b)
    torn_index[index_offset + 512:index_offset + slot] = a[index_offset + 512:index_offset + slot]
    other = open(SOURCE, "rb").read()
    cases = [  # id, archive, journal, after (None: unchanged), error, covers, description
        ("valid/padded-index", a, None, a, None, ["R-HIS-2"],
         "steps 0 to 2 with the index padded with spaces to a %d-byte slot; no journal: nothing to roll back" % slot),
        ("valid/appended", b, None, b, None, ["R-HIS-11"],
         "the archive above appended to in place with steps 3 and 4: new members over its end blocks, the new "
         "index in the same slot"),
        ("rollback/members-torn", a[:members_end] + new_body[:len(new_body) // 2], j, a, None, ["R-HIS-13"],
         "killed while writing the new members: the archive ends inside one; rolled back to A"),
        ("rollback/members-whole", a[:members_end] + new_body + bytes(1024), j, a, None, ["R-HIS-13"],
         "killed after the new members and end blocks, before the index: rolled back to A"),
        ("rollback/index-torn", bytes(torn_index), j, a, None, ["R-HIS-13"],
         "killed while writing the index: its first 512 bytes are new, the rest old; rolled back to A"),
        ("rollback/index-written", b, j, a, None, ["R-HIS-13"],
         "killed after the index, before the journal was removed: the append is undone all the same"),
        ("rollback/already", a, j, a, None, ["R-HIS-13"],
         "killed after a rollback, before it removed the journal: rolling back again changes nothing"),
        ("rollback/later-minor", b, rejournal(minor=7), a, None, ["R-HIS-12", "R-HIS-13"],
         "a journal of minor version 7: the layout of major 1 is fixed, so it is read and rolled back"),
        ("journal/magic", b, damaged(1, ord("X")), None, "DCR_E_JOURNAL", ["R-HIS-12"],
         "the journal's magic is wrong"),
        ("journal/short", b, j[:60], None, "DCR_E_JOURNAL", ["R-HIS-12"],
         "the journal has 60 bytes: fewer than its header and check"),
        ("journal/check", b, damaged(80, j[80] ^ 1), None, "DCR_E_JOURNAL", ["R-HIS-12"],
         "a byte of the kept index slot flipped: the check fails"),
        ("journal/major", b, rejournal(major=2), None, "DCR_E_JOURNAL", ["R-HIS-12"],
         "a journal of major version 2: refused and kept, as an apply journal's"),
        ("journal/reserved", b, rejournal(reserved=1), None, "DCR_E_JOURNAL", ["R-HIS-12"],
         "the reserved field is 1"),
        ("journal/length", b, rejournal(fields={"index_length": slot - 512}), None, "DCR_E_JOURNAL", ["R-HIS-12"],
         "index_length says 512 bytes fewer than the journal keeps"),
        ("journal/unaligned", b, rejournal(fields={"members_end": members_end - 1}), None, "DCR_E_JOURNAL",
         ["R-HIS-12"], "members_end is not a multiple of 512"),
        ("journal/offset-wraps", b, rejournal(fields={"index_offset": WRAP, "tail_offset": tail_of(WRAP)}), None,
         "DCR_E_JOURNAL", ["R-HIS-12"], "index_offset is 2^64 - 512: the slot's end is past 2^64, so members_end is "
         "not at least the slot's end (a reader that adds in 64 bits wraps to a small end; tail_offset is the one "
         "that wrapped end would give)"),
        ("journal/tail-offset", b, rejournal(fields={"tail_offset": index_offset + slot + 512}), None,
         "DCR_E_JOURNAL", ["R-HIS-12"], "tail_offset is not the one the rule gives"),
        ("journal/size-below-end", b, rejournal(fields={"archive_size": members_end - 512}), None, "DCR_E_JOURNAL",
         ["R-HIS-12"], "archive_size is less than members_end"),
        ("journal/size-far", b, rejournal(fields={"archive_size": members_end + (1 << 20) + 512}), None,
         "DCR_E_JOURNAL", ["R-HIS-12"], "archive_size is more than 1 MiB past members_end"),
        ("journal/other-archive", other, j, None, "DCR_E_JOURNAL", ["R-HIS-13"],
         "the journal beside another archive (history-v1's valid/tar): the tail digest differs, nothing is written"),
        ("journal/archive-short", a[:members_end - 1024], j, None, "DCR_E_JOURNAL", ["R-HIS-13"],
         "the archive is shorter than the journal's members_end: not its archive"),
    ]
    os.makedirs(OUT, exist_ok=True)
    vectors = []
    for vid, archive, jr, after, error, covers, description in cases:
        name = vid + ".tar"
        os.makedirs(os.path.join(OUT, os.path.dirname(name)), exist_ok=True)
        open(os.path.join(OUT, name), "wb").write(archive)
        v = {"id": vid, "archive": name, "sha256": sha256(archive), "journal": None, "journal_sha256": None,
             "result": "error" if error else ("rolled-back" if jr else "nothing"), "error": error,
             "after_sha256": sha256(after if after is not None else archive), "covers": covers,
             "description": description}
        if jr is not None:
            v["journal"] = name + ".dcr-append"
            v["journal_sha256"] = sha256(jr)
            open(os.path.join(OUT, v["journal"]), "wb").write(jr)
        vectors.append(v)
    index = {"format": "DCR history append journal", "format_version": "1.0", "spec": "SPEC.md §19.6",
             "generator": "tools/mkappendvectors.py (Python tarfile, struct, libxxhash by ctypes, from the frozen "
                          "testvectors/history-v1/valid/tar.tar)",
             "usage": "copy `archive` and `journal` (as ARCHIVE.dcr-append) beside each other; roll back (dcr "
                      "history recover): `result` rolled-back or nothing leaves the archive with after_sha256 and no "
                      "journal, and it verifies (SPEC.md §19); `error` (DCR_E_JOURNAL) leaves both files as they were",
             "layout": {"index_offset": index_offset, "index_length": slot, "members_end": members_end,
                        "archive_size": len(a)},
             "counts": {r: sum(v["result"] == r for v in vectors) for r in ("nothing", "rolled-back", "error")},
             "vectors": vectors}
    with open(os.path.join(OUT, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1, ensure_ascii=False)
        f.write("\n")


main()

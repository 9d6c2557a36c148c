#!/usr/bin/env python3
"""mkcontainervectors.py [OUT_DIR] - writes OUT_DIR/history-containers-v1/ (OUT_DIR:
testvectors): the container cases of SPEC.md §19.1 that history-v1 does not hold —
how a tar may end (without its two zero blocks, inside a member's padding) and how
member names that are not ASCII are stored (a pax `path` record; a zip name with and
without general purpose flag bit 11). Each archive is made from the frozen
testvectors/history-v1/valid/tar.tar, by Python's tarfile and zipfile and by cutting
or patching bytes; the outcomes are §19.1's, and a valid one's steps are those of
history-v1's valid/tar (the same members). The index has history-v1's form, so
tests/history_vectors.sh plays it. Run only to add vectors."""
import hashlib
import io
import json
import os
import struct
import sys
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "testvectors", "history-v1")
NAME = "bundles/st\u00e9p-00000001.dcr"  # a member name that is not ASCII


def source():
    data = open(os.path.join(SOURCE, "valid", "tar.tar"), "rb").read()
    index = json.load(open(os.path.join(SOURCE, "index.json")))
    steps = next(v for v in index["vectors"] if v["id"] == "valid/tar")["steps"]
    t = tarfile.open(fileobj=io.BytesIO(data))
    members = [(m.name, t.extractfile(m).read()) for m in t.getmembers()]
    return data, t.getmembers(), members, steps


def renamed(members):
    """The members with bundle 1 renamed to NAME, in the index as in the container."""
    doc = json.loads(members[0][1])
    old = doc["members"][1]["name"]
    doc["members"][1]["name"] = NAME
    text = (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode()
    return [("dcr-history.json", text)] + [(NAME if n == old else n, b) for n, b in members[1:]]


def tar_of(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 315532800, 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zip_of(members, flag_bit_11=True):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    data = bytearray(buf.getvalue())
    if not flag_bit_11:  # zipfile sets bit 11 for a name that is not ASCII: clear it
        name, cleared = NAME.encode(), 0
        for sig, flags, at in ((b"PK\x03\x04", 6, 30), (b"PK\x01\x02", 8, 46)):
            k = data.find(name)
            while k >= 0:
                h = k - at
                if h >= 0 and data[h:h + 4] == sig:
                    f = struct.unpack_from("<H", data, h + flags)[0]
                    struct.pack_into("<H", data, h + flags, f & ~0x800)
                    cleared += 1
                k = data.find(name, k + 1)
        assert cleared == 2, cleared
    return bytes(data)


def main():
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "testvectors", "history-containers-v1")
    data, infos, members, steps = source()
    last = infos[-1]
    end = last.offset_data + last.size  # the last member's data ends here
    padded = -(-end // 512) * 512
    assert data[padded:] == bytes(len(data) - padded) and len(data) - padded >= 1024
    u = renamed(members)
    vectors = [
        ("valid/tar-without-end-blocks", "tar", data[:padded], None,
         "valid/tar cut after its last member's padding: no end-of-archive blocks"),
        ("valid/tar-one-end-block", "tar", data[:padded + 512], None,
         "valid/tar with one zero block after its last member instead of two or more"),
        ("valid/tar-pax-utf8-name", "tar", tar_of(u), None,
         "bundle 1 named '%s' (not ASCII) in a pax path record and in the index" % NAME),
        ("valid/zip-utf8-name-flagged", "zip", zip_of(u), None,
         "bundle 1 named '%s' in a zip entry with flag bit 11 (UTF-8) set" % NAME),
        ("invalid/tar-cut-in-padding", "tar", data[:end + 3], "DCR_E_TRUNCATED",
         "valid/tar cut 3 bytes into the padding after its last member's data"),
        ("invalid/tar-cut-at-data-end", "tar", data[:end], "DCR_E_TRUNCATED",
         "valid/tar cut where its last member's data ends, before its padding"),
        ("invalid/zip-utf8-name-unflagged", "zip", zip_of(u, flag_bit_11=False), "DCR_E_ARCHIVE",
         "the UTF-8 bytes of '%s' in a zip entry without flag bit 11: read as code page 437, "
         "a name the index does not give" % NAME),
    ]
    entries = []
    for vid, container, blob, error, description in vectors:
        path = vid + (".tar" if container == "tar" else ".zip")
        os.makedirs(os.path.join(out, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(out, path), "wb") as f:
            f.write(blob)
        e = {"id": vid, "archive": path, "container": container,
             "result": "invalid" if error else "valid", "error": error,
             "stage": "members" if error else None,
             "sha256": hashlib.sha256(blob).hexdigest(),
             "covers": ["R-HIS-1"] if "tar" in vid else ["R-HIS-4"], "description": description}
        if not error:
            e["steps"] = steps
        entries.append(e)
    index = {
        "format": "DCR history archive", "format_version": "1.0", "spec": "SPEC.md §19.1",
        "generator": "tools/mkcontainervectors.py (Python tarfile and zipfile, from the frozen "
                     "testvectors/history-v1/valid/tar.tar); run only to add vectors",
        "usage": "as testvectors/history-v1 (tests/history_vectors.sh plays both)",
        "counts": {"valid": sum(not v[3] for v in vectors), "invalid": sum(bool(v[3]) for v in vectors)},
        "vectors": entries,
    }
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("history-containers-v1: %d vectors in %s" % (len(entries), out))


if __name__ == "__main__":
    main()

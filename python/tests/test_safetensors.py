"""dcr.load_safetensors reads a file only as the C reader does (SPEC.md §2.1-§2.2):
on a corpus of hostile safetensors files, built here, it raises dcr.Error exactly
when the dcr CLI rejects the file, with the same code and message, and loads
every file the CLI accepts bit-exactly."""

import json
import os
import struct
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import pytest
from conftest import cli

import dcr

Text = Union[str, bytes]


def T(dtype: Text, shape: Any, begin: Any, end: Any) -> bytes:
    """A tensor object's JSON text; any part may be given as raw text (bytes)."""
    def part(v: Any) -> bytes:
        return v if isinstance(v, bytes) else json.dumps(v).encode()

    return b'{"dtype":' + part(dtype) + b',"shape":' + part(shape) + b',"data_offsets":[' + part(begin) \
        + b"," + part(end) + b"]}"


def st(header: Text, data: bytes = b"", length: Optional[int] = None) -> bytes:
    """A safetensors file: the 8-byte header length (by default the header's),
    the header text and the data region."""
    h = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(h) if length is None else length) + h + data


def obj(*members: Tuple[Text, bytes]) -> bytes:
    """A root object from (key text, value text) pairs; keys go in as written."""
    def key(k: Text) -> bytes:
        return b'"' + (k.encode() if isinstance(k, str) else k) + b'"'

    return b"{" + b",".join(key(k) + b":" + v for k, v in members) + b"}"


D = bytes(range(256)) * 4  # data bytes that differ from tensor to tensor
U1 = T("U8", [1], 0, 1)


def corpus() -> Dict[str, bytes]:
    c: Dict[str, bytes] = {}
    # -- valid files (SPEC.md §2.1): every one must load, bit-exactly
    c["ok-mixed"] = st(obj(("__metadata__", b'{"format":"pt","note":"x"}'), ("w", T("BF16", [2, 3], 0, 12)),
                           ("a", T("F32", [4], 12, 28)), ("s", T("U8", [], 28, 29)), ("e", T("I64", [0, 5], 29, 29)),
                           (b"\xc3\xa9", T("F8_E4M3", [3], 29, 32))) + b"    ", D[:32])
    c["ok-empty"] = st("{}")
    c["ok-metadata-only"] = st('  {"__metadata__":{}}  ')
    c["ok-every-dtype"] = st(obj(*[(n, T(n, [2], 2 * o, 2 * o + 2 * s)) for n, s, o in
                                   [("BOOL", 1, 0), ("I8", 1, 1), ("I16", 2, 2), ("U16", 2, 4), ("I32", 4, 6),
                                    ("U32", 4, 10), ("U64", 8, 14), ("F16", 2, 22), ("F64", 8, 24),
                                    ("F8_E5M2", 1, 32), ("F8_E8M0", 1, 33)]]), b"\0\1" + D[2:68])
    c["ok-packed-dtypes"] = st(obj(("f4", T("F4", [2, 4], 0, 4)), ("f6", T("F6_E2M3", [4], 4, 7))), D[:7])
    c["ok-out-of-order"] = st(obj(("b", T("U8", [3], 4, 7)), ("a", T("F16", [2], 0, 4))), D[:7])
    c["ok-zero-length-shared"] = st(obj(("a", T("F16", [0], 0, 0)), ("b", T("F16", [0], 0, 0)),
                                        ("c", T("F16", [1], 0, 2))), D[:2])
    c["ok-escaped-name"] = st(obj((b'a\\u00e9\\"', U1), (b"\\ud83d\\ude00", T("U8", [1], 1, 2))), D[:2])
    c["ok-escaped-keys"] = st(b'{"\\u005f_metadata__":{"k":"v"},"a":{"\\u0064type":"U8","shape":[1],'
                              b'"data_offsets":[0,1]}}', D[:1])
    c["ok-minus-zero"] = st(obj(("a", T("U8", [2], b"-0", 2))), D[:2])
    c["ok-whitespace"] = st(b'\t\r\n {\n"a" : {"dtype" :"U8",\t"shape":[ 1 ] ,"data_offsets":[0,1]}\r\n}\t ', D[:1])
    c["ok-metadata-last"] = st(obj(("a", U1), ("__metadata__", b'{"a":"","b":"\\u00e9"}')), D[:1])
    c["ok-zero-dim-huge"] = st(obj(("a", T("U8", [0, 2**63 - 1], 0, 0))))
    c["ok-zero-dim-past-numpy"] = st(obj(("a", T("BF16", [2**62, 0], 0, 0)), ("b", U1)), D[:1])
    c["ok-rank-16"] = st(obj(("a", T("U8", [1] * 16, 0, 1))), D[:1])
    c["ok-long-name"] = st(obj(("n" * 4096, U1)), D[:1])
    # -- the file and its header length (rule 1)
    c["empty-file"] = b""
    c["seven-bytes"] = b"\2\0\0\0\0\0\0"
    c["length-only"] = struct.pack("<Q", 0)
    c["length-past-eof"] = st(obj(("a", U1)), D[:1], length=1000)
    c["length-2^64-1"] = st(obj(("a", U1)), D[:1], length=2**64 - 1)
    c["length-over-limit"] = st(b"{}", length=100_000_001)
    c["length-2^63"] = st(b"{}", length=2**63)
    # -- JSON text (§2.2)
    c["not-json"] = st(b"{]")
    c["root-array"] = st(b"[1,2,3]")
    c["root-number"] = st(b"3")
    c["root-string"] = st(b'"a"')
    c["unfinished"] = st(obj(("a", U1))[:-1] + b",", D[:1])
    c["two-roots"] = st(obj(("a", U1)) + b"{}", D[:1])
    c["nul-after-root"] = st(b"{}\0")
    c["garbage-after-root"] = st(obj(("a", U1)) + b" x", D[:1])
    c["bad-byte-after-root"] = st(obj(("a", U1)) + b" \xff", D[:1])
    c["bom"] = st(b"\xef\xbb\xbf{}")
    c["trailing-comma"] = st(b'{"a":' + U1 + b",}", D[:1])
    c["single-quotes"] = st(b"{'a':" + U1 + b"}", D[:1])
    c["raw-control-in-name"] = st(obj((b"a\x01", U1)), D[:1])
    c["raw-nul-in-name"] = st(obj((b"a\x00", U1)), D[:1])
    c["deep-2049"] = st(b'{"a":' + b"[" * 2048 + b"]" * 2048 + b"}")
    c["deep-in-metadata"] = st(b'{"__metadata__":{"k":' + b"[" * 3000 + b"]" * 3000 + b"}}")
    c["deep-100000"] = st(b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}")
    c["deep-unclosed"] = st(b'{"a":' + b"{" * 50000)
    c["nan"] = st(obj(("a", T("U8", b"[NaN]", 0, 1))), D[:1])
    c["infinity"] = st(obj(("a", T("U8", [1], 0, b"Infinity"))), D[:1])
    c["number-1e400"] = st(obj(("a", T("U8", [1], 0, 1)), ("b", T("U8", b"[1e400]", 1, 2))), D[:2])
    c["leading-zero"] = st(obj(("a", T("U8", b"[01]", 0, 1))), D[:1])
    c["hex-number"] = st(obj(("a", T("U8", b"[0x1]", 0, 1))), D[:1])
    c["plus-sign"] = st(obj(("a", T("U8", b"[+1]", 0, 1))), D[:1])
    # -- tensor names and strings that are not UTF-8 (§2.2: DCR_E_NAME in a name)
    c["name-bad-utf8"] = st(obj((b"ab\xff", U1)), D[:1])
    c["name-overlong"] = st(obj((b"\xc0\xaf", U1)), D[:1])
    c["name-encoded-surrogate"] = st(obj((b"\xed\xa0\x80", U1)), D[:1])
    c["name-cut-short"] = st(obj((b"a\xc3", U1)), D[:1])
    c["name-above-10ffff"] = st(obj((b"\xf4\x90\x80\x80", U1)), D[:1])
    c["name-lone-surrogate"] = st(obj((b"\\ud800", U1)), D[:1])
    c["name-lone-low-surrogate"] = st(obj((b"\\udc00x", U1)), D[:1])
    c["name-escaped-nul"] = st(obj((b"a\\u0000b", U1)), D[:1])
    c["name-bad-pair-escape"] = st(obj((b"\\ud800\\uzz00", U1)), D[:1])
    c["name-bad-escape"] = st(obj((b"a\\q", U1)), D[:1])
    c["dtype-bad-utf8"] = st(obj(("a", T(b'"U8\xff"', [1], 0, 1))), D[:1])
    c["metadata-bad-utf8"] = st(obj(("__metadata__", b'{"k":"v\xff"}'), ("a", U1)), D[:1])
    c["key-bad-utf8"] = st(obj(("a", b'{"dtype":"U8","sh\xffpe":[1],"data_offsets":[0,1]}')), D[:1])
    # -- repeated keys
    c["duplicate-name"] = st(obj(("dup", U1), ("dup", T("U8", [1], 1, 2))), D[:2])
    c["duplicate-escaped-name"] = st(obj(("a", U1), (b"\\u0061", T("U8", [1], 1, 2))), D[:2])
    c["duplicate-metadata"] = st(obj(("__metadata__", b"{}"), ("a", U1), (b"\\u005f_metadata__", b"{}")), D[:1])
    c["duplicate-tensor-key"] = st(obj(("a", b'{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}')),
                                   D[:1])
    c["duplicate-metadata-key"] = st(obj(("__metadata__", b'{"k":"a","k":"b"}')))
    # -- __metadata__ (rule 3)
    c["metadata-string"] = st(obj(("__metadata__", b'"pt"')))
    c["metadata-array"] = st(obj(("__metadata__", b'["pt"]')))
    c["metadata-null"] = st(obj(("__metadata__", b"null")))
    c["metadata-number-value"] = st(obj(("__metadata__", b'{"k":1}')))
    c["metadata-object-value"] = st(obj(("__metadata__", b'{"k":{}}'), ("a", U1)), D[:1])
    c["metadata-escaped-number"] = st(obj((b"\\u005f_metadata__", b"1")))
    c["metadata-after-bad-tensor"] = st(obj(("a", b"[]"), ("__metadata__", b"[]")))
    # -- a tensor's object (rule 3.1-3.5)
    c["tensor-array"] = st(obj(("a", b"[]")))
    c["tensor-null"] = st(obj(("a", U1), ("b", b"null")), D[:1])
    c["tensor-string"] = st(obj(("a", b'"U8"')))
    c["no-dtype"] = st(obj(("a", b'{"shape":[16],"data_offsets":[0,64]}')), D[:64])
    c["no-shape"] = st(obj(("a", b'{"dtype":"F32","data_offsets":[0,64]}')), D[:64])
    c["no-offsets"] = st(obj(("a", b'{"dtype":"F32","shape":[16]}')), D[:64])
    c["extra-key"] = st(obj(("a", b'{"dtype":"F32","shape":[16],"data_offsets":[0,64],"x":1}')), D[:64])
    c["empty-name"] = st(obj(("", T("F32", [16], 0, 64))), D[:64])
    c["name-4097-bytes"] = st(obj(("n" * 4097, U1)), D[:1])
    c["dtype-unknown"] = st(obj(("a", T("F31", [16], 0, 64))), D[:64])
    c["dtype-lowercase"] = st(obj(("a", T("bf16", [1], 0, 2))), D[:2])
    c["dtype-empty"] = st(obj(("a", T("", [1], 0, 2))), D[:2])
    c["dtype-number"] = st(obj(("a", T(9, [1], 0, 2))), D[:2])
    c["ok-dtype-escaped"] = st(obj(("a", T(b'"\\u0055\\u0038"', [1], 0, 1))), D[:1])
    c["shape-string"] = st(obj(("a", T("U8", "1", 0, 1))), D[:1])
    c["shape-number"] = st(obj(("a", T("U8", 1, 0, 1))), D[:1])
    c["shape-object"] = st(obj(("a", T("U8", {"n": 1}, 0, 1))), D[:1])
    c["rank-17"] = st(obj(("a", T("U8", [1] * 17, 0, 1))), D[:1])
    c["shape-negative"] = st(obj(("a", T("F32", [-16], 0, 64))), D[:64])
    c["shape-float"] = st(obj(("a", T("F32", b"[16.0]", 0, 64))), D[:64])
    c["shape-exponent"] = st(obj(("a", T("F32", b"[16e0]", 0, 64))), D[:64])
    c["shape-bool"] = st(obj(("a", T("F32", [True], 0, 4))), D[:4])
    c["shape-null"] = st(obj(("a", T("F32", [None], 0, 4))), D[:4])
    c["shape-2^63"] = st(obj(("a", T("U8", [0, 2**63], 0, 0))))
    c["shape-2^64-1"] = st(obj(("a", T("U8", [2**64 - 1], 0, 0))))
    c["shape-10^30"] = st(obj(("a", T("U8", [10**30], 0, 0))))
    c["offsets-three"] = st(obj(("a", b'{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}')), D[:1])
    c["offsets-one"] = st(obj(("a", b'{"dtype":"U8","shape":[1],"data_offsets":[1]}')), D[:1])
    c["offsets-object"] = st(obj(("a", b'{"dtype":"U8","shape":[1],"data_offsets":{"0":1}}')), D[:1])
    c["offsets-strings"] = st(obj(("a", T("U8", [1], "0", "1"))), D[:1])
    c["offsets-negative"] = st(obj(("a", T("U8", [0], -1, -1))))
    c["offsets-float"] = st(obj(("a", T("U8", [1], 0, b"1.0"))), D[:1])
    c["offsets-2^63"] = st(obj(("a", T("U8", [1], 2**63, 2**63 + 1))), D[:1])
    c["offsets-2^64"] = st(obj(("a", T("U8", [1], 2**64 - 1, 2**64))), D[:1])
    c["offsets-begin-after-end"] = st(obj(("a", T("U8", [0], 64, 0)), ("b", T("F32", [16], 0, 64))), D[:64])
    # -- sizes (rule 3.6)
    c["wrong-size"] = st(obj(("x", T("BF16", [3, 4], 0, 20))), D[:20])
    c["wrong-dtype-size"] = st(obj(("x", T("F32", [3], 0, 13))), D[:13])
    c["scalar-two-elements"] = st(obj(("x", T("F32", [], 0, 8))), D[:8])
    c["zero-dim-with-bytes"] = st(obj(("x", T("F32", [0], 0, 4))), D[:4])
    c["shape-overflow"] = st(obj(("x", T("U8", [2**32, 2**32, 2], 0, 0))))
    c["shape-overflow-past-zero"] = st(obj(("x", T("U8", [0, 2**62, 8], 0, 0))))
    c["shape-times-size-overflow"] = st(obj(("x", T("F64", [2**62], 0, 0))))
    c["huge-tensor-past-eof"] = st(obj(("x", T("U8", [2**40], 0, 2**40))), D[:16])
    c["huge-tensor-past-numpy"] = st(obj(("x", T("U8", [2**62], 0, 2**62))), D[:16])
    # -- layout (rule 4)
    c["gap"] = st(obj(("a", T("F32", [16], 0, 64)), ("b", T("U8", [32], 72, 104))), D[:104])
    c["overlap"] = st(obj(("a", T("F32", [16], 0, 64)), ("b", T("U8", [32], 60, 92))), D[:92])
    c["same-bytes-twice"] = st(obj(("a", T("U8", [4], 0, 4)), ("b", T("U8", [4], 0, 4))), D[:4])
    c["first-not-at-0"] = st(obj(("a", T("F32", [16], 8, 72)), ("b", T("U8", [32], 72, 104))), D[:104])
    c["trailing-bytes"] = st(obj(("a", T("F32", [16], 0, 64)), ("b", T("U8", [32], 64, 96))), D[:104])
    c["data-cut-short"] = st(obj(("a", T("F32", [16], 0, 64)), ("b", T("U8", [32], 64, 96))), D[:90])
    c["no-tensors-with-data"] = st(b"{}", b"\0")
    c["metadata-only-with-data"] = st(obj(("__metadata__", b"{}")), D[:8])
    return c


CORPUS = corpus()


def verdicts(paths: List[str]) -> Dict[str, Dict[str, Any]]:
    """What the dcr CLI says of each file: ``dcr id --json`` gives the C reader's
    verdict (its code and message, or a state id), ``dcr inspect --json`` the
    tensors of the files it accepts."""
    out = {}
    for doc in json.loads(cli("id", "--json", *paths, check=False).stdout):
        out[doc["file"]] = doc
        if doc.get("error") is None:
            doc.update(json.loads(cli("inspect", "--json", doc["file"]).stdout))
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Tuple[str, Dict[str, Any]]]:
    d = tmp_path_factory.mktemp("hostile")
    paths = {}
    for name, data in CORPUS.items():
        p = str(d / f"{name}.safetensors")
        with open(p, "wb") as f:
            f.write(data)
        paths[name] = p
    v = verdicts(list(paths.values()))
    return {name: (p, v[p]) for name, p in paths.items()}


def test_corpus_covers_both_verdicts(hostile):
    accepted = [n for n, (_, v) in hostile.items() if v.get("error") is None]
    assert len(hostile) >= 100 and 12 <= len(accepted) < 30
    assert all(n.startswith("ok-") for n in accepted), accepted


@pytest.mark.parametrize("name", list(CORPUS))
def test_load_safetensors_gives_the_c_readers_verdict(hostile, name):
    path, verdict = hostile[name]
    try:
        got = dcr.load_safetensors(path)
    except dcr.Error as e:
        assert verdict.get("error") is not None, f"dcr.Error {e} on a file the C reader accepts"
        assert (e.name, e.message) == (verdict["error"], verdict["message"])
        assert e.detail.file == path
        return
    except Exception as e:
        raise AssertionError(f"raw {type(e).__name__} ({e}), not dcr.Error; the C reader says "
                             f"{verdict.get('error') or 'valid'}") from None
    assert verdict.get("error") is None, f"accepted; the C reader says {verdict['error']}: {verdict['message']}"
    with open(path, "rb") as f:
        data = f.read()
    want = verdict["tensors"]
    assert sorted(got) == sorted(t["name"] for t in want)
    assert got.dtypes == {t["name"]: t["dtype"] for t in want}
    for t in want:
        a = got[t["name"]]
        at = verdict["prefix_length"] + t["offset"]
        assert a.tobytes() == data[at:at + t["byte_length"]], t["name"]
        assert a.flags.writeable
        if t["dtype"] in ("F4", "F6_E2M3", "F6_E3M2") or (name, t["name"]) == ("ok-zero-dim-past-numpy", "a"):
            assert a.dtype == np.uint8 and a.shape == (t["byte_length"],), t["name"]  # its bytes
        else:
            assert a.shape == tuple(t["shape"]) and a.dtype.itemsize * a.size == t["byte_length"], t["name"]


def test_loads_what_save_wrote_in_name_order(tmp_path):
    t = {"b": np.arange(6, dtype=np.float32).reshape(2, 3), "a": np.ones(4, np.uint16), "c": np.zeros((), np.int8)}
    dcr.save_safetensors(t, tmp_path / "t.safetensors", dtypes={"a": "BF16"})
    got = dcr.load_safetensors(tmp_path / "t.safetensors")
    assert list(got) == ["a", "b", "c"] and got.dtypes == {"a": "BF16", "b": "F32", "c": "I8"}
    for k in t:
        assert got[k].dtype == t[k].dtype and got[k].shape == t[k].shape and (got[k] == t[k]).all()
    assert got["a"].base is got["b"].base  # one buffer


def test_missing_file_and_directory_are_the_c_readers_errors(tmp_path):
    p = str(tmp_path / "nope.safetensors")
    v = verdicts([p])[p]
    with pytest.raises(dcr.IOFailure) as e:
        dcr.load_safetensors(p)
    assert (e.value.name, e.value.message, e.value.detail.file) == (v["error"], v["message"], p)
    with pytest.raises(dcr.CheckpointError, match="is a directory") as e:
        dcr.load_safetensors(tmp_path)
    assert e.value.detail.file == str(tmp_path)


def test_limits_and_memory_budget_are_the_readers(tmp_path):
    p = tmp_path / "two.safetensors"
    p.write_bytes(CORPUS["ok-out-of-order"])
    with pytest.raises(dcr.FormatError) as e:
        dcr.load_safetensors(p, limits={"max_tensors": 1})
    assert e.value.name == "DCR_E_LIMIT"
    with pytest.raises(dcr.ArgumentError, match="unknown limit 'tensors'"):
        dcr.load_safetensors(p, limits={"tensors": 1})
    meta = json.dumps({f"k{i}": "" for i in range(20000)}).encode()
    big = tmp_path / "big-header.safetensors"
    big.write_bytes(st(obj(("__metadata__", meta), ("a", U1)), D[:1]))
    p = cli("id", "--memory", "1M", big, check=False)
    assert p.returncode == 3
    with pytest.raises(dcr.OutOfMemory) as e:
        dcr.load_safetensors(big, max_memory=1 << 20)
    assert p.stderr.strip() == f"dcr: {e.value}"
    assert dcr.load_safetensors(big).dtypes == {"a": "U8"}


def test_a_file_that_shrinks_after_its_header_is_read_is_an_io_failure(tmp_path, monkeypatch):
    p = tmp_path / "shrinks.safetensors"
    p.write_bytes(CORPUS["ok-mixed"])
    real = dcr._lib.lib.dcr_checkpoint_open

    def open_then_cut(*args: Any) -> int:
        rc = real(*args)
        os.truncate(p, len(CORPUS["ok-mixed"]) - 10)
        return rc

    monkeypatch.setattr(dcr._lib.lib, "dcr_checkpoint_open", open_then_cut)
    with pytest.raises(dcr.IOFailure, match="it shrank while being read") as e:
        dcr.load_safetensors(p)
    assert e.value.detail.file == str(p) and e.value.detail.offset == len(CORPUS["ok-mixed"]) - 10


def test_a_data_region_too_large_for_memory_is_out_of_memory(tmp_path):
    """An 8 TiB sparse file: the arrays cannot be allocated (DCR_E_NOMEM); only where
    the kernel refuses such an allocation rather than overcommitting it."""
    with open("/proc/sys/vm/overcommit_memory") as f:
        if f.read().strip() == "1":
            pytest.skip("the kernel overcommits every allocation")
    with open("/proc/meminfo") as f:
        kib = sum(int(line.split()[1]) for line in f if line.startswith(("MemTotal:", "SwapTotal:")))
    n = 1 << 43
    if kib * 1024 >= n // 2:
        pytest.skip("this machine has memory for 8 TiB")
    p = tmp_path / "sparse.safetensors"
    p.write_bytes(st(obj(("a", T("U8", [n], 0, n)))))
    try:
        os.truncate(p, os.path.getsize(p) + n)
    except OSError as e:
        pytest.skip(f"no 8 TiB sparse file here: {e}")
    try:
        with pytest.raises(dcr.OutOfMemory, match=f"cannot allocate the {n}-byte data region") as e:
            dcr.load_safetensors(p)
        assert e.value.detail.file == str(p)
    finally:
        p.unlink()

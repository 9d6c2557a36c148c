"""Errors are exceptions carrying the DCR_E_ name, number and detail fields."""

import os

import pytest

import dcr


def test_garbage_is_a_format_error():
    with pytest.raises(dcr.FormatError) as e:
        dcr.Bundle(b"this is not a bundle at all, not even close" * 4)
    err = e.value
    assert isinstance(err, dcr.Error)
    assert err.name == "DCR_E_MAGIC" and err.code == 5
    assert err.detail.name == "DCR_E_MAGIC" and err.detail.code == 5
    assert err.detail.file == "<memory>" and err.detail.chunk is None and err.detail.tensor is None
    assert err.detail.message and err.message == err.detail.message
    assert str(err).startswith("<memory>: DCR_E_MAGIC: ")


def test_truncated_bundle_names_where(pairs, tmp_path):
    base, target = pairs["same"]
    data, _ = dcr.encode_bytes(base, target)
    p = tmp_path / "cut.dcr"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(dcr.FormatError) as e:
        dcr.Bundle(p)
    assert e.value.name == "DCR_E_TRUNCATED" and e.value.code == 4
    assert e.value.detail.file == str(p)


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(OSError) as e:
        dcr.Bundle(tmp_path / "nope.dcr")
    assert isinstance(e.value, dcr.IOFailure) and e.value.name == "DCR_E_IO" and e.value.code == 1
    assert e.value.detail.file == str(tmp_path / "nope.dcr")
    with pytest.raises(dcr.IOFailure):
        dcr.state_id(tmp_path / "nope.safetensors")
    with pytest.raises(dcr.IOFailure):
        dcr.encode(tmp_path / "a", tmp_path / "b", tmp_path / "c.dcr")
    assert not os.path.exists(tmp_path / "c.dcr")


def test_bad_checkpoint(tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(dcr.Error) as e:
        dcr.state_id(p)
    assert e.value.name in ("DCR_E_CHECKPOINT", "DCR_E_MANIFEST") and e.value.code in (12, 23)


def test_detail_fields_of_a_chunk_problem(pairs):
    base, target = pairs["same"]
    b = dcr.Bundle(dcr.encode_bytes(base, target, chunk_size=4096)[0])
    w = dcr.load_safetensors(base)
    c = b.chunks[-1]
    w[c.tensor_name].reshape(-1).view("u1")[c.chunk * 4096] ^= 1
    with pytest.raises(dcr.BaseMismatchError) as e:
        b.apply_to(w, "chunk")
    d = e.value.detail
    assert (d.name, d.code, d.tensor_name, d.chunk) == ("DCR_E_BASE_MISMATCH", 21, c.tensor_name, c.chunk)
    assert d.tensor == c.tensor and d.file is None  # memory: no file


def test_error_names_and_messages():
    assert dcr.error_name(21) == "DCR_E_BASE_MISMATCH"
    assert dcr.error_name(999) == "DCR_E_UNKNOWN"
    assert "base" in dcr.error_message(21)


def test_bad_options():
    with pytest.raises(dcr.ArgumentError, match="format must be"):
        dcr.encode("a", "b", "c", format="2.0")
    with pytest.raises(dcr.ArgumentError, match="unknown limit"):
        dcr.Bundle(b"x", limits={"max_nonsense": 1})


def test_bundle_limits(pairs):
    base, target = pairs["mixed"]
    data, _ = dcr.encode_bytes(base, target)
    with pytest.raises(dcr.Error) as e:
        dcr.Bundle(data, limits={"max_tensors": 2})
    assert e.value.name == "DCR_E_LIMIT"
    assert dcr.Bundle(data, limits={"max_tensors": 100}).info.entry_count == 10

"""Tensors held in memory: state ids, bundles made without files (encode_tensors),
save/load of safetensors, the trainer and worker loops of the README."""

import os
import re

import numpy as np
import pytest
from conftest import ROOT, cli, read

import dcr


def test_save_and_load_round_trip(pairs, tmp_path):
    base, _ = pairs["mixed"]
    w = dcr.load_safetensors(base)
    assert w.dtypes["a.bf16"] == "BF16" and w["a.bf16"].dtype == np.uint16
    dcr.save_safetensors(w, tmp_path / "copy.safetensors")
    assert dcr.state_id(tmp_path / "copy.safetensors") == dcr.state_id(base) == dcr.state_id(w)
    assert cli("id", tmp_path / "copy.safetensors").stdout.split()[0] == dcr.state_id(base)


def test_plain_numpy_dtypes():
    t = {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "y": np.ones(5, np.int64), "z": np.zeros(0, np.uint8)}
    sid = dcr.state_id(t)
    assert re.fullmatch(r"[0-9a-f]{32}", sid)
    t2 = dict(t, x=t["x"].copy())
    assert dcr.state_id(t2) == sid
    t2["x"][0, 0] = 1
    assert dcr.state_id(t2) != sid
    assert dcr.state_id(dict(t, x=t["x"].view(np.int32))) != sid  # the dtype counts
    assert dcr.state_id({"x": dcr.TensorData("F32", (3, 4), t["x"]), "y": t["y"], "z": t["z"]}) == sid
    with pytest.raises(dcr.ArgumentError, match="F32 \\(3, 5\\) is 60 bytes"):
        dcr.state_id({"x": dcr.TensorData("F32", (3, 5), t["x"])})
    with pytest.raises(dcr.ArgumentError, match="has no safetensors name"):
        dcr.state_id({"c": np.zeros(3, np.complex64)})


def test_encode_tensors_is_encoding_the_files(pairs, tmp_path):
    base, target = pairs["mixed"]
    b, t = dcr.load_safetensors(base), dcr.load_safetensors(target)
    data, stats = dcr.encode_tensors(b, t, metadata={"step": 5})
    dcr.save_safetensors(b, tmp_path / "b.safetensors")
    dcr.save_safetensors(t, tmp_path / "t.safetensors")
    cli("encode", tmp_path / "b.safetensors", tmp_path / "t.safetensors", "-o", tmp_path / "cli.dcr",
        "--meta", "step=5")
    assert data == read(str(tmp_path / "cli.dcr"))
    assert stats.bundle_size == len(data)
    bundle = dcr.Bundle(data)
    assert bundle.base_state == dcr.state_id(base) and bundle.target_state == dcr.state_id(target)
    st = dcr.encode_tensors(b, t, tmp_path / "py.dcr", metadata={"step": 5})
    assert read(str(tmp_path / "py.dcr")) == data and st == stats
    w = dcr.load_safetensors(base)
    bundle.apply_to(w)
    assert dcr.state_id(w) == bundle.target_state


def test_encode_tensors_errors_name_the_side():
    with pytest.raises(dcr.Error) as e:
        dcr.encode_tensors({"a": np.zeros(4, np.float32)}, {"b": np.zeros(4, np.float32)})
    assert e.value.name == "DCR_E_ARGUMENT" and "/proc/self/fd" not in str(e.value)


def readme_blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    return re.findall(r"<!-- python-test -->\n```python\n(.*?)```", text, re.S)


def test_readme_python_examples_run(pairs, tmp_path, monkeypatch):
    """The README's Python blocks marked python-test run in README order, each in
    its own namespace, in one directory that starts with a sample pair
    (base.safetensors, target.safetensors) and keeps what each block writes: a
    later block reads what an earlier one made (the signing trainer's checkpoints,
    bundles and keys, read by its worker), as a reader following along would."""
    blocks = readme_blocks()
    assert len(blocks) >= 6
    base, target = pairs["synth"]
    os.symlink(base, tmp_path / "base.safetensors")
    os.symlink(target, tmp_path / "target.safetensors")
    monkeypatch.chdir(tmp_path)
    for i, code in enumerate(blocks):
        exec(compile(code, f"README.md python block {i + 1}", "exec"), {"__name__": f"readme{i}"})

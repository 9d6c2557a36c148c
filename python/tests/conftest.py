"""Shared fixtures: the package from this source tree, the dcr CLI, and small
checkpoint pairs generated for the tests (dcr synth, tests/mkckpt.py)."""

import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
ROOT = os.path.dirname(PYDIR)
sys.path.insert(0, PYDIR)  # the package from the source tree, not an installed one

if "DCR_LIBRARY" not in os.environ and os.path.exists(os.path.join(ROOT, "build", "libdcr.so.1")):
    os.environ["DCR_LIBRARY"] = os.path.join(ROOT, "build", "libdcr.so.1")
CLI = os.path.abspath(os.environ.get("DCR_CLI", os.path.join(ROOT, "build", "dcr")))
MKCKPT = os.path.join(ROOT, "tests", "mkckpt.py")


def cli(*args: Any, check: bool = True) -> subprocess.CompletedProcess:
    """Runs the dcr CLI; returns the completed process (text output)."""
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"dcr {' '.join(map(str, args))}: exit {p.returncode}: {p.stderr}")
    return p


def cli_json(*args: Any) -> Dict[str, Any]:
    return json.loads(cli(*args, check=False).stdout)


def mkpair(spec: Dict[str, Any], base: str, target: str) -> None:
    subprocess.run([sys.executable, MKCKPT, "pair", json.dumps(spec), base, target], check=True)


# A pair with every kind of manifest entry: changed, unchanged, added, removed,
# recoded, reshaped, several dtypes, and tensors large enough for several chunks.
MIXED = {
    "seed": 7,
    "metadata": {"format": "pt"},
    "tensors": [
        {"name": "a.bf16", "dtype": "BF16", "shape": [300, 257], "rate": 0.02},
        {"name": "b.f32", "dtype": "F32", "shape": [5000], "rate": 0.05},
        {"name": "c.same", "dtype": "F16", "shape": [64, 64], "fill": "same-as-base"},
        {"name": "d.new", "dtype": "BF16", "shape": [33, 7], "only": "target"},
        {"name": "e.gone", "dtype": "I32", "shape": [100], "only": "base"},
        {"name": "f.recode", "dtype": "F32", "shape": [40], "target_dtype": "F16", "target_shape": [40]},
        {"name": "g.reshape", "dtype": "BF16", "shape": [16, 8], "target_shape": [8, 16], "rate": 0.1},
        {"name": "h.u8", "dtype": "U8", "shape": [9000], "rate": 0.3},
        {"name": "i.i64", "dtype": "I64", "shape": [1500], "rate": 0.01},
        {"name": "j.zeros", "dtype": "F32", "shape": [2048], "fill": "zeros"},
    ],
}

# Only changes in place: the layout stays, so in-place file apply works.
SAME_LAYOUT = {
    "seed": 3,
    "tensors": [
        {"name": "w1", "dtype": "BF16", "shape": [512, 300], "rate": 0.01},
        {"name": "w2", "dtype": "F32", "shape": [20000], "rate": 0.02},
        {"name": "w3", "dtype": "F16", "shape": [1000], "fill": "same-as-base"},
        {"name": "w4", "dtype": "U8", "shape": [70000], "rate": 0.5},
    ],
}


@pytest.fixture(scope="session")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Tuple[str, str]]:
    """name -> (base, target) paths: "synth" (a realistic BF16 pair from dcr synth,
    4 MiB), "mixed" (MIXED), "same" (SAME_LAYOUT), "raw" (two raw files)."""
    d = tmp_path_factory.mktemp("pairs")
    out = {}
    b, t = str(d / "synth-base.safetensors"), str(d / "synth-target.safetensors")
    cli("synth", b, t, "--size", "4M", "--rate", "0.01", "--seed", "5", "-q")
    out["synth"] = (b, t)
    for name, spec in (("mixed", MIXED), ("same", SAME_LAYOUT)):
        b, t = str(d / f"{name}-base.safetensors"), str(d / f"{name}-target.safetensors")
        mkpair(spec, b, t)
        out[name] = (b, t)
    b, t = str(d / "raw-base.bin"), str(d / "raw-target.bin")
    subprocess.run([sys.executable, MKCKPT, "raw", "300000", "0.01", "9", b, t], check=True)
    out["raw"] = (b, t)
    return out


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def names(tensors: List[Any]) -> List[str]:
    return [t.name for t in tensors]

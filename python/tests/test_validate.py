"""validate() reports exactly what `dcr validate --json` reports, on every test
vector of testvectors/ (v1, v1.1, v1.2, v1.3: valid, and invalid at every stage) and on
bundles checked against a wrong base or target."""

import json
import os

import pytest
from conftest import ROOT, cli_json

import dcr

INDEXES = ["index.json", "v1.1/index.json", "v1.2/index.json", "v1.3/index.json"]


def vectors():
    out = []
    for rel in INDEXES:
        path = os.path.join(ROOT, "testvectors", rel)
        with open(path) as f:
            index = json.load(f)
        root = os.path.join(os.path.dirname(path), index.get("root", "."))
        for v in index["vectors"]:
            files = {k: os.path.join(root, f["path"]) for k, f in v["files"].items()}
            out.append(pytest.param(files, v, id=f"{os.path.dirname(rel) or 'v1'}/{v['id']}"))
    return out


def cli_errors(bundle, base=None, target=None):
    args = ["validate", "--json", bundle]
    if base:
        args += ["--base", base]
    if target:
        args += ["--target", target]
    return cli_json(*args)


@pytest.mark.parametrize("files,vector", vectors())
def test_validate_is_dcr_validate(files, vector):
    bundle, base, target = files["bundle"], files.get("base"), files.get("target")
    want = cli_errors(bundle, base, target)
    got = [p.to_dict() for p in dcr.validate(bundle, base, target)]
    assert got == want["errors"]
    assert (not got) == want["valid"] == (vector["result"] == "valid")
    if vector["result"] == "invalid" and vector.get("stage") in ("structure", "chunks"):
        assert got[0]["code"] == vector["error"] and got[0]["stage"] == vector["stage"]
    # from memory too: the same problems, named "<memory>" instead of the path
    with open(bundle, "rb") as f:
        data = f.read()
    mem = [p.to_dict() for p in dcr.validate(data, base, target)]
    assert [(p["code"], p["stage"], p["offset"], p["tensor"], p["chunk"]) for p in mem] == [
        (p["code"], p["stage"], p["offset"], p["tensor"], p["chunk"]) for p in got]


def test_every_stage_is_covered():
    stages = set()
    for p in vectors():
        files, v = p.values
        if v["result"] == "invalid":
            stages.add(v.get("stage"))
    assert {"structure", "chunks", "target"} <= stages


def test_multiple_bad_chunks_all_reported():
    found = 0
    for p in vectors():
        files, v = p.values
        if "multiple-errors" in v.get("flags", []):
            probs = dcr.validate(files["bundle"])
            assert len(probs) >= 2 and {x.stage for x in probs} == {"chunks"}
            found += 1
    assert found


def test_wrong_base_and_target(pairs, tmp_path):
    base, target = pairs["synth"]
    other_base, other_target = pairs["same"]
    bundle = str(tmp_path / "s.dcr")
    dcr.encode(base, target, bundle)
    for b, t in ((base, target), (other_base, None), (None, other_target), (target, base), (other_base, other_target)):
        want = cli_errors(bundle, b, t)
        with dcr.Bundle(bundle) as bd:
            got = [p.to_dict() for p in bd.validate(b, t)]
        assert got == want["errors"], (b, t)
    with dcr.Bundle(bundle) as bd:
        probs = bd.validate(other_base)
    assert probs[0].code == "DCR_E_BASE_MISMATCH" and probs[0].stage == "base"

"""dcr.squash (SPEC.md §10.4) over libdcr: a run's bundles (tests/mkchain.py)
squashed into one that applies to the first step and gives the last byte for
byte, counting what a direct encode counts; a chain with DELTA_CLASSED chunks is
refused without the base; chains out of order and wrong bases are refused."""

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, read

import dcr

STEPS = 5


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """Checkpoints step-0000 .. step-0005; bundles of format 1.3 (DELTA_BANDED
    chunks allowed), 1.2 (DELTA_CLASSED) and 1.1 between them."""
    d = tmp_path_factory.mktemp("squash")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "mkchain.py"), str(d), str(STEPS),
                    "--bytes", "131072", "--seed", "11"], check=True)
    cks = [str(d / f"step-{i:04d}.safetensors") for i in range(STEPS + 1)]
    out = {}
    for fmt in ("1.3", "1.2", "1.1"):
        paths, classed = [], 0
        for i in range(1, STEPS + 1):
            p = str(d / f"b{fmt}-{i}.dcr")
            st = dcr.encode(cks[i - 1], cks[i], p, chunk_size=16384, format=fmt, metadata={"step": i})
            classed += st.chunks_by_encoding["DELTA_CLASSED"] + st.chunks_by_encoding["DELTA_BANDED"]
            paths.append(p)
        out[fmt] = (paths, classed)
    return d, cks, out


def applied(bundle, base, out):
    with dcr.Bundle(bundle) as b:
        b.apply_file(base, out)
    return read(out)


@pytest.mark.parametrize("fmt", ["1.3", "1.2", "1.1"])
def test_squash_with_base_is_the_chain(chain, tmp_path, fmt):
    _, cks, by = chain
    bundles, _ = by[fmt]
    sq = str(tmp_path / "sq.dcr")
    calls = []
    stats = dcr.squash(bundles, sq, base=cks[0], progress=lambda done, total: calls.append((done, total)))
    assert applied(sq, cks[0], str(tmp_path / "out.safetensors")) == read(cks[-1])
    direct = dcr.encode(cks[0], cks[-1], str(tmp_path / "direct.dcr"), chunk_size=16384, format=fmt)
    assert (stats.changed_elements, stats.changed_chunks) == (direct.changed_elements, direct.changed_chunks)
    assert stats.bundle_size == os.path.getsize(sq)
    assert calls and calls[-1][0] == calls[-1][1]
    with dcr.Bundle(sq) as b:
        assert b.base_state == dcr.state_id(cks[0]) and b.target_state == dcr.state_id(cks[-1])
        assert b.metadata == {"step": str(STEPS)}  # the last bundle's


def encodings(bundle):
    """{tensor name: {encoding: chunks}} of a bundle, from dcr inspect --json."""
    doc = json.loads(subprocess.run([os.path.join(ROOT, "build", "dcr"), "inspect", "--json", bundle],
                                    capture_output=True, check=True).stdout)
    return {t["name"]: t.get("encodings") or {} for t in doc["tensors"]}


def test_sliced_tensors_stay_unranked(chain, tmp_path):
    """squash(sliced=): the named tensors' chunks are rebuilt without ranks (none
    DELTA_BANDED), the others keep theirs; the result is exact; a sliced squash
    of ranked chunks needs the base; a pattern that matches nothing is refused."""
    _, cks, by = chain
    bundles, _ = by["1.3"]
    ranked = {n for n, e in encodings(bundles[0]).items() if "DELTA_BANDED" in e}
    assert len(ranked) >= 2, "the chain needs two tensors with DELTA_BANDED chunks"
    pick = sorted(ranked)[0]
    plain, sq = str(tmp_path / "plain.dcr"), str(tmp_path / "sliced.dcr")
    dcr.squash(bundles, plain, base=cks[0])
    dcr.squash(bundles, sq, base=cks[0], sliced=[pick])
    got, before = encodings(sq), encodings(plain)
    assert "DELTA_BANDED" in before[pick] and "DELTA_BANDED" not in got[pick]
    assert any("DELTA_BANDED" in got[n] for n in ranked - {pick})
    assert applied(sq, cks[0], str(tmp_path / "out.safetensors")) == read(cks[-1])
    with pytest.raises(dcr.ArgumentError, match="base"):
        dcr.squash(bundles[:1], str(tmp_path / "x.dcr"), sliced=[pick])
    with pytest.raises(dcr.ArgumentError, match="matches no tensor"):
        dcr.squash(bundles, str(tmp_path / "x.dcr"), base=cks[0], sliced=["no.such.*"])


@pytest.mark.parametrize("fmt", ["1.3", "1.2"])
def test_delta_classed_chain_needs_the_base(chain, tmp_path, fmt):
    _, cks, by = chain
    bundles, classed = by[fmt]
    assert classed > 0, "the chain must have DELTA_BANDED or DELTA_CLASSED chunks for this test"
    sq = str(tmp_path / "sq.dcr")
    with pytest.raises(dcr.ArgumentError) as e:
        dcr.squash(bundles, sq)
    assert e.value.name == "DCR_E_ARGUMENT" and "base" in e.value.message
    assert not os.path.exists(sq)


def test_refused_chains(chain, tmp_path):
    _, cks, by = chain
    bundles, _ = by["1.1"]
    sq = str(tmp_path / "sq.dcr")
    with pytest.raises(dcr.BaseMismatchError) as e:
        dcr.squash([bundles[0], bundles[2]], sq, base=cks[0])  # a step left out
    assert e.value.name == "DCR_E_BASE_MISMATCH"
    with pytest.raises(dcr.BaseMismatchError):
        dcr.squash(bundles, sq, base=cks[1])  # not the first bundle's base
    assert not os.path.exists(sq)
    with pytest.raises(dcr.ArgumentError):
        dcr.squash(bundles, bundles[-1], base=cks[0])  # the output is an input
    with pytest.raises(dcr.IOFailure):
        dcr.squash([str(tmp_path / "missing.dcr")], sq)
    with pytest.raises(dcr.ArgumentError):
        dcr.squash(bundles, sq, format="2.0")


def test_replace_false_and_cancel(chain, tmp_path):
    _, cks, by = chain
    bundles, _ = by["1.2"]
    out = tmp_path / "exists.dcr"
    out.write_bytes(b"mine")
    with pytest.raises(dcr.Error):
        dcr.squash(bundles, str(out), base=cks[0], replace=False)
    assert out.read_bytes() == b"mine"
    cancel = dcr.Cancel()
    cancel.set()
    with pytest.raises(dcr.Cancelled):
        dcr.squash(bundles, str(tmp_path / "c.dcr"), base=cks[0], cancel=cancel)
    assert not os.path.exists(tmp_path / "c.dcr")

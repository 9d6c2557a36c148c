"""Round trips against the CLI on generated data: bundles made here and by `dcr
encode` are the same bytes and apply the same way, in memory and to files, at
every verification level; descriptions agree with `dcr inspect --json`."""

import os
import struct
import sys

import pytest
from conftest import cli, cli_json, read

import dcr

LEVELS = ["full", "chunk", "none"]
PAIRS = ["synth", "mixed", "same"]


def file_tensors(path):
    return dcr.load_safetensors(path)


def assert_same(got, want):
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].tobytes() == want[k].tobytes(), k


@pytest.mark.parametrize("pair", PAIRS + ["raw"])
def test_encode_is_the_cli_bytes(pairs, tmp_path, pair):
    base, target = pairs[pair]
    raw = ["--raw"] if pair == "raw" else []
    cli("encode", base, target, "-o", tmp_path / "cli.dcr", "--meta", "step=12", "--chunk-size", "64K", *raw)
    stats = dcr.encode(base, target, tmp_path / "py.dcr", metadata={"step": 12}, chunk_size=65536,
                       raw=pair == "raw", threads=1)
    assert read(str(tmp_path / "py.dcr")) == read(str(tmp_path / "cli.dcr"))
    assert stats.bundle_size == os.path.getsize(tmp_path / "py.dcr")
    data, stats2 = dcr.encode_bytes(base, target, metadata={"step": "12"}, chunk_size=65536, raw=pair == "raw")
    assert data == read(str(tmp_path / "cli.dcr")) and stats2 == stats
    with open(tmp_path / "stream.dcr", "wb") as f:
        dcr.encode(base, target, f, metadata={"step": 12}, chunk_size=65536, raw=pair == "raw")
    assert read(str(tmp_path / "stream.dcr")) == data


@pytest.mark.parametrize("pair", PAIRS)
def test_python_bundle_applies_with_the_cli(pairs, tmp_path, pair):
    base, target = pairs[pair]
    dcr.encode(base, target, tmp_path / "s.dcr")
    cli("apply", base, tmp_path / "s.dcr", "-o", tmp_path / "out.safetensors")
    assert read(str(tmp_path / "out.safetensors")) == read(target)


@pytest.mark.parametrize("pair", PAIRS)
def test_cli_bundle_applies_to_files(pairs, tmp_path, pair):
    base, target = pairs[pair]
    cli("encode", base, target, "-o", tmp_path / "s.dcr", "--chunk-size", "4K")
    b = dcr.Bundle(str(tmp_path / "s.dcr"))
    b.apply_file(base, tmp_path / "out.safetensors", sync=False)
    assert read(str(tmp_path / "out.safetensors")) == read(target)
    b.apply_file(target, tmp_path / "again.safetensors")  # re-applying is a no-op
    assert read(str(tmp_path / "again.safetensors")) == read(target)
    b.apply_file(base, None)  # checks, writes nothing
    b.check_target(target)
    with pytest.raises(dcr.TargetMismatchError):
        b.check_target(base)
    with pytest.raises(dcr.IOFailure) as e:
        b.apply_file(base, tmp_path / "out.safetensors", replace=False)
    assert e.value.name == "DCR_E_IO" and e.value.code == 1
    with pytest.raises(dcr.Error) as e:
        b.apply_file(base, tmp_path / "capped.safetensors", max_target_size=100)
    assert e.value.name == "DCR_E_LIMIT"
    assert not os.path.exists(tmp_path / "capped.safetensors")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("source", ["file", "bytes"])
def test_apply_to_every_level(pairs, tmp_path, pair, level, source):
    base, target = pairs[pair]
    cli("encode", base, target, "-o", tmp_path / "s.dcr", "--chunk-size", "8K")
    b = dcr.Bundle(str(tmp_path / "s.dcr") if source == "file" else read(str(tmp_path / "s.dcr")))
    w = file_tensors(base)
    st = b.apply_to(w, level)
    assert not st.already_target and st.chunks_patched == b.info.chunk_count
    assert_same(w, file_tensors(target))
    assert dcr.state_id(w) == b.target_state == cli("id", target).stdout.split()[0]
    if pair == "mixed":
        assert st.added == ("d.new",) and st.replaced == ("f.recode",) and st.removed == ("e.gone",)
        assert st.reshaped == ("g.reshape",) and w["g.reshape"].shape == (8, 16)
    if level == "full":
        assert st.bytes_checked > 0
    if level == "none":
        assert st.bytes_checked == 0
    # the same bundle again: recognized, nothing written
    again = b.apply_to(w, level)
    assert again.already_target and again.bytes_written == 0 and again.chunks_patched == 0
    assert_same(w, file_tensors(target))


@pytest.mark.parametrize("level", LEVELS)
def test_apply_in_place(pairs, tmp_path, level):
    base, target = pairs["same"]
    cli("encode", base, target, "-o", tmp_path / "s.dcr", "--chunk-size", "4K")
    work = tmp_path / "work.safetensors"
    work.write_bytes(read(base))
    b = dcr.Bundle(str(tmp_path / "s.dcr"))
    st = b.apply_in_place(work, verify=level, sync=False)
    assert read(str(work)) == read(target) and st.chunks_patched > 0 and st.journal_bytes > 0
    st = b.apply_in_place(work, verify=level)
    assert st.already_target and read(str(work)) == read(target)
    assert not os.path.exists(str(work) + ".dcr-journal")


def test_apply_in_place_directory(pairs, tmp_path):
    """SPEC.md §18.6 through Python: a model directory patched in place equals the
    copy apply's output file for file; again, already at the target."""
    import filecmp
    import shutil
    import subprocess
    import sys
    mkset = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "mkset.py")
    base, target = pairs["same"]
    subprocess.run([sys.executable, mkset, base, str(tmp_path / "B"), "--shards", "2"], check=True)
    subprocess.run([sys.executable, mkset, target, str(tmp_path / "T"), "--shards", "2",
                    "--config", '{"step": 2}'], check=True)
    cli("encode", tmp_path / "B", tmp_path / "T", "-o", tmp_path / "d.dcr", "-q")
    shutil.copytree(tmp_path / "B", tmp_path / "W")
    b = dcr.Bundle(str(tmp_path / "d.dcr"))
    st = b.apply_in_place(tmp_path / "W", sync=False)
    assert not st.already_target and st.bytes_written > 0 and st.journal_bytes > 0
    cmp = filecmp.dircmp(str(tmp_path / "W"), str(tmp_path / "T"))
    assert not cmp.left_only and not cmp.right_only and not cmp.diff_files
    for f in os.listdir(str(tmp_path / "T")):
        if os.path.isfile(str(tmp_path / "T" / f)):
            assert read(str(tmp_path / "W" / f)) == read(str(tmp_path / "T" / f))
    assert b.apply_in_place(tmp_path / "W").already_target


def test_in_place_damaged_journal_kept_then_salvaged(tmp_path):
    """SPEC.md §18.4 through Python: a damaged journal beside a part-written file
    (testvectors/journal-v1.1) stops the apply with DCR_E_JOURNAL, changing
    nothing; salvage=True finishes it."""
    jv = os.path.join(os.path.dirname(__file__), "..", "..", "testvectors", "journal-v1.1")
    before, after = (os.path.join(jv, "ckpt", n) for n in ("published-before.bin", "published-after.bin"))
    dcr.encode(before, after, tmp_path / "j.dcr")
    work = tmp_path / "w.safetensors"
    journal = tmp_path / "w.safetensors.dcr-journal"
    mid = read(os.path.join(jv, "ckpt", "part-written-before.bin"))
    damaged = read(os.path.join(jv, "kept", "damaged-part-written.dcr-journal"))
    work.write_bytes(mid)
    journal.write_bytes(damaged)
    b = dcr.Bundle(tmp_path / "j.dcr")
    with pytest.raises(dcr.Error) as e:
        b.apply_in_place(work, sync=False)
    assert e.value.name == "DCR_E_JOURNAL" and read(str(work)) == mid and read(str(journal)) == damaged
    st = b.apply_in_place(work, sync=False, salvage=True)
    assert st.salvaged and st.journal_discarded and read(str(work)) == read(after)
    assert not journal.exists()


def test_in_place_refuses_a_new_layout(pairs, tmp_path):
    base, target = pairs["mixed"]
    dcr.encode(base, target, tmp_path / "s.dcr")
    work = tmp_path / "w.safetensors"
    work.write_bytes(read(base))
    with pytest.raises(dcr.ArgumentError) as e:
        dcr.Bundle(tmp_path / "s.dcr").apply_in_place(work)
    assert e.value.code == 3 and read(str(work)) == read(base)


@pytest.mark.parametrize("pair", PAIRS)
def test_description_is_dcr_inspect(pairs, tmp_path, pair):
    base, target = pairs[pair]
    cli("encode", base, target, "-o", tmp_path / "s.dcr", "--meta", "run=r1", "--meta", "step=9")
    j = cli_json("inspect", tmp_path / "s.dcr", "--json", "-v")
    with dcr.Bundle(tmp_path / "s.dcr") as b:
        i = b.info
        assert f"{i.format_version[0]}.{i.format_version[1]}" == j["format_version"]
        for k in ("bundle_size", "kind", "chunk_size", "target_size", "prefix_length", "chunk_count",
                  "base_state", "target_state"):
            assert getattr(i, k) == j[k], k
        assert b.metadata == j["meta"] == {"run": "r1", "step": "9"}
        assert [(s.type, s.offset, s.length, s.critical, s.compression) for s in b.sections] == [
            (s["type"], s["offset"], s["length"], s["critical"], s["compression"]) for s in j["sections"]]
        want = {t["name"]: t for t in j["tensors"]}
        assert set(want) <= {t.name for t in b.tensors}
        for t in b.tensors:
            if t.name not in want:  # inspect leaves out nothing with -v
                pytest.fail(f"{t.name} missing from dcr inspect -v")
            w = want[t.name]
            assert t.status == w["status"], t.name
            assert t.changed_chunks == w["changed_chunks"]
            for side in ("base", "target"):
                s = getattr(t, side)
                if s is None:
                    assert w.get(side) is None
                    continue
                assert (s.dtype, list(s.shape), s.byte_length, s.hash) == (
                    w[side]["dtype"], w[side]["shape"], w[side]["byte_length"], w[side]["hash"])
        assert sum(c.count for c in b.chunks) == j["totals"]["changed_elements"]


@pytest.mark.parametrize("pair", PAIRS + ["raw"])
def test_state_id_is_dcr_id(pairs, pair):
    for path in pairs[pair]:
        raw = pair == "raw"
        want = cli("id", *(["--raw"] if raw else []), path).stdout.split()[0]
        assert dcr.state_id(path, raw=raw) == want
        if not raw:
            assert dcr.state_id(file_tensors(path)) == want


def test_metadata_is_text_and_step_a_number(pairs, tmp_path):
    # The format stores metadata as text (SPEC.md §6.4): an int goes in as its
    # decimal digits and comes back as a str; Bundle.step reads the standard key.
    base, target = pairs["synth"]
    dcr.encode(base, target, tmp_path / "s.dcr", metadata={"step": 7, "run_id": "r"})
    with dcr.Bundle(tmp_path / "s.dcr") as b:
        assert b.metadata == {"run_id": "r", "step": "7"} and b.step == 7
    dcr.encode(base, target, tmp_path / "n.dcr")
    with dcr.Bundle(tmp_path / "n.dcr") as b:
        assert b.metadata == {} and b.step is None
    for bad in (7.0, True, None, [7]):
        with pytest.raises(dcr.ArgumentError, match="metadata is text"):
            dcr.encode(base, target, tmp_path / "x.dcr", metadata={"note": bad})
    assert not os.path.exists(tmp_path / "x.dcr")
    dcr.encode(base, target, tmp_path / "big.dcr", metadata={"step": 2**53 - 1})
    with dcr.Bundle(tmp_path / "big.dcr") as b:
        assert b.step == 2**53 - 1
    with pytest.raises(dcr.Error, match="DCR_E_ARGUMENT"):  # the library checks what it writes
        dcr.encode(base, target, tmp_path / "y.dcr", metadata={"step": "07"})
    # a bundle that another writer gave a step the standard does not allow is
    # valid (metadata never changes what it does), but its step is refused
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
    import mkresourcevectors as mk  # writes bundles from SPEC.md alone
    for value in (b"07", b"-1", b"9007199254740992", b"\xd9\xa3"):
        pair = struct.pack("<H", 4) + b"step" + struct.pack("<I", len(value)) + value
        data = mk.empty_bundle([mk.section(b"META", struct.pack("<I", 1) + pair, critical=False)])
        with dcr.Bundle(data) as b:
            assert b.metadata == {"step": value.decode()}
            with pytest.raises(dcr.ArgumentError, match="step metadata"):
                b.step

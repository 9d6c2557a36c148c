"""History archives (SPEC.md §19) from Python, dcr.history over libdcr: a run's
checkpoints (tests/mkchain.py, and the same laid out as model directories by
tests/mkset.py) kept as a keyframe and bundles; every step extracted byte for
byte, by number and by state id, from a path and from a URL; a .tar appended to
in place; journals rolled back or refused; wrong bases and missing files refused
with the library's error names."""

import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading

import pytest
from conftest import ROOT, read
from test_http import Handler

import dcr

STEPS = 6
VECTORS = os.path.join(ROOT, "testvectors", "history-append-v1")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run's checkpoints step-0000 .. step-0006 and the bundles b1 .. b6
    between them (with step and run_id metadata)."""
    d = tmp_path_factory.mktemp("run")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "mkchain.py"), str(d / "ck"), str(STEPS),
                    "--bytes", "65536", "--seed", "3"], check=True)
    cks = [str(d / "ck" / f"step-{i:04d}.safetensors") for i in range(STEPS + 1)]
    bundles = []
    for i in range(1, STEPS + 1):
        b = str(d / f"b{i}.dcr")
        dcr.encode(cks[i - 1], cks[i], b, metadata={"step": i, "run_id": "run-a"}, chunk_size=16384)
        bundles.append(b)
    return d, cks, bundles


@pytest.fixture(scope="module")
def dir_run(run):
    """The same run as model directories (two shards, config and tokenizer files)
    and the bundles between them."""
    d, cks, _ = run
    dirs, bundles = [], []
    for i, ck in enumerate(cks):
        out = str(d / f"model-{i}")
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "mkset.py"), ck, out, "--shards", "2"],
                       check=True)
        dirs.append(out)
        if i:
            b = str(d / f"set{i}.dcr")
            dcr.encode(dirs[i - 1], out, b, metadata={"step": i})
            bundles.append(b)
    return dirs, bundles


def files_of(top):
    """Every file under top, by path relative to it, with its bytes."""
    out = {}
    for where, _, names in os.walk(top):
        for n in names:
            p = os.path.join(where, n)
            out[os.path.relpath(p, top)] = read(p)
    return out


def test_create_append_list_verify_extract_every_step(run, tmp_path):
    _, cks, bundles = run
    arc = str(tmp_path / "run.tar")
    idx = dcr.history.create(arc, keyframe=cks[0], bundles=bundles[:3], keyframe_every=4)
    assert [m.step for m in idx.members] == [0, 1, 2, 3]
    idx = dcr.history.append(arc, bundles[3:])
    assert idx == dcr.history.list(arc)
    assert idx.container == "tar" and idx.version >= (1, 0) and idx.run_id == "run-a"
    assert (idx.first_step, idx.last_step, idx.keyframe_every) == (0, STEPS, 4)
    kinds = [(m.kind, m.step) for m in idx.members]
    assert kinds[0] == ("keyframe", 0) and ("keyframe", 4) in kinds  # built by keyframe_every
    assert [s for k, s in kinds if k == "bundle"] == list(range(1, STEPS + 1))
    state = {0: dcr.state_id(cks[0])}
    for m in idx.members:
        assert m.state == dcr.state_id(cks[m.step])
        assert m.size > 0 and len(m.digest) == 32 and not m.directory and m.file_count == 0
        if m.kind == "bundle":
            assert m.base_state == state[m.step - 1]
            assert m.metadata["step"] == str(m.step) and m.metadata["run_id"] == "run-a"
            assert m.size == os.path.getsize(bundles[m.step - 1])
        else:
            assert m.base_state is None
        state[m.step] = m.state
    assert dcr.history.verify(arc) == idx
    for s in range(STEPS + 1):
        out = str(tmp_path / f"s{s}.safetensors")
        assert dcr.history.extract(arc, step=s, out=out) == s
        assert read(out) == read(cks[s]), s


@pytest.mark.parametrize("suffix", [".tar.zst", ".zip"])
def test_other_containers_from_the_suffix(run, tmp_path, suffix):
    _, cks, bundles = run
    arc = str(tmp_path / f"run{suffix}")
    assert dcr.history.create(arc, cks[0], bundles[:2]).container == suffix[1:]
    dcr.history.append(arc, bundles[2:4])
    out = str(tmp_path / "s4.safetensors")
    dcr.history.extract(arc, step=4, out=out)
    assert read(out) == read(cks[4])


def test_extract_by_state(run, tmp_path):
    _, cks, bundles = run
    arc = str(tmp_path / "run.zip")
    dcr.history.create(arc, cks[0], bundles)
    want = dcr.state_id(cks[5])
    out = str(tmp_path / "s.safetensors")
    assert dcr.history.extract(arc, state=want, out=out) == 5
    assert read(out) == read(cks[5])
    with dcr.history.Archive(arc) as a:
        assert a.step_of(bytes.fromhex(dcr.state_id(cks[2]))) == 2
        with pytest.raises(dcr.ArgumentError):
            a.step_of("00" * 16)  # no step has it
        with pytest.raises(dcr.ArgumentError):
            a.extract(out, step=1, state=want)  # one of the two
        with pytest.raises(dcr.ArgumentError):
            a.step_of("abc")


def test_directory_keyframe(dir_run, tmp_path):
    dirs, bundles = dir_run
    arc = str(tmp_path / "sets.tar")
    dcr.history.create(arc, dirs[0], bundles[:2])
    idx = dcr.history.append(arc, bundles[2:])
    key = idx.members[0]
    assert key.kind == "keyframe" and key.directory and key.digest is None
    assert key.file_count == len(files_of(dirs[0]))
    assert key.size == sum(len(b) for b in files_of(dirs[0]).values())
    dcr.history.verify(arc)
    for s in range(len(dirs)):
        out = str(tmp_path / f"out{s}")
        dcr.history.extract(arc, step=s, out=out)
        assert files_of(out) == files_of(dirs[s]), s


def test_a_tar_is_appended_in_place(run, tmp_path):
    _, cks, bundles = run
    arc = str(tmp_path / "ip.tar")
    dcr.history.create(arc, cks[0], bundles[:2])
    before = read(arc)
    inode = os.stat(arc).st_ino
    dcr.history.append(arc, bundles[2:4])
    assert os.stat(arc).st_ino == inode, "rewritten, not appended to in place"
    after = read(arc)
    with tarfile.open(arc) as t:
        old = [m for m in t.getmembers()[1:] if m.offset_data + m.size <= len(before) - 1024]
        assert [m.name for m in t.getmembers()[1:]] == [m.name for m in dcr.history.list(arc).members]
    assert len(old) == 3  # the keyframe, b1 and b2 stay where they were, their bytes untouched
    for m in old:
        assert after[m.offset:m.offset_data + m.size] == before[m.offset:m.offset_data + m.size], m.name
    assert not os.path.exists(arc + ".dcr-append")
    assert dcr.history.verify(arc).last_step == 4


def test_an_archive_is_read_once_per_open(run, tmp_path):
    _, cks, bundles = run
    arc = str(tmp_path / "once.tar")
    dcr.history.create(arc, cks[0], bundles[:1])
    with dcr.history.Archive(arc) as a:
        a.verify()
        with pytest.raises(dcr.ArgumentError, match="open it again"):
            a.extract(str(tmp_path / "x"), step=1)


def test_recover_rolls_a_torn_append_back(tmp_path):
    """The journal vector of an append killed while writing its members: recover
    gives back the archive as it was, byte for byte; a second finds nothing."""
    with open(os.path.join(VECTORS, "index.json")) as f:
        v = next(x for x in json.load(f)["vectors"] if x["id"] == "rollback/members-torn")
    arc = str(tmp_path / "a.tar")
    shutil.copy(os.path.join(VECTORS, v["archive"]), arc)
    shutil.copy(os.path.join(VECTORS, v["journal"]), arc + ".dcr-append")
    assert dcr.history.recover(arc) is True
    assert hashlib.sha256(read(arc)).hexdigest() == v["after_sha256"]
    assert not os.path.exists(arc + ".dcr-append")
    assert dcr.history.recover(arc) is False
    dcr.history.verify(arc)


def test_a_damaged_journal_is_refused_and_kept(run, tmp_path):
    _, cks, bundles = run
    arc = str(tmp_path / "jr.tar")
    dcr.history.create(arc, cks[0], bundles[:2])
    journal = arc + ".dcr-append"
    garbage = b"not a journal at all, long enough to have a header and a check, really"
    with open(journal, "wb") as f:
        f.write(garbage)
    before = read(arc)
    for call in (lambda: dcr.history.recover(arc), lambda: dcr.history.list(arc),
                 lambda: dcr.history.verify(arc), lambda: dcr.history.append(arc, bundles[2:3])):
        with pytest.raises(dcr.Error) as e:
            call()
        assert e.value.name == "DCR_E_JOURNAL"
        assert read(arc) == before and read(journal) == garbage


def test_wrong_base_and_missing_files(run, tmp_path):
    _, cks, bundles = run
    arc = str(tmp_path / "w.tar")
    dcr.history.create(arc, cks[0], bundles[:2])
    before = read(arc)
    with pytest.raises(dcr.BaseMismatchError) as e:
        dcr.history.append(arc, [bundles[3]])  # step 4's bundle after step 2
    assert e.value.name == "DCR_E_BASE_MISMATCH"
    assert read(arc) == before
    with pytest.raises(dcr.BaseMismatchError):
        dcr.history.create(str(tmp_path / "x.tar"), cks[1], bundles[:1])
    assert not os.path.exists(tmp_path / "x.tar")
    with pytest.raises(dcr.IOFailure):
        dcr.history.list(str(tmp_path / "missing.tar"))
    with pytest.raises(dcr.Error):
        dcr.history.append(arc, [str(tmp_path / "missing.dcr")])
    with pytest.raises(dcr.Error):
        dcr.history.create(str(tmp_path / "y.tar"), str(tmp_path / "missing.safetensors"))
    with pytest.raises(dcr.ArgumentError):
        dcr.history.create(str(tmp_path / "z.tar"), cks[0], container="rar")
    with pytest.raises(dcr.Error):
        dcr.history.extract(arc, step=STEPS, out=str(tmp_path / "late.safetensors"))  # past the end
    assert not os.path.exists(tmp_path / "late.safetensors")


def test_replace_false_keeps_an_existing_file(run, tmp_path):
    _, cks, bundles = run
    arc = str(tmp_path / "r.tar")
    dcr.history.create(arc, cks[0], bundles[:1])
    out = tmp_path / "exists.safetensors"
    out.write_bytes(b"mine")
    with pytest.raises(dcr.Error):
        dcr.history.extract(arc, step=1, out=str(out), replace=False)
    assert out.read_bytes() == b"mine"
    with pytest.raises(dcr.Error):
        dcr.history.create(arc, cks[0], replace=False)


def test_archive_at_a_url(run, tmp_path):
    _, cks, bundles = run
    arc = str(tmp_path / "u.tar")
    dcr.history.create(arc, cks[0], bundles)
    Handler.body = read(arc)
    Handler.etag, Handler.ignore_range, Handler.seen_headers = '"1"', False, []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/u.tar"
        assert dcr.history.list(url, headers={"X-Test": "1"}) == dcr.history.list(arc)
        assert Handler.seen_headers[0].get("X-Test") == "1"
        out = str(tmp_path / "s3.safetensors")
        assert dcr.history.extract(url, step=3, out=out, http_retries=1) == 3
        assert read(out) == read(cks[3])
        dcr.history.verify(url)
    finally:
        httpd.shutdown()
        httpd.server_close()
    with pytest.raises(dcr.ArgumentError):
        dcr.history.list(arc, headers={"X-Test": "1"})  # headers are for a URL


def test_memory_budgets(run, tmp_path):
    """max_memory reaches the library: the index read at open, and the keyframe
    and bundles read by create."""
    _, cks, bundles = run
    arc = str(tmp_path / "m.tar")
    dcr.history.create(arc, cks[0], bundles[:1])
    with pytest.raises(dcr.OutOfMemory):
        dcr.history.list(arc, max_memory=2048)
    with pytest.raises(dcr.OutOfMemory):
        dcr.history.extract(arc, step=1, out=str(tmp_path / "x.safetensors"), max_memory=2048)
    with pytest.raises(dcr.OutOfMemory):
        dcr.history.create(str(tmp_path / "n.tar"), cks[0], bundles[:1], max_memory=4096)
    assert not os.path.exists(tmp_path / "n.tar")

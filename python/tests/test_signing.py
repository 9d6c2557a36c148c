"""Signed bundles (SPEC.md §20) from Python: keys made by dcr.keygen and read by
the CLI and back, bundles signed by dcr.sign and by encode(sign_key=) and
checked by the CLI, Bundle(require_signature=) refusing unsigned and
wrongly-signed bundles at construction whether they come from a file, bytes or
an http URL, a failed sign leaving no output, and history archives that
require signatures."""

import http.server
import os
import shutil
import struct
import subprocess
import sys
import threading

import pytest
from conftest import ROOT, cli, mkpair, read
from test_http import Handler

import dcr


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Two key pairs: "k" (made by dcr.keygen) and "other" (by dcr keygen)."""
    d = tmp_path_factory.mktemp("keys")
    kid = dcr.keygen(d / "k.key", d / "k.pub")
    cli("keygen", d / "other", "-q")
    return {"k": (str(d / "k.key"), str(d / "k.pub"), kid), "other": (str(d / "other.key"), str(d / "other.pub"))}


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, pairs, keys):
    """(base, target, unsigned bundle, the same signed with k by dcr.sign)."""
    d = tmp_path_factory.mktemp("signed")
    base, target = pairs["synth"]
    unsigned, signed = str(d / "unsigned.dcr"), str(d / "signed.dcr")
    dcr.encode(base, target, unsigned)
    dcr.sign(unsigned, keys["k"][0], base=base, target=target, out=signed)
    return base, target, unsigned, signed


def test_keygen_key_id_is_the_files_and_the_keyrings(keys, tmp_path):
    secret, public, kid = keys["k"]
    assert len(kid) == 32 and read(public).decode().splitlines()[1] == kid
    assert os.stat(secret).st_mode & 0o777 == 0o600
    with dcr.Keyring([public]) as ring:
        assert ring.key_ids == [kid]
        assert ring.add(keys["other"][1]) != kid
    with pytest.raises(dcr.IOFailure):  # never replaces a key
        dcr.keygen(secret, tmp_path / "new.pub")
    with pytest.raises(dcr.ArgumentError):  # a secret key is not a public one
        dcr.Keyring([secret])


def test_signed_bundle_is_accepted_and_applied(bundles, keys, tmp_path):
    base, target, _, signed = bundles
    with dcr.Bundle(signed, require_signature=[keys["k"][1]]) as b:
        b.apply_file(base, tmp_path / "out.st")
    assert read(str(tmp_path / "out.st")) == read(target)
    cli("verify", signed, "--pubkey", keys["k"][1], "--base", base, "--target", target)


def test_unsigned_bundle_is_refused_at_construction(bundles, keys):
    with pytest.raises(dcr.SignatureError) as e:
        dcr.Bundle(bundles[2], require_signature=[keys["k"][1]])
    assert e.value.name == "DCR_E_SIGNATURE" and e.value.code == 27 and isinstance(e.value, dcr.Error)
    dcr.Bundle(bundles[2]).close()  # the same bundle opens when no signature is required


def test_bundle_signed_by_another_key_is_refused(bundles, keys):
    with pytest.raises(dcr.SignatureError, match="DCR_E_SIGNATURE"):
        dcr.Bundle(bundles[3], require_signature=keys["other"][1])
    with dcr.Keyring([keys["other"][1], keys["k"][1]]) as ring:  # one of two trusted keys will do
        dcr.Bundle(bundles[3], require_signature=ring).close()
    with pytest.raises(dcr.ArgumentError):  # requiring no key would accept nothing
        dcr.Bundle(bundles[3], require_signature=[])


def test_verify_signature_result(bundles, keys, tmp_path):
    base, target, unsigned, signed = bundles
    with dcr.Bundle(signed) as b:
        r = b.verify_signature([keys["k"][1]])
        assert (r.signature_count, r.verified_count, r.key_id) == (1, 1, keys["k"][2])
        with pytest.raises(dcr.SignatureError):
            b.verify_signature([keys["other"][1]])
    two = str(tmp_path / "two.dcr")
    dcr.sign(signed, keys["other"][0], base=base, target=target, out=two)
    with dcr.Bundle(two) as b, dcr.Keyring([keys["k"][1], keys["other"][1]]) as ring:
        r = b.verify_signature(ring)
        assert (r.signature_count, r.verified_count) == (2, 2)
        assert r.key_id == min(ring.key_ids)
        assert b.verify_signature(keys["other"][1]).verified_count == 1
    with dcr.Bundle(unsigned) as b, pytest.raises(dcr.SignatureError):
        b.verify_signature([keys["k"][1]])


def test_verify_signed_checkpoint(bundles, keys):
    base, target, _, signed = bundles
    pub = [keys["k"][1]]
    with dcr.Bundle(signed) as b:
        b.verify_signed_checkpoint(pub, base)
        b.verify_signed_checkpoint(pub, target, "target")
        with pytest.raises(dcr.SignatureError, match="SHA-256"):  # same tensors, other bytes
            b.verify_signed_checkpoint(pub, target, "base")
        with pytest.raises(dcr.ArgumentError):
            b.verify_signed_checkpoint(pub, base, "middle")


def test_sign_refuses_a_wrong_target_and_keeps_the_bundle(bundles, keys, tmp_path):
    base, _, unsigned, _ = bundles
    copy = str(tmp_path / "b.dcr")
    shutil.copy(unsigned, copy)
    with pytest.raises(dcr.TargetMismatchError):
        dcr.sign(copy, keys["k"][0], base=base, target=base)
    assert read(copy) == read(unsigned)


def test_bytes_are_checked_as_held(bundles, keys):
    base, target, unsigned, signed = bundles
    pub = [keys["k"][1]]
    data = bytearray(read(signed))
    with dcr.Bundle(data, require_signature=pub) as b:
        weights = dcr.load_safetensors(base)
        b.apply_to(weights)  # in place
        want = dcr.load_safetensors(target)
        assert set(weights) == set(want) and all(weights[n].tobytes() == want[n].tobytes() for n in want)
    with pytest.raises(dcr.SignatureError):
        dcr.Bundle(read(unsigned), require_signature=pub)
    # The held bytes, not a file, are what is checked: a signature byte flipped
    # (its section's checksum made good) passes the structure, not the signature.
    forged = _flip_signature_byte(bytes(data))
    dcr.Bundle(forged).close()
    with pytest.raises(dcr.SignatureError):
        dcr.Bundle(forged, require_signature=pub)


def _flip_signature_byte(data: bytes) -> bytes:
    """data with the last byte of its SIGN payload (an Ed25519 signature's)
    changed, the section rewritten by the SPEC.md-only writer so that its
    checksums hold."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import mkresourcevectors as mk  # writes sections from SPEC.md alone

    off = 64
    while data[off:off + 4] != b"SIGN":
        off += -(-(32 + struct.unpack_from("<Q", data, off + 8)[0]) // 64) * 64
    assert data[off + 6] == 0  # stored, not compressed
    payload = bytearray(data[off + 32:off + 32 + struct.unpack_from("<Q", data, off + 8)[0]])
    payload[-1] ^= 1
    sect = mk.section(b"SIGN", bytes(payload), critical=False)
    return data[:off] + sect + data[off + len(sect):]


@pytest.fixture()
def served():
    """An HTTP server on the loopback interface serving Handler.body."""
    Handler.etag, Handler.ignore_range, Handler.seen_headers = '"1"', False, []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/b.dcr"
    httpd.shutdown()
    httpd.server_close()


def test_url_is_checked_on_the_bytes_fetched(bundles, keys, served, tmp_path):
    base, target, unsigned, signed = bundles
    Handler.body = read(signed)
    with dcr.Bundle(served, require_signature=[keys["k"][1]]) as b:
        b.apply_file(base, tmp_path / "out.st")
    assert read(str(tmp_path / "out.st")) == read(target)
    Handler.body = read(unsigned)
    with pytest.raises(dcr.SignatureError):
        dcr.Bundle(served, require_signature=[keys["k"][1]])


def test_encode_sign_key_output_verifies(pairs, keys, tmp_path):
    base, target = pairs["synth"]
    out = str(tmp_path / "e.dcr")
    stats = dcr.encode(base, target, out, sign_key=keys["k"][0], metadata={"step": 3})
    assert os.listdir(tmp_path) == ["e.dcr"]
    assert stats.bundle_size == os.path.getsize(out)  # signed in the encode's pass
    cli("verify", out, "--pubkey", keys["k"][1], "--target", target)
    with dcr.Bundle(out, require_signature=[keys["k"][1]]) as b:
        assert b.step == 3
    data, _ = dcr.encode_bytes(base, target, sign_key=keys["k"][0])
    dcr.Bundle(data, require_signature=[keys["k"][1]]).close()
    with open(tmp_path / "f.dcr", "wb") as f:
        dcr.encode(base, target, f, sign_key=keys["k"][0])
    cli("verify", tmp_path / "f.dcr", "--pubkey", keys["k"][1])


# Tensors whose base is hashed whole rather than chunk by chunk: resized (grown,
# shrunk), removed, recoded; one empty on both sides.
RESIZED = {
    "seed": 11,
    "tensors": [
        {"name": "a.grow", "dtype": "BF16", "shape": [3000, 7], "target_shape": [3100, 7], "rate": 0.02},
        {"name": "b.shrink", "dtype": "F32", "shape": [5000], "target_shape": [3001], "rate": 0.05},
        {"name": "c.empty", "dtype": "F16", "shape": [0], "fill": "zeros"},
        {"name": "d.gone", "dtype": "I32", "shape": [100], "only": "base"},
        {"name": "e.recode", "dtype": "F32", "shape": [40], "target_dtype": "F16", "target_shape": [40]},
    ],
}


def pair_files(pairs, tmp_path, pair):
    """(base, target): one of the module's pairs, or RESIZED written into tmp_path."""
    if pair != "resized":
        return pairs[pair]
    base, target = str(tmp_path / "b.st"), str(tmp_path / "t.st")
    mkpair(RESIZED, base, target)
    return base, target


@pytest.mark.parametrize("pair,threads", [("synth", 1), ("synth", 3), ("mixed", 2), ("raw", 2),
                                          ("resized", 1), ("resized", 3)])
def test_encode_sign_key_is_encode_then_sign(pairs, keys, tmp_path, pair, threads):
    """SPEC.md §20.2: signing in the encode's pass gives the bytes that signing the
    unsigned bundle afterwards (dcr.sign, which hashes the checkpoints again)
    gives, whatever the thread count; the result verifies and applies."""
    base, target = pair_files(pairs, tmp_path, pair)
    one, two = str(tmp_path / "one.dcr"), str(tmp_path / "two.dcr")
    raw = pair == "raw"
    dcr.encode(base, target, one, sign_key=keys["k"][0], threads=threads, chunk_size=4096, raw=raw)
    dcr.encode(base, target, two, threads=threads, chunk_size=4096, raw=raw)
    dcr.sign(two, keys["k"][0], base=base, target=target)
    assert read(one) == read(two)
    with dcr.Bundle(one, require_signature=[keys["k"][1]]) as b:
        b.verify_signed_checkpoint([keys["k"][1]], base, "base")
        b.verify_signed_checkpoint([keys["k"][1]], target, "target")
        b.apply_file(base, tmp_path / "out.st")
    assert read(str(tmp_path / "out.st")) == read(target)


@pytest.mark.parametrize("pair,threads", [("synth", 1), ("synth", 3), ("resized", 2)])
def test_bundle_scope(pairs, keys, tmp_path, pair, threads):
    """SPEC.md §20.6: encode(sign_scope="bundle") signs the bundle alone, the same
    bytes as dcr.sign(scope="bundle") of the unsigned bundle, with no checkpoint;
    the signature verifies and the bundle applies, but no checkpoint can be checked
    against it (R-SIG-10)."""
    base, target = pair_files(pairs, tmp_path, pair)
    one, two = str(tmp_path / "one.dcr"), str(tmp_path / "two.dcr")
    k, pub = keys["k"][0], keys["k"][1]
    dcr.encode(base, target, one, sign_key=k, sign_scope="bundle", threads=threads, chunk_size=4096)
    dcr.encode(base, target, two, threads=threads, chunk_size=4096)
    dcr.sign(two, k, scope="bundle")
    assert read(one) == read(two)
    with dcr.Bundle(one, require_signature=[pub]) as b:
        assert b.verify_signature([pub]).scope == "bundle"
        for ckpt, side in ((base, "base"), (target, "target")):
            with pytest.raises(dcr.SignatureError, match="bundle alone"):
                b.verify_signed_checkpoint([pub], ckpt, side)
        b.apply_file(base, tmp_path / "out.st")
    assert read(str(tmp_path / "out.st")) == read(target)
    cli("verify", one, "--pubkey", pub)
    with pytest.raises(dcr.SignatureError):  # a checkpoint signature cannot join it
        dcr.sign(one, keys["other"][0], base=base, target=target)
    with pytest.raises(dcr.ArgumentError):
        dcr.encode(base, target, two, sign_key=k, sign_scope="all")
    with pytest.raises(dcr.ArgumentError, match="without sign_key"):
        dcr.encode(base, target, two, sign_scope="bundle")
    with pytest.raises(dcr.ArgumentError):
        dcr.sign(two, k)  # the checkpoints' scope needs base and target


@pytest.mark.parametrize("scope", ["checkpoints", "bundle"])
def test_model_directory_signed(pairs, keys, tmp_path, scope):
    """A model directory (checkpoint set), named by its folder or by its index file as
    the CLI takes it: encode(sign_key=) and sign() give the same bytes in either
    scope, and the signature verifies (and, for checkpoints, the directories too)."""
    dirs = []
    for ck, name in zip(pairs["synth"], "BT"):
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "mkset.py"), ck, str(tmp_path / name),
                        "--shards", "2"], check=True)
        dirs.append(str(tmp_path / name))
    index = [os.path.join(d, "model.safetensors.index.json") for d in dirs]
    k, pub = keys["k"][0], keys["k"][1]
    one, two = str(tmp_path / "one.dcr"), str(tmp_path / "two.dcr")
    dcr.encode(dirs[0], dirs[1], one, sign_key=k, sign_scope=scope)
    dcr.encode(dirs[0], dirs[1], two)
    dcr.sign(two, k, base=index[0], target=index[1], scope=scope)
    assert read(one) == read(two)
    with dcr.Bundle(one, require_signature=[pub]) as b:
        assert b.verify_signature([pub]).scope == scope
        if scope == "checkpoints":
            b.verify_signed_checkpoint([pub], index[0], "base")
            b.verify_signed_checkpoint([pub], dirs[1], "target")


def test_encode_failing_sign_leaves_no_output(pairs, keys, tmp_path):
    base, target = pairs["synth"]
    out = tmp_path / "e.dcr"
    with pytest.raises(dcr.Error):
        dcr.encode(base, target, out, sign_key=tmp_path / "missing.key")
    assert os.listdir(tmp_path) == []
    out.write_bytes(b"old")
    with pytest.raises(dcr.ArgumentError):  # a public key cannot sign
        dcr.encode(base, target, out, sign_key=keys["k"][1])
    assert out.read_bytes() == b"old" and os.listdir(tmp_path) == ["e.dcr"]
    with pytest.raises(dcr.IOFailure):
        dcr.encode(base, target, out, sign_key=keys["k"][0], replace=False)
    assert out.read_bytes() == b"old" and os.listdir(tmp_path) == ["e.dcr"]
    dcr.encode(base, target, out, sign_key=keys["k"][0])
    cli("verify", out, "--pubkey", keys["k"][1])


@pytest.fixture(scope="module")
def chain(tmp_path_factory, keys):
    """Checkpoints step-0000 .. step-0003 and, between them, bundles signed by k
    (s1 .. s3), one unsigned (u3) and one signed by the other key (o3)."""
    d = tmp_path_factory.mktemp("chain")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "mkchain.py"), str(d / "ck"), "3",
                    "--bytes", "65536", "--seed", "4"], check=True)
    cks = [str(d / "ck" / f"step-{i:04d}.safetensors") for i in range(4)]
    out = {}
    for i in range(1, 4):
        out[f"s{i}"] = str(d / f"s{i}.dcr")
        dcr.encode(cks[i - 1], cks[i], out[f"s{i}"], metadata={"step": i}, sign_key=keys["k"][0])
    out["u3"], out["o3"] = str(d / "u3.dcr"), str(d / "o3.dcr")
    dcr.encode(cks[2], cks[3], out["u3"], metadata={"step": 3})
    dcr.encode(cks[2], cks[3], out["o3"], metadata={"step": 3}, sign_key=keys["other"][0])
    return cks, out


def test_history_requires_signatures(chain, keys, tmp_path):
    cks, b = chain
    pub = [keys["k"][1]]
    archive = str(tmp_path / "run.tar")
    dcr.history.create(archive, cks[0], [b["s1"]])
    assert dcr.history.append(archive, [b["s2"]], require_signature=pub).last_step == 2
    for refused in ("u3", "o3"):
        before = read(archive)
        with pytest.raises(dcr.SignatureError):
            dcr.history.append(archive, [b[refused]], require_signature=pub)
        assert read(archive) == before
    assert dcr.history.verify(archive, require_signature=pub).last_step == 2
    assert dcr.history.extract(archive, out=tmp_path / "x.st", step=2, require_signature=pub) == 2
    assert read(str(tmp_path / "x.st")) == read(cks[2])
    dcr.history.append(archive, [b["u3"]])  # not required: accepted
    with pytest.raises(dcr.SignatureError):
        dcr.history.verify(archive, require_signature=pub)
    with dcr.history.Archive(archive) as a, dcr.Keyring(pub) as ring, pytest.raises(dcr.SignatureError):
        a.extract(tmp_path / "y.st", step=3, require_signature=ring)
    assert not os.path.exists(tmp_path / "y.st")

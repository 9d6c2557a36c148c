"""Bundle.changes(): every changed chunk as numpy views, applied here by a numpy
reference of SPEC.md §9.1 (as a device kernel would) and by Change.apply."""

import numpy as np
import pytest

import dcr


def key(u, w):
    mask = np.array((1 << (w - 1)) - 1, u.dtype)
    return np.where((u >> np.array(w - 1, u.dtype)) & np.array(1, u.dtype), u ^ mask, u)


def scatter(change, chunk_bytes):
    """The numpy reference: change applied to a uint8 array of change.length bytes."""
    w = change.element_size * 8
    el = chunk_bytes.view(f"<u{change.element_size}")
    idx = change.positions if change.positions is not None else np.arange(el.size)
    v = change.values
    if change.op == "xor":
        el[idx] ^= v
    elif change.op == "overwrite":
        el[idx] = v
    else:
        one = np.array(1, v.dtype)
        unz = (v >> one) ^ (np.zeros_like(v) - (v & one))
        with np.errstate(over="ignore"):
            el[idx] = key(key(el[idx], w) + unz, w)


def flat(a):
    return a.reshape(-1).view(np.uint8)


@pytest.mark.parametrize("pair", ["synth", "same", "mixed"])
@pytest.mark.parametrize("how", ["numpy", "library"])
def test_changes_rebuild_the_target(pairs, pair, how):
    base, target = pairs[pair]
    b = dcr.Bundle(dcr.encode_bytes(base, target, chunk_size=4096, format="1.1")[0])
    w, t = dcr.load_safetensors(base), dcr.load_safetensors(target)
    new = {x.name for x in b.tensors if x.target is not None and not x.delta_coded}
    for name in new:  # new tensors start from zeros (SPEC.md §10.1)
        tt = next(x for x in b.tensors if x.name == name).target
        w[name] = np.zeros(tt.byte_length, np.uint8)
    ops = set()
    n = 0
    with b.changes() as it:
        for c in it:
            n += 1
            ops.add(c.op)
            assert c.name == b.tensors[c.entry].name
            assert not c.values.flags.writeable
            if c.positions is not None:
                assert c.positions.dtype == np.uint32 and c.positions.size == c.count == c.values.size
            else:
                assert c.values.size == c.length // c.element_size
            chunk = flat(w[c.name])[c.offset:c.offset + c.length]
            if how == "numpy":
                scatter(c, chunk)
            else:
                c.apply(chunk)
    assert n == b.info.chunk_count
    for x in b.tensors:
        if x.target is None:
            continue
        assert flat(w[x.name]).tobytes() == flat(t[x.name]).tobytes(), x.name
    if pair == "mixed":
        assert len(ops) >= 2


# The encodings whose positions depend on the base: DELTA_BANDED (1.3, the
# default) and DELTA_CLASSED (1.2).
RANKED = [("1.3", "DELTA_BANDED"), ("1.2", "DELTA_CLASSED")]


@pytest.mark.parametrize("fmt,encoding", RANKED)
def test_delta_classed_needs_the_base(pairs, fmt, encoding):
    base, target = pairs["synth"]
    b = dcr.Bundle(dcr.encode_bytes(base, target, format=fmt)[0])
    assert any(c.encoding == encoding for c in b.chunks)
    with pytest.raises(dcr.ArgumentError, match=encoding):
        list(b.changes())
    with pytest.raises(dcr.ArgumentError, match="missing from base"):
        list(b.changes(base={}))


@pytest.mark.parametrize("fmt,encoding", RANKED)
def test_delta_classed_given_the_base_is_the_11_step(pairs, fmt, encoding):
    """Given the base, a 1.2 or 1.3 bundle's changes are those of the same step encoded
    at 1.1: the same chunks and positions, and each value the ULP delta from base
    to target, bit for bit; scattered, they give the target."""
    base, target = pairs["synth"]
    b12 = dcr.Bundle(dcr.encode_bytes(base, target, format=fmt)[0])
    b11 = dcr.Bundle(dcr.encode_bytes(base, target, format="1.1")[0])
    w, t = dcr.load_safetensors(base), dcr.load_safetensors(target)
    held = {k: v.copy() for k, v in w.items()}
    classed = {(c.tensor, c.chunk) for c in b12.chunks if c.encoding == encoding}
    assert classed
    seen = 0
    with b12.changes(base=held) as it, b11.changes() as it11:
        for c, c11 in zip(it, it11):
            assert (c.entry, c.chunk, c.count, c.base_check) == (c11.entry, c11.chunk, c11.count, c11.base_check)
            chunk = flat(w[c.name])[c.offset:c.offset + c.length]
            if (c.entry, c.chunk) in classed:
                seen += 1
                assert c.op == "delta" and c11.positions is not None
                assert np.array_equal(c.positions, c11.positions)
                if c11.op == "delta":
                    assert np.array_equal(c.values, c11.values)
                el = chunk.view("<u2")[c.positions].astype(np.int64)
                te = flat(t[c.name])[c.offset:c.offset + c.length].view("<u2")[c.positions].astype(np.int64)
                d = (key(te, 16) - key(el, 16)) % 65536
                zz = ((d << 1) ^ np.where(d >= 0x8000, 0xFFFF, 0)) & 0xFFFF
                assert np.array_equal(c.values.astype(np.int64), zz)
            scatter(c, chunk)
    assert seen == len(classed)
    for name in t:
        assert flat(w[name]).tobytes() == flat(t[name]).tobytes(), name
    assert all(flat(held[k]).tobytes() == flat(v).tobytes() for k, v in dcr.load_safetensors(base).items())


@pytest.mark.parametrize("fmt,encoding", RANKED)
def test_delta_classed_wrong_base_is_refused(pairs, fmt, encoding):
    base, target = pairs["synth"]
    b = dcr.Bundle(dcr.encode_bytes(base, target, format=fmt)[0])
    c = next(c for c in b.chunks if c.encoding == encoding)
    w = dcr.load_safetensors(base)
    name = b.tensors[c.tensor].name
    wrong = {k: v.copy() for k, v in w.items()}
    flat(wrong[name])[c.chunk * b.info.chunk_size + 1] ^= 0x40
    with pytest.raises(dcr.BaseMismatchError):
        list(b.changes(base=wrong))


def test_a_change_is_valid_until_the_next(pairs):
    base, target = pairs["same"]
    b = dcr.Bundle(dcr.encode_bytes(base, target, chunk_size=4096, format="1.1")[0])
    it = b.changes()
    first = next(it)
    next(it)
    with pytest.raises(ValueError, match="no longer current"):
        first.apply(np.zeros(first.length, np.uint8))
    it.close()
    assert list(it) == []
    it = b.changes()
    c = next(it)
    with pytest.raises(dcr.ArgumentError):
        c.apply(np.zeros(c.length + 1, np.uint8))
    b.close()
    with pytest.raises(ValueError, match="closed"):
        next(it)

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


def test_delta_classed_cannot_be_iterated(pairs):
    base, target = pairs["synth"]
    b = dcr.Bundle(dcr.encode_bytes(base, target)[0])
    assert any(c.encoding == "DELTA_CLASSED" for c in b.chunks)
    with pytest.raises(dcr.ArgumentError, match="DELTA_CLASSED"):
        list(b.changes())


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

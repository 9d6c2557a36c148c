"""Bundle.apply_to on the caller's arrays: a wrong base at every level, arrays that
cannot be patched (non-contiguous, read-only, missing, wrong size, not in CPU
memory) refused with a clear error before anything is written, every kind of
array (numpy, __array_interface__, DLPack, buffer protocol), progress and cancel."""

import types

import numpy as np
import pytest


import dcr


@pytest.fixture()
def same(pairs, tmp_path):
    """(bundle, base tensors, target tensors) of the SAME_LAYOUT pair, 4 KiB chunks."""
    base, target = pairs["same"]
    data, _ = dcr.encode_bytes(base, target, chunk_size=4096)
    return dcr.Bundle(data), dcr.load_safetensors(base), dcr.load_safetensors(target)


def snapshot(w):
    return {k: v.copy() for k, v in w.items()}


def unchanged(w, snap):
    return sorted(w) == sorted(snap) and all(w[k].tobytes() == snap[k].tobytes() for k in snap)  # NaNs too


def equal(w, want):
    return sorted(w) == sorted(want) and all(w[k].tobytes() == want[k].tobytes() for k in want)


@pytest.mark.parametrize("level", ["full", "chunk"])
def test_wrong_base_in_one_chunk_is_refused_and_nothing_written(same, level):
    b, w, t = same
    # one byte of the last changed chunk of w4: the first chunks would pass
    last = [c for c in b.chunks if c.tensor_name == "w4"][-1]
    w["w4"][last.chunk * b.info.chunk_size] ^= 0x40
    snap = snapshot(w)
    with pytest.raises(dcr.BaseMismatchError) as e:
        b.apply_to(w, level)
    assert e.value.name == "DCR_E_BASE_MISMATCH" and e.value.code == 21
    assert e.value.detail.tensor_name == "w4"
    assert unchanged(w, snap)


@pytest.mark.parametrize("level", ["full", "chunk", "none"])
def test_wholly_wrong_base_is_refused(same, level):
    b, w, t = same
    for v in w.values():
        v.reshape(-1).view(np.uint8)[:] ^= 0x5A
    snap = snapshot(w)
    with pytest.raises(dcr.BaseMismatchError):
        b.apply_to(w, level)
    assert unchanged(w, snap)


def test_full_checks_unchanged_tensors_chunk_does_not(same):
    b, w, t = same
    w["w3"][0] += 1  # a tensor the bundle does not change
    snap = snapshot(w)
    with pytest.raises(dcr.BaseMismatchError) as e:
        b.apply_to(w, "full")
    assert e.value.detail.tensor_name == "w3" and unchanged(w, snap)
    b.apply_to(w, "chunk")  # only changed chunks are checked
    for k in ("w1", "w2", "w4"):
        assert w[k].tobytes() == t[k].tobytes()


def test_bundle_applied_twice_and_to_the_target(same):
    b, w, t = same
    assert not b.apply_to(w).already_target
    for level in ("full", "chunk", "none"):
        st = b.apply_to(w, level)
        assert st.already_target and st.bytes_written == 0, level
        assert equal(w, t)


def test_non_contiguous_is_refused(same):
    b, w, t = same
    snap = snapshot(w)
    w["w1"] = np.asfortranarray(w["w1"])  # same bytes count, not C order
    with pytest.raises(dcr.ArgumentError) as e:
        b.apply_to(w)
    assert e.value.name == "DCR_E_ARGUMENT" and e.value.code == 3
    assert "not C-contiguous" in str(e.value) and e.value.detail.tensor_name == "w1"
    w["w1"] = np.repeat(snap["w1"], 2, axis=1)[:, ::2]  # a strided view
    with pytest.raises(dcr.ArgumentError, match="not C-contiguous"):
        b.apply_to(w)
    assert unchanged({k: w[k] for k in ("w2", "w3", "w4")}, {k: snap[k] for k in ("w2", "w3", "w4")})


def test_read_only_is_refused_where_written(same):
    b, w, t = same
    w["w2"].flags.writeable = False
    with pytest.raises(dcr.ArgumentError, match="read-only") as e:
        b.apply_to(w)
    assert e.value.detail.tensor_name == "w2"
    w["w2"].flags.writeable = True
    w["w3"].flags.writeable = False  # not changed by the bundle: accepted
    b.apply_to(w, "full")
    assert equal(w, t)


def test_missing_and_wrong_size(same):
    b, w, t = same
    snap = snapshot(w)
    del w["w2"]
    with pytest.raises(dcr.ArgumentError, match='tensor "w2" is missing'):
        b.apply_to(w)
    w["w2"] = snap["w2"][:-1].copy()
    with pytest.raises(dcr.ArgumentError, match="has 79996 bytes; the bundle's base has 80000"):
        b.apply_to(w)
    w["w2"] = snap["w2"].view(np.uint8)  # the same bytes seen as uint8: fine
    w["extra"] = np.zeros(3)  # names the bundle does not know are left alone
    b.apply_to(w)
    assert w["w2"].view(np.float32).tobytes() == t["w2"].tobytes()
    assert np.array_equal(w["extra"], np.zeros(3))


def test_bad_verify_level(same):
    b, w, _ = same
    with pytest.raises(dcr.ArgumentError, match="verify must be"):
        b.apply_to(w, "most")


class ArrayInterface:
    """Only __array_interface__, as some array libraries expose."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__


class DLPackOnly:
    """Only __dlpack__ and __dlpack_device__, as a torch CPU tensor (without numpy)."""

    def __init__(self, a, device=(1, 0)):
        self.a, self.device = a, device

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.device


@pytest.mark.parametrize("kind", ["array_interface", "dlpack", "buffer"])
def test_other_array_kinds(same, kind):
    b, w, t = same
    wrap = {"array_interface": ArrayInterface, "dlpack": DLPackOnly, "buffer": lambda a: memoryview(a)}[kind]
    held = {k: wrap(v) for k, v in w.items()}
    b.apply_to(held, "full")
    assert equal(w, t)  # the wrappers share the arrays' memory


def test_dlpack_device_memory_refused(same):
    b, w, _ = same
    held = dict(w)
    held["w1"] = DLPackOnly(w["w1"], device=(2, 0))  # kDLCUDA
    with pytest.raises(dcr.ArgumentError, match="not in CPU memory"):
        b.apply_to(held)


def test_dlpack_non_contiguous_refused(same):
    b, w, _ = same
    held = dict(w)
    held["w1"] = DLPackOnly(np.repeat(w["w1"], 2, axis=1)[:, ::2])
    with pytest.raises(dcr.ArgumentError, match="not contiguous"):
        b.apply_to(held)


def test_read_only_buffers_refused(same):
    b, w, _ = same
    held = dict(w)
    held["w4"] = w["w4"].tobytes()  # bytes: read-only buffer
    with pytest.raises(dcr.ArgumentError, match="read-only"):
        b.apply_to(held)
    ro = w["w4"].copy()
    ro.flags.writeable = False
    held["w4"] = ArrayInterface(ro)
    with pytest.raises(dcr.ArgumentError, match="read-only"):
        b.apply_to(held)
    held["w4"] = object()
    with pytest.raises(dcr.ArgumentError, match="not an array"):
        b.apply_to(held)


def test_added_tensors_need_a_buffer_or_a_dict(pairs):
    base, target = pairs["mixed"]
    b = dcr.Bundle(dcr.encode_bytes(base, target)[0])
    w, t = dcr.load_safetensors(base), dcr.load_safetensors(target)
    with pytest.raises(dcr.ArgumentError, match='"d.new" is added by the bundle'):
        b.apply_to(types.MappingProxyType(w))
    # a read-only mapping works when the caller gives the new tensors' buffers
    held = dict(w)
    held["d.new"] = np.empty(t["d.new"].shape, np.uint16)
    held["f.recode"] = np.empty(t["f.recode"].shape, np.float16)
    st = b.apply_to(types.MappingProxyType(held), "full")
    assert st.added == () and st.removed == ()
    for k in ("a.bf16", "d.new", "f.recode", "h.u8"):
        assert held[k].tobytes() == t[k].tobytes(), k


def test_resized_tensors_get_new_arrays(tmp_path):
    from conftest import mkpair

    spec = {"seed": 2, "tensors": [{"name": "grow", "dtype": "F32", "shape": [100], "target_shape": [150]},
                                   {"name": "shrink", "dtype": "BF16", "shape": [90, 4], "target_shape": [70, 4]}]}
    mkpair(spec, str(tmp_path / "b.st"), str(tmp_path / "t.st"))
    b = dcr.Bundle(dcr.encode_bytes(tmp_path / "b.st", tmp_path / "t.st")[0])
    assert [t.status for t in b.tensors] == ["resized", "resized"]
    t = dcr.load_safetensors(tmp_path / "t.st")
    for level in ("full", "chunk", "none"):
        d = dcr.load_safetensors(tmp_path / "b.st")
        held = d["grow"]
        st = b.apply_to(d, level)
        assert sorted(st.replaced) == ["grow", "shrink"] and d["grow"] is not held
        assert equal(d, t) and d["grow"].shape == (150,)
        if level != "none":
            assert b.apply_to(d, level).already_target and equal(d, t)
    with pytest.raises(dcr.ArgumentError, match="dict"):  # nowhere to put the new array
        b.apply_to(types.MappingProxyType(dcr.load_safetensors(tmp_path / "b.st")))


def test_progress_and_cancel(same):
    b, w, t = same
    seen = []
    b.apply_to(snapshot(w), "full", progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1][0] == seen[-1][1] and all(x[0] <= y[0] for x, y in zip(seen, seen[1:]))

    c = dcr.Cancel()
    c.set()
    snap = snapshot(w)
    with pytest.raises(dcr.Cancelled) as e:
        b.apply_to(w, "chunk", cancel=c)
    assert e.value.name == "DCR_E_INTERRUPTED" and unchanged(w, snap)

    c.clear()
    b.apply_to(w, "chunk", cancel=c)
    assert equal(w, t)


def test_progress_exception_stops_a_file_apply(pairs, tmp_path):
    base, target = pairs["same"]
    b = dcr.Bundle(dcr.encode_bytes(base, target, chunk_size=4096)[0])

    class Stop(Exception):
        pass

    def stop(done, total):
        raise Stop()

    with pytest.raises(Stop):
        b.apply_file(base, tmp_path / "out.safetensors", progress=stop)
    assert not (tmp_path / "out.safetensors").exists()
    w, t = dcr.load_safetensors(base), dcr.load_safetensors(target)
    with pytest.raises(Stop):
        b.apply_to(w, "chunk", progress=stop)
    assert equal(w, t)  # memory: progress comes while writing, which always completes


def test_threads_give_the_same_result(same):
    b, w, t = same
    for n in (1, 2, 3):
        x = snapshot(w)
        b.apply_to(x, "chunk", threads=n)
        assert equal(x, t)


def test_closed_bundle(same):
    b, w, _ = same
    b.close()
    with pytest.raises(ValueError, match="closed"):
        b.apply_to(w)
    b.close()  # twice is fine

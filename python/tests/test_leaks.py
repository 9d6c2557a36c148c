"""No leaks: 1,000 open / apply / validate / iterate / close cycles leave the
resident set (/proc/self/statm) and the bytes malloc holds (glibc's mallinfo2)
where they were, within small bounds; the same measurements catch a reader, or
a patch object of ~100 bytes, that is never freed."""

import ctypes
import gc
import os

import pytest

import dcr
from dcr import _lib

PAGE = os.sysconf("SC_PAGE_SIZE")
BOUND = 2 << 20  # resident bytes of growth allowed over 1,000 cycles (2 KiB a cycle)
HEAP_BOUND = 64 << 10  # malloc'd bytes of growth allowed (64 bytes a cycle)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


_libc = ctypes.CDLL(None)
_mallinfo2 = getattr(_libc, "mallinfo2", None)
if _mallinfo2 is not None:
    _mallinfo2.restype = _MallInfo2


def rss():
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def heap():
    """Bytes malloc has handed out and not had back (small blocks and mmapped)."""
    gc.collect()
    m = _mallinfo2()
    return m.uordblks + m.hblkhd


def grows(cycle, n=1000, warm=100):
    """(resident growth, malloc'd growth) in bytes over n cycles, after warm ones."""
    for _ in range(warm):
        cycle()
    r, h = rss(), heap() if _mallinfo2 else 0
    for _ in range(n):
        cycle()
    return rss() - r, (heap() - h if _mallinfo2 else 0)


@pytest.fixture(scope="module")
def setup(pairs, tmp_path_factory):
    base, target = pairs["mixed"]
    d = tmp_path_factory.mktemp("leaks")
    bundle_path = str(d / "s.dcr")
    dcr.encode(base, target, bundle_path, chunk_size=4096, format="1.1")
    with open(bundle_path, "rb") as f:
        data = f.read()
    return bundle_path, data, base, target


def test_open_apply_cycles_do_not_leak(setup):
    bundle_path, data, base, target = setup
    pristine = dcr.load_safetensors(base)
    i = [0]

    def cycle():
        i[0] += 1
        w = dcr.Tensors({k: v.copy() for k, v in pristine.items()}, dtypes=pristine.dtypes)
        with dcr.Bundle(data if i[0] % 2 else bundle_path) as b:
            b.apply_to(w, ("full", "chunk", "none")[i[0] % 3])
            b.apply_to(w, "chunk")  # already the target
            assert not b.validate()
            for c in b.changes():
                pass
            try:
                b.apply_to({}, "chunk")
            except dcr.ArgumentError:
                pass
        try:
            dcr.Bundle(data[:100])
        except dcr.FormatError:
            pass

    growth, heap_growth = grows(cycle)
    assert growth < BOUND, f"resident set grew {growth} bytes over 1,000 cycles"
    assert heap_growth < HEAP_BOUND, f"malloc'd bytes grew {heap_growth} over 1,000 cycles"


def test_the_measurement_catches_a_leak(setup):
    """Readers opened and never freed: the same bound fails."""
    _, data, _, _ = setup
    buf = ctypes.create_string_buffer(data, len(data))
    leaked = []

    def cycle():
        r = ctypes.c_void_p()
        d = _lib.Detail()
        assert _lib.lib.dcr_reader_open_memory(ctypes.byref(r), buf, len(data), None, ctypes.byref(d)) == 0
        leaked.append(r.value)  # the pointer only: the reader is never freed

    growth, heap_growth = grows(cycle, warm=10)
    for p in leaked:
        _lib.lib.dcr_reader_free(ctypes.c_void_p(p))
    # A reader is a few KiB (its section table grows with the sections found), which
    # memory freed by earlier tests can absorb without the resident set growing:
    # the malloc'd bytes show it, where glibc can say.
    if _mallinfo2:
        assert heap_growth >= HEAP_BOUND, f"a leaked reader a cycle grew malloc'd bytes by only {heap_growth}"
    else:
        assert growth >= BOUND, f"a leaked reader a cycle grew only {growth} bytes"


@pytest.mark.skipif(_mallinfo2 is None, reason="no mallinfo2 (glibc 2.33+)")
def test_the_heap_measurement_catches_a_small_leak(setup):
    """A patch object (about 100 bytes) created and never freed, each cycle."""
    _, data, _, _ = setup
    b = dcr.Bundle(data)
    leaked = []

    def cycle():
        p = ctypes.c_void_p()
        assert _lib.lib.dcr_patch_create(ctypes.byref(p), b._reader, None) == 0
        leaked.append(p.value)

    _, growth = grows(cycle, warm=10)
    for p in leaked:
        _lib.lib.dcr_patch_free(ctypes.c_void_p(p))
    assert growth >= HEAP_BOUND, f"a leaked patch a cycle grew malloc'd bytes by only {growth}"

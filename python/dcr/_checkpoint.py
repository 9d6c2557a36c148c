"""libdcr's checkpoint reader (dcr_checkpoint_*, SPEC.md §2) and the reader limits
(dcr_limits) from Python: a checkpoint's prefix is parsed by the library only, so
that Python reads a file exactly as the C reader and the CLI do."""

from __future__ import annotations

import contextlib
import ctypes
import os
from typing import Iterator, List, Mapping, NamedTuple, Optional, Tuple, Union

from . import _lib
from ._errors import argument_error, check

L = _lib.lib
PathLike = Union[str, "os.PathLike[str]"]


def reader_limits(max_memory: int = 0, limits: Optional[Mapping[str, int]] = None) -> "_lib.Limits":
    """The library's default limits, with the memory budget (0: the default) and
    the named ``dcr_limits`` fields given."""
    lim = _lib.Limits()
    L.dcr_limits_default(ctypes.byref(lim))
    if max_memory:
        lim.max_memory = max_memory
    for k, v in (limits or {}).items():
        if k.startswith("_") or k == "reserved_" or not hasattr(lim, k):
            raise argument_error(f"unknown limit {k!r}")
        setattr(lim, k, int(v))
    return lim


@contextlib.contextmanager
def opened_checkpoint(path: PathLike, kind: int, lim: "_lib.Limits") -> Iterator[ctypes.c_void_p]:
    """dcr_checkpoint_open: the checkpoint at path, freed when the block ends; its
    errors raised as :class:`dcr.Error`."""
    ck = ctypes.c_void_p()
    d = _lib.Detail()
    check(L.dcr_checkpoint_open(ctypes.byref(ck), os.fsencode(os.fspath(path)), kind, ctypes.byref(lim),
                                ctypes.byref(d)), d)
    try:
        yield ck
    finally:
        L.dcr_checkpoint_free(ck)


def summary(ck: ctypes.c_void_p) -> "_lib.CheckpointSummaryC":
    s = _lib.CheckpointSummaryC()
    L.dcr_checkpoint_info(ck, ctypes.byref(s))
    return s


class CheckpointTensor(NamedTuple):
    """A tensor as the C reader read it from a checkpoint's header."""

    name: str
    dtype: str  # its safetensors name
    shape: Tuple[int, ...]
    offset: int  # in the data region
    byte_length: int


def checkpoint_tensors(ck: ctypes.c_void_p) -> List[CheckpointTensor]:
    """The checkpoint's tensors, in bytewise name order (dcr_checkpoint_tensor)."""
    out = []
    side = _lib.TensorSideC()
    name = ctypes.c_void_p()
    length = ctypes.c_size_t()
    for i in range(summary(ck).tensor_count):
        L.dcr_checkpoint_tensor(ck, i, ctypes.byref(side), ctypes.byref(name), ctypes.byref(length))
        out.append(CheckpointTensor(
            ctypes.string_at(name.value, length.value).decode(),  # UTF-8, as R-ST-7 requires
            L.dcr_dtype_name(side.dtype).decode(),
            tuple(side.dims[k] for k in range(side.rank)),
            side.offset,
            side.byte_length,
        ))
    return out

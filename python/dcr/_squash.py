"""dcr.squash: consecutive bundles made one (dcr_squash, SPEC.md §10.4), so that a
run's chain of steps ships or is kept as one bundle from its first base to its
last target."""

from __future__ import annotations

import ctypes
import os
from typing import List, Optional, Sequence, Union

from . import _lib
from ._bundle import Cancel, Progress, _Callbacks, _ckpt, _path
from ._encoding import EncodeStats, max_minor
from ._errors import check

PathLike = Union[str, "os.PathLike[str]"]


def squash(
    bundles: Sequence[PathLike],
    out: PathLike,
    base: Optional[PathLike] = None,
    *,
    level: Optional[int] = None,
    threads: int = 0,
    format: Optional[str] = None,
    replace: bool = True,
    sync: bool = True,
    max_memory: int = 0,
    progress: Optional[Progress] = None,
    cancel: Optional[Cancel] = None,
    sliced: Optional[List[str]] = None,
) -> EncodeStats:
    """Writes to ``out`` one bundle that takes the base of ``bundles[0]`` to the
    target of ``bundles[-1]``, as ``dcr squash`` does, and returns its statistics
    (those of a direct encode: changes undone along the chain are dropped).

    Each bundle's base must be the target of the one before
    (:class:`dcr.BaseMismatchError`). Chunks whose changes compose (XOR with XOR,
    ULP delta with ULP delta, an overwrite touched once) are composed without any
    checkpoint; the others (DELTA_CLASSED chunks, mixed changes, tensors added,
    recoded or resized along the chain) are rebuilt from ``base``, the first
    bundle's base checkpoint (a safetensors file or a model directory), checked
    whole before anything is written. Without ``base`` such a chunk raises
    :class:`dcr.ArgumentError` naming it.

    Args:
        out: written atomically, as :func:`dcr.encode` writes a path; an output
            that is one of the inputs is refused.
        level: zstd level of the chunks coded anew (default 3; 0 stores).
        threads: 0 = the CPUs this process may use; the bytes do not depend on it.
        format: the newest format the result may need ("1.0" to "1.3");
            default the newest of the bundles'.
        max_memory: the memory budget for reading the bundles (0: 1 GiB).
        progress: called with (bytes of chunks made, total) from the calling
            thread; an exception it raises stops the squash and is raised again.
        cancel: a :class:`dcr.Cancel` token that stops it from another thread.
        sliced: fnmatch patterns of the tensors that workers hold in part, as
            :func:`dcr.encode` takes them: no chunk of theirs in the result is
            DELTA_BANDED or DELTA_CLASSED, so that a rank holding any block decodes
            it alone; such a chunk of the bundles is rebuilt from ``base``
            (needed then). A pattern that matches no tensor raises
            :class:`dcr.ArgumentError`.
    """
    cb = _Callbacks(progress, cancel)
    o = _lib.SquashOptions()
    _lib.lib.dcr_squash_options_default(ctypes.byref(o))
    if level is not None:
        o.level = level
    o.threads = threads
    o.max_minor = max_minor(format)
    o.no_replace = int(not replace)
    o.no_sync = int(not sync)
    o.progress = cb.fn
    o.cancel = cb.cancel._pointer
    o.max_memory = max_memory
    patterns = (ctypes.c_char_p * max(len(sliced or ()), 1))(*(p.encode() for p in sliced or ()))
    if sliced:
        o.sliced, o.sliced_count = ctypes.cast(patterns, ctypes.POINTER(ctypes.c_char_p)), len(sliced)
    paths = [_path(b) for b in bundles]
    arr = (ctypes.c_char_p * max(len(paths), 1))(*paths)
    st = _lib.EncodeStatsC()
    d = _lib.Detail()
    rc = _lib.lib.dcr_squash(arr, len(paths), None if base is None else _ckpt(base), _path(out), ctypes.byref(o),
                             ctypes.byref(st), ctypes.byref(d))
    cb.reraise()
    check(rc, d)
    return EncodeStats._from_c(st)

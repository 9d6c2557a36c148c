"""Placements: a bundle applied to the blocks of tensors that an inference engine
holds where they lie (tensor-parallel slices, fused parameters such as
``qkv_proj``), without assembling whole tensors (``dcr_patch_placed``, dcr.h).

A tensor of shape ``[d0, d1, ..., dk]`` is viewed as ``d0`` rows of
``d1 * ... * dk`` columns; a :class:`Place` says which block of that matrix a
buffer holds and where. Column-parallel slices are row blocks, row-parallel
ones column blocks; a fused parameter is one buffer given several places, one
per tensor it stacks.
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from . import _lib
from ._buffers import Region, region
from ._errors import argument_error, check

L = _lib.lib

Span = Optional[Tuple[int, int]]


class Place:
    """A block of a tensor held in ``buffer``: tensor rows ``rows = (r0, r1)`` and
    columns ``cols = (c0, c1)`` (half-open; ``None``: all of them), stored with
    its first element at ``at = (row, col)`` of the buffer.

    The buffer is a CPU array (numpy, or a torch tensor or any DLPack producer,
    strided views included) viewed the same way, as ``shape[0]`` rows of the
    rest: its rows may be apart (a slice of a bigger array), the elements of a row
    must be contiguous. Its element size must be the tensor's (a BF16 tensor may
    be held as torch.bfloat16 or numpy.uint16). A tensor held in device memory is
    not a CPU buffer: scatter :meth:`dcr.Bundle.changes` into it
    (:func:`dcr.placement_scatter`)."""

    __slots__ = ("buffer", "rows", "cols", "at")

    def __init__(self, buffer: Any, rows: Span = None, cols: Span = None, at: Tuple[int, int] = (0, 0)):
        for name, span in (("rows", rows), ("cols", cols), ("at", at)):
            if span is not None and (
                not isinstance(span, tuple) or len(span) != 2 or not all(isinstance(v, int) and v >= 0 for v in span)
            ):
                raise argument_error(f"Place {name} must be a pair of integers >= 0, not {span!r}")
        self.buffer = buffer
        self.rows = rows
        self.cols = cols
        self.at = at

    def __repr__(self) -> str:
        return f"Place({type(self.buffer).__name__}, rows={self.rows}, cols={self.cols}, at={self.at})"


def tensor_view(shape: Sequence[int]) -> Tuple[int, int]:
    """A tensor's rows and columns in the placement view."""
    if not shape:
        return 1, 1
    cols = 1
    for n in shape[1:]:
        cols *= int(n)
    return int(shape[0]), cols


def _places(obj: Any) -> Optional[List[Place]]:
    """obj's places, if it is a Place or a list of them."""
    if isinstance(obj, Place):
        return [obj]
    if isinstance(obj, (list, tuple)) and obj and all(isinstance(p, Place) for p in obj):
        return list(obj)
    return None


def placed(tensors: Mapping[str, Any]) -> bool:
    """Whether an apply_to mapping holds places."""
    return any(_places(v) is not None for v in tensors.values())


def _block(place: Place, shape: Sequence[int], esize: int, name: str) -> Tuple[Any, Region]:
    """The dcr_placement of one Place of a tensor of this shape."""
    what = f'tensor "{name}"'
    r = region(place.buffer, what, strided=True)
    if r.itemsize != esize:
        raise argument_error(
            f"{what}: the buffer's elements have {r.itemsize} bytes; the tensor's have {esize}", name)
    R, C = tensor_view(shape)
    r0, r1 = place.rows if place.rows is not None else (0, R)
    c0, c1 = place.cols if place.cols is not None else (0, C)
    if not (r0 < r1 <= R and c0 < c1 <= C):
        raise argument_error(
            f"{what}: Place rows ({r0}, {r1}) and cols ({c0}, {c1}) are not a block of its {R} x {C} "
            f"view (shape {list(shape)}: rows x the rest)", name)
    bshape = r.shape if r.shape is not None else (r.nbytes // max(esize, 1),)
    strides = r.strides
    if strides is None:  # C-contiguous
        strides, step = [], esize
        for n in reversed(bshape):
            strides.insert(0, step)
            step *= n
        strides = tuple(strides)
    if any(s < 0 for s in strides):
        raise argument_error(f"{what}: the buffer has negative strides {strides}", name)
    BR, BC = tensor_view(bshape)
    inner = esize
    for n, s in zip(reversed(bshape[1:]), reversed(strides[1:])):
        if n != 1 and s != inner:
            raise argument_error(
                f"{what}: the buffer's rows are not contiguous (strides {strides} for shape {tuple(bshape)})", name)
        inner *= n
    row_stride = strides[0] if bshape else esize
    ar, ac = place.at
    if ar + (r1 - r0) > BR or ac + (c1 - c0) > BC:
        raise argument_error(
            f"{what}: a block of {r1 - r0} x {c1 - c0} at {place.at} does not fit the buffer's "
            f"{BR} x {BC} (shape {tuple(bshape)})", name)
    size = (BR - 1) * row_stride + BC * esize if BR and BC else 0
    p = _lib.PlacementC(r.address or None, size, ar * row_stride + ac * esize, row_stride, r0, r1 - r0, c0, c1 - c0)
    return p, r


def _element_size(side: Any) -> int:
    count = 1
    for n in side.shape:
        count *= int(n)
    return side.byte_length // count if count else 1


def apply_placed(bundle: Any, tensors: Mapping[str, Any], verify: str, threads: Optional[int], cb: Any,
                 base: Optional[Mapping[str, Any]]) -> Any:
    """Bundle.apply_to with places (or a whole base): returns the patch, done, for
    its stats (the caller frees it)."""
    arrays: Dict[int, Any] = {}
    keep: List[Any] = []
    changed = bundle._changed_entries()
    manifest = bundle.tensors
    for t in manifest:
        if not t.selected or t.target is None:
            continue
        obj = tensors.get(t.name)
        if obj is None:
            continue
        places = _places(obj)
        if places is None:
            places = [Place(obj)]
            r = region(obj, f'tensor "{t.name}"')
            if r.nbytes != t.target.byte_length:
                raise argument_error(
                    f'tensor "{t.name}" has {r.nbytes} bytes; the bundle\'s target has {t.target.byte_length}', t.name)
        blocks = (_lib.PlacementC * len(places))()
        for k, place in enumerate(places):
            blocks[k], r = _block(place, t.target.shape, _element_size(t.target), t.name)
            if not r.writable and t.index in changed:
                raise argument_error(
                    f'tensor "{t.name}" is held read-only, and the bundle changes it: pass a writable buffer', t.name)
            keep.append(r.keep)
        arrays[t.index] = blocks
    whole: Dict[int, Region] = {}
    for t in manifest if base is not None else ():
        if t.base is not None and base.get(t.name) is not None:
            whole[t.index] = region(base[t.name], f'base tensor "{t.name}"')
    errors: List[BaseException] = []

    def place(opaque: Any, entry: int, info: Any, out: Any, count: Any) -> int:
        try:
            blocks = arrays.get(entry)
            out[0] = ctypes.cast(blocks, ctypes.POINTER(_lib.PlacementC)) if blocks else None
            count[0] = len(blocks) if blocks else 0
            return 0
        except BaseException as e:  # pragma: no cover - carried to the caller
            errors.append(e)
            return 1

    def resolve(opaque: Any, entry: int, info: Any, buf: Any) -> int:
        r = whole.get(entry)
        buf[0].data, buf[0].size = (r.address or None, r.nbytes) if r else (None, 0)
        return 0

    fn = _lib.PLACE_FN(place)
    base_fn = _lib.RESOLVE_FN(resolve)
    p = bundle._patch(verify, threads, cb)
    if whole:
        L.dcr_patch_set_base(p, base_fn, None)
    d = _lib.Detail()
    rc = L.dcr_patch_placed(p, fn, None, ctypes.byref(d))
    if errors:
        L.dcr_patch_free(p)
        raise errors[0]
    try:
        cb.reraise()
        check(rc, d)
    except BaseException:
        L.dcr_patch_free(p)
        raise
    del keep
    return p

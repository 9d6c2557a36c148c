"""The device path of placements: one :class:`dcr.Change` scattered into the blocks
that :class:`dcr.Place` values name, with torch index operations, so that it runs
unchanged where the buffers are CUDA tensors (no CPU pointer is taken; only the
chunk's positions and values travel to the device).

It is the reference of what an engine's own kernel does, in the same steps: the
chunk's element indices become (row, column) of the tensor's view (``shape[0]``
rows of the rest), those inside a block are moved to the block's place in its
buffer, and the operation of SPEC.md §9.1 is applied to the element's bits. A
CUDA kernel would do the same per change in one launch per chunk, with the
values' upload overlapped with the previous chunk's scatter.
"""

from __future__ import annotations

from typing import Any, List, Sequence, Union

import numpy as np

from ._errors import argument_error
from ._placement import Place, tensor_view

_BITS = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def _key(u: Any, top: int) -> Any:
    """key(u) of §9.1 on w-bit values held unsigned in int64: u ^ (2^(w-1) - 1) if
    u's top bit is set, else u (its own inverse)."""
    return u ^ ((u >> (top)) & 1) * ((1 << top) - 1)


def scatter(change: Any, places: Union[Place, Sequence[Place]], shape: Sequence[int]) -> int:
    """Applies ``change`` (an item of :meth:`dcr.Bundle.changes`) to the blocks of a
    tensor of this ``shape`` that ``places`` hold: torch tensors (CPU or CUDA) of
    the tensor's element size, row-contiguous. Returns how many of the chunk's
    changed elements fell in a held block. Nothing is checked against a base (see
    :meth:`dcr.Bundle.changes`): check the result by other means."""
    import torch

    places = [places] if isinstance(places, Place) else list(places)
    es = change.element_size
    n = change.length // es
    first = change.offset // es
    pos = np.arange(n, dtype=np.int64) if change.positions is None else change.positions.astype(np.int64)
    values = np.asarray(change.values)
    if change.positions is None:  # dense: XOR and delta values of 0 leave the element as it is
        keep = values != 0 if change.op != "overwrite" else np.ones(n, bool)
        pos, values = pos[keep], values[keep]
    R, C = tensor_view(shape)
    held = 0
    for place in places:
        buf = place.buffer
        if not isinstance(buf, torch.Tensor) or buf.element_size() != es:
            raise argument_error(f"scatter needs torch tensors of {es}-byte elements, not {type(buf).__name__}")
        device = buf.device
        e = torch.from_numpy(pos).to(device) + first
        r, c = e // C, e % C
        r0, r1 = place.rows if place.rows is not None else (0, R)
        c0, c1 = place.cols if place.cols is not None else (0, C)
        inside = (r >= r0) & (r < r1) & (c >= c0) & (c < c1)
        if not bool(inside.any()):
            continue
        bits = buf.view(getattr(torch, _BITS[es]))
        # a view, never a copy: writes must reach the buffer (torch refuses what it cannot view)
        bits2d = bits.view(bits.shape[0], -1) if bits.dim() > 1 else bits.view(-1, 1)
        rows = r[inside] - r0 + place.at[0]
        cols = c[inside] - c0 + place.at[1]
        v = torch.from_numpy(values.view(getattr(np, _BITS[es])).copy()).to(device)[inside]
        held += int(rows.numel())
        if change.op == "overwrite":
            bits2d[rows, cols] = v
        elif change.op == "xor":
            bits2d[rows, cols] = bits2d[rows, cols] ^ v
        else:  # delta, on unsigned w-bit integers: computed in int64, wrapped to w bits
            w = 8 * es
            mask = -1 if w == 64 else (1 << w) - 1
            u = bits2d[rows, cols].to(torch.int64) & mask
            z = v.to(torch.int64) & mask
            d = (z >> 1 if w < 64 else (z >> 1) & ((1 << 63) - 1)) ^ -(z & 1)
            out = _key((_key(u, w - 1) + d) & mask, w - 1)
            if w < 64:  # back to the signed view's range
                out = out - ((out >> (w - 1)) & 1) * (1 << w)
            bits2d[rows, cols] = out.to(bits2d.dtype)
    return held


__all__: List[str] = ["scatter"]

"""What making a bundle and squashing bundles share: the format a bundle may
need (``format="1.1"``, dcr_*_options.max_minor) and the statistics of the
bundle written (:class:`EncodeStats`, ``dcr_encode_stats``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from . import _lib
from ._errors import argument_error

_ENCODINGS = ["XOR_DENSE", "XOR_SPARSE", "OVERWRITE_DENSE", "OVERWRITE_SPARSE", "DELTA_DENSE",
              "DELTA_SPARSE", "DELTA_CLASSED", "DELTA_BANDED"]
_MINORS = {"1.0": 0, "1.1": 1, "1.2": 2, "1.3": 3}


def max_minor(format: Optional[str]) -> int:
    """The max_minor option for ``format``: -1 (the library's choice) for None."""
    if format is None:
        return -1
    if format not in _MINORS:
        raise argument_error(f"format must be one of {', '.join(_MINORS)}, not {format!r}")
    return _MINORS[format]


@dataclass(frozen=True)
class EncodeStats:
    """Statistics of an encode or a squash (``dcr_encode_stats``)."""

    bundle_size: int
    target_size: int
    elements: int  # elements compared (both sides present)
    changed_elements: int
    chunks: int  # chunks examined
    changed_chunks: int  # chunks carried in the bundle
    chunks_by_encoding: Dict[str, int]
    tensors_added: int
    tensors_removed: int
    tensors_recoded: int
    tensors_resized: int
    format_version: Tuple[int, int]

    @classmethod
    def _from_c(cls, s: "_lib.EncodeStatsC") -> "EncodeStats":
        by = {name: int(s.chunks_by_encoding[i]) for i, name in enumerate(_ENCODINGS[:6])}
        by["DELTA_CLASSED"] = int(s.chunks_delta_classed)
        by["DELTA_BANDED"] = int(s.chunks_delta_banded)
        return cls(s.bundle_size, s.target_size, s.elements, s.changed_elements, s.chunks, s.changed_chunks,
                   by, s.tensors_added, s.tensors_removed, s.tensors_recoded, s.tensors_resized,
                   (1, int(s.format_minor)))

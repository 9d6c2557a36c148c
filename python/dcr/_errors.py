"""dcr.Error and its subclasses: every failure of the library, with the DCR_E_ name,
number and the detail (file, offset, section, tensor, chunk, message) it reported."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, Mapping, Optional, Type

from . import _lib


def error_name(code: int) -> str:
    """``"DCR_E_CHECKSUM"`` for 8, and so on; ``"DCR_E_UNKNOWN"`` out of range."""
    return (_lib.lib.dcr_error_name(code) or b"DCR_E_UNKNOWN").decode()


def error_message(code: int) -> str:
    """The library's one-line description of an error code."""
    return (_lib.lib.dcr_error_message(code) or b"").decode()


def _text(raw: bytes) -> str:
    """Text from the library: UTF-8, or if it is not (a bad name quoted in a
    message), every non-ASCII byte as \\xNN, as ``dcr validate --json`` writes it."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(chr(b) if b < 0x80 else f"\\x{b:02x}" for b in raw)


@dataclass(frozen=True)
class Detail:
    """Where an error happened (``dcr_detail``). Fields that do not apply are None."""

    code: int
    name: str
    message: str
    file: Optional[str] = None
    offset: Optional[int] = None
    section: Optional[str] = None
    tensor: Optional[int] = None
    tensor_name: Optional[str] = None
    chunk: Optional[int] = None

    @classmethod
    def from_c(cls, d: "_lib.Detail", code: Optional[int] = None) -> "Detail":
        c = d.code if code is None else code
        none = _lib.NONE
        return cls(
            code=c,
            name=error_name(c),
            message=_text(d.message) if d.message else error_message(c),
            file=_text(d.file) if d.file else None,
            offset=None if d.offset == none else int(d.offset),
            section=_text(d.section) if d.section else None,
            tensor=None if d.tensor == none else int(d.tensor),
            tensor_name=_text(d.tensor_name) if d.tensor_name else None,
            chunk=None if d.chunk == none else int(d.chunk),
        )

    def __str__(self) -> str:
        where = []
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        if self.section:
            where.append(f"section {self.section}")
        if self.tensor_name is not None:
            where.append(f'tensor "{self.tensor_name}"')
        if self.chunk is not None:
            where.append(f"chunk {self.chunk}")
        s = f"{self.file}: " if self.file else ""
        s += f"{self.name}: {self.message}"
        return s + (f" ({', '.join(where)})" if where else "")


class Error(Exception):
    """A libdcr failure.

    Attributes:
        name: the error's DCR_E_ name, e.g. ``"DCR_E_BASE_MISMATCH"``.
        code: its number (SPEC.md §13), e.g. 21.
        detail: a :class:`Detail` with the file, offset, section, tensor, chunk and
            message the library reported.
    """

    def __init__(self, detail: Detail) -> None:
        super().__init__(str(detail))
        self.detail = detail
        self.code = detail.code
        self.name = detail.name

    @property
    def message(self) -> str:
        return self.detail.message


class ArgumentError(Error, ValueError):
    """DCR_E_ARGUMENT: a bad argument, such as an array that cannot be patched in
    place (not contiguous, read-only, not in CPU memory, of the wrong size)."""


class FormatError(Error):
    """A bundle that is not valid (codes DCR_E_TRUNCATED .. DCR_E_DECOMPRESS)."""


class BaseMismatchError(Error):
    """DCR_E_BASE_MISMATCH: the input is not the base the bundle was made for."""


class TargetMismatchError(Error):
    """DCR_E_TARGET_MISMATCH: applying the bundle does not give its target."""


class CheckpointError(Error):
    """DCR_E_CHECKPOINT: an input checkpoint that is not valid safetensors."""


class Cancelled(Error):
    """DCR_E_INTERRUPTED: stopped by a :class:`Cancel` token."""


class IOFailure(Error, OSError):
    """DCR_E_IO: a file could not be opened, read, written or renamed."""


class OutOfMemory(Error, MemoryError):
    """DCR_E_NOMEM: memory could not be allocated (or a budget was exceeded)."""


class SignatureError(Error):
    """DCR_E_SIGNATURE: a signature that a caller required is missing (an
    unsigned or stripped bundle), by no trusted key, malformed, or over other
    bytes than the bundle's or a checkpoint's (SPEC.md §20)."""


class FetchError(Error, OSError):
    """DCR_E_FETCH: a bundle at a URL could not be fetched (after retries), or the
    server answered with an error; DCR_E_CHANGED (:class:`ChangedError`) is a
    subclass. Transient: trying again later may succeed."""


class ChangedError(FetchError):
    """DCR_E_CHANGED: the bundle at a URL changed while it was being read."""


_BY_CODE: Dict[int, Type[Error]] = {
    1: IOFailure,
    2: OutOfMemory,
    3: ArgumentError,
    21: BaseMismatchError,
    22: TargetMismatchError,
    23: CheckpointError,
    24: Cancelled,
    27: SignatureError,
    28: FetchError,
    29: ChangedError,
}
for _c in range(4, 21):
    _BY_CODE[_c] = FormatError


def make_error(code: int, detail: Optional["_lib.Detail"] = None, **fields: Any) -> Error:
    """The exception for a code and a C detail (or the given fields)."""
    if detail is not None:
        d = Detail.from_c(detail, code)
    else:
        d = Detail(code=code, name=error_name(code), message=fields.pop("message", error_message(code)), **fields)
    return _BY_CODE.get(code, Error)(d)


def check(code: int, detail: "_lib.Detail") -> None:
    """Raises the exception for a non-zero return code."""
    if code:
        raise make_error(code, detail)


def argument_error(message: str, tensor_name: Optional[str] = None) -> ArgumentError:
    """A DCR_E_ARGUMENT raised by this package itself, before calling the library."""
    e = make_error(3, message=message, tensor_name=tensor_name)
    assert isinstance(e, ArgumentError)
    return e


def renamed(e: Error, names: Mapping[str, str]) -> Error:
    """e, or where its detail names a file in names (a /proc/self/fd path the
    library was given), the same error naming the file the caller knows."""
    f = e.detail.file
    if f in names:
        e = type(e)(replace(e.detail, file=names[f]))
    return e

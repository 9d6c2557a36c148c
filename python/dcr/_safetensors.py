"""Writing tensors the caller holds in memory as a safetensors file (SPEC.md §2.1),
on disk or in an anonymous memory file, so that the library, which reads
checkpoints by path, can encode them or compute their state id without a file on
any filesystem."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from . import _lib
from ._buffers import Region, region
from ._checkpoint import checkpoint_tensors, opened_checkpoint, reader_limits, summary
from ._errors import Error, argument_error, make_error, renamed

PathLike = Union[str, "os.PathLike[str]"]


class TensorData(NamedTuple):
    """A tensor given as its safetensors dtype name, shape and bytes: for dtypes that
    the array itself cannot tell (a float8 torch tensor, BF16 held as uint16...)."""

    dtype: str
    shape: Sequence[int]
    data: Any


_SIZES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}


class Tensors(dict):  # type: ignore[type-arg]
    """What :func:`load_safetensors` returns: a dict of tensor names to numpy
    arrays, with ``dtypes``, each tensor's safetensors dtype name (a BF16 tensor
    is held as uint16), which :func:`save_safetensors`, :func:`dcr.state_id` and
    :func:`dcr.encode_tensors` use for the arrays still in it."""

    dtypes: Dict[str, str]

    def __init__(self, *args: Any, dtypes: Optional[Mapping[str, str]] = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dtypes = dict(dtypes or {})


def _tensor(name: str, value: Any, dtype: Optional[str] = None) -> Tuple[str, List[int], Region]:
    what = f'tensor "{name}"'
    if dtype is not None and not isinstance(value, TensorData):
        r = region(value, what)
        shape = list(r.shape) if r.shape is not None else [r.nbytes]
        value = TensorData(dtype, shape, value)
    if isinstance(value, TensorData):
        r = region(value.data, what)
        shape = [int(n) for n in value.shape]
        count = 1
        for n in shape:
            count *= n
        size = _SIZES.get(value.dtype)
        if size is not None and count * size != r.nbytes:
            raise argument_error(
                f"{what}: {value.dtype} {tuple(shape)} is {count * size} bytes, its data {r.nbytes}", name
            )
        return value.dtype, shape, r
    r = region(value, what)
    if r.dtype is None or r.shape is None:
        raise argument_error(
            f"{what}: its dtype has no safetensors name here; give dcr.TensorData(dtype, shape, data)", name
        )
    return r.dtype, list(r.shape), r


def _write_all(fd: int, data: Union[bytes, memoryview]) -> None:
    mv = memoryview(data)
    while mv.nbytes:
        n = os.write(fd, mv[: 1 << 30])
        mv = mv[n:]


def write_safetensors_fd(fd: int, tensors: Mapping[str, Any], metadata: Optional[Mapping[str, str]] = None,
                         dtypes: Optional[Mapping[str, str]] = None) -> int:
    """Writes tensors as safetensors to the file descriptor fd; returns the bytes written."""
    dtypes = _dtypes(tensors, dtypes)
    items = []
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    at = 0
    for name in sorted(tensors, key=lambda n: n.encode()):
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise argument_error(f"bad tensor name {name!r}")
        dtype, shape, r = _tensor(name, tensors[name], dtypes.get(name))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + r.nbytes]}
        items.append(r)
        at += r.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-(8 + len(text)) % 8)
    _write_all(fd, len(text).to_bytes(8, "little") + text)
    for r in items:
        if r.nbytes:
            _write_all(fd, memoryview((ctypes.c_char * r.nbytes).from_address(r.address)).cast("B"))
    return 8 + len(text) + at


def _dtypes(tensors: Mapping[str, Any], dtypes: Optional[Mapping[str, str]]) -> Mapping[str, str]:
    if dtypes is not None:
        return dtypes
    return getattr(tensors, "dtypes", None) or {}


def save_safetensors(tensors: Mapping[str, Any], path: PathLike, metadata: Optional[Mapping[str, str]] = None,
                     *, dtypes: Optional[Mapping[str, str]] = None) -> int:
    """Writes a mapping of tensor names to arrays as a safetensors file at path.

    Values are numpy arrays, CPU tensors (DLPack: torch, JAX, including BF16), objects
    with ``__array_interface__`` or :class:`TensorData`. ``dtypes`` names the
    safetensors dtype of arrays whose own dtype does not tell it (BF16 held as
    uint16); by default ``tensors.dtypes`` where there is one (:class:`Tensors`).
    Tensors are laid out in name order. Returns the file's size. The file is
    written in place (not atomically)."""
    fd = os.open(os.fspath(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        return write_safetensors_fd(fd, tensors, metadata, dtypes)
    finally:
        os.close(fd)


@contextlib.contextmanager
def memory_file(tensors: Mapping[str, Any], label: str, dtypes: Optional[Mapping[str, str]] = None) -> Iterator[str]:
    """The tensors as safetensors in an anonymous memory file (memfd): yields a path
    that opens it, valid inside the with block."""
    fd = os.memfd_create(f"dcr-{label}", os.MFD_CLOEXEC)
    try:
        write_safetensors_fd(fd, tensors, None, dtypes)
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


# safetensors dtype name -> numpy dtype of the same width (BF16 and the float8
# kinds as unsigned integers: numpy has no such floats).
_LOAD_DTYPES = {
    "BOOL": "bool", "U8": "u1", "I8": "i1", "U16": "<u2", "I16": "<i2", "U32": "<u4", "I32": "<i4",
    "U64": "<u8", "I64": "<i8", "F16": "<f2", "F32": "<f4", "F64": "<f8", "BF16": "<u2",
    "F8_E5M2": "u1", "F8_E4M3": "u1", "F8_E8M0": "u1",
}


def load_safetensors(path: PathLike, *, max_memory: int = 0, limits: Optional[Mapping[str, int]] = None) -> Tensors:
    """Reads a safetensors file into writable numpy arrays (one buffer, one view per
    tensor, in bytewise name order), for patching in memory with
    :meth:`Bundle.apply_to`. BF16 and float8 tensors come as unsigned integers of
    their width (numpy has no such floats); other dtypes the format allows (packed
    4- and 6-bit floats...), and a tensor of no elements whose shape numpy cannot
    hold (``[2**62, 0]`` of BF16), as their uint8 bytes.

    The header is read by libdcr, as strictly as ``dcr apply`` reads a checkpoint
    (SPEC.md §2.1): a file it does not accept raises :class:`dcr.Error` with its code
    (:class:`dcr.CheckpointError` and the other format errors, :class:`dcr.IOFailure`
    for a file that cannot be read or shrinks while it is read). ``max_memory`` and
    ``limits`` are the reader's, as for :class:`Bundle`; the data region is read
    into memory whole, whatever its size."""
    import numpy as np

    shown = os.fspath(path)
    try:
        fd = os.open(shown, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise make_error(1, message=f"cannot open: {e.strerror}", file=shown) from None
    try:
        # The library opens the file this descriptor holds, so that the bytes read
        # below are those of the header it checked, even if path is replaced.
        proc = f"/proc/self/fd/{fd}"
        try:
            with opened_checkpoint(proc, 1, reader_limits(max_memory, limits)) as ck:
                info = summary(ck)
                tensors = checkpoint_tensors(ck)
        except Error as e:
            raise renamed(e, {proc: shown}) from None
        size = info.file_size - info.prefix_length
        try:
            data = np.empty(size, np.uint8)
        except MemoryError:
            raise make_error(2, message=f"cannot allocate the {size}-byte data region", file=shown) from None
        _read_at(fd, memoryview(data), info.prefix_length, shown)
    finally:
        os.close(fd)
    return _views(data, tensors)


def _views(data: Any, tensors: List[Any], skip: Any = ()) -> Tensors:
    """The tensors as views of their bytes in data (the data region), typed."""
    out = Tensors(dtypes={t.name: t.dtype for t in tensors if t.name not in skip})
    for t in tensors:
        if t.name in skip:
            continue
        raw = data[t.offset : t.offset + t.byte_length]
        dt = _LOAD_DTYPES.get(t.dtype)
        out[t.name] = raw
        if dt is not None:
            try:
                out[t.name] = raw.view(dt).reshape(t.shape)
            except ValueError:  # no elements, but dimensions numpy's sizes overflow (R-ST-4 allows them)
                pass
    return out


def load_checkpoint(path: PathLike, *, raw: bool = False, max_memory: int = 0,
                    limits: Optional[Mapping[str, int]] = None) -> Tensors:
    """Reads a checkpoint into writable numpy arrays, as :func:`load_safetensors`
    does: a safetensors file, or a directory (a Hugging Face model: shards, index,
    config, tokenizer), read as a checkpoint set (SPEC.md §2.3) by libdcr, which
    lists its members and parses every shard's header as ``dcr apply`` does.

    For a directory the result holds the tensors of every shard, whichever shard
    holds them: the weights a worker patches with :meth:`Bundle.apply_to` (which
    skips the raw members, config.json and the like, when they are not given).
    ``raw=True`` adds each raw member as a uint8 array named by its path. A member
    whose size changes while it is read raises :class:`dcr.IOFailure`."""
    import numpy as np

    shown = os.fspath(path)
    if not os.path.isdir(shown):
        return load_safetensors(path, max_memory=max_memory, limits=limits)
    with opened_checkpoint(shown, 3, reader_limits(max_memory, limits)) as ck:
        info = summary(ck)
        tensors = checkpoint_tensors(ck)
        members = []
        m = _lib.MemberInfoC()
        for i in range(info.member_count):
            _lib.lib.dcr_checkpoint_member(ck, i, ctypes.byref(m))
            members.append((ctypes.string_at(m.path, m.path_length).decode(), m.kind, m.prefix_length,
                            m.data_length))
    size = sum(member[3] for member in members)
    try:
        data = np.empty(size, np.uint8)
    except MemoryError:
        raise make_error(2, message=f"cannot allocate the {size}-byte data region", file=shown) from None
    at = 0
    for rel, _kind, prefix, length in members:
        file = os.path.join(shown, rel)
        try:
            fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            raise make_error(1, message=f"cannot open: {e.strerror}", file=file) from None
        try:
            if os.fstat(fd).st_size != prefix + length:
                raise make_error(1, message="the member's size changed since its header was read",
                                 file=file)
            _read_at(fd, memoryview(data[at : at + length]), prefix, file)
        finally:
            os.close(fd)
        at += length
    skip = set() if raw else {rel for rel, kind, _p, _l in members if kind != 1}
    return _views(data, tensors, skip)


def _read_at(fd: int, into: memoryview, offset: int, shown: str) -> None:
    """Fills into from the file at offset; a file that ends before is one that shrank
    after the library read its size, an I/O failure (as libdcr reports it)."""
    done = 0
    while done < into.nbytes:
        at = offset + done
        try:
            n = os.preadv(fd, [into[done : done + (1 << 30)]], at)
        except OSError as e:
            raise make_error(1, message=f"read failed at offset {at}: {e.strerror}", file=shown) from None
        if n == 0:
            raise make_error(1, message=f"file ends early (offset {at}): it shrank while being read",
                             file=shown, offset=at)
        done += n

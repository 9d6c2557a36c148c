"""dcr - DCR delta bundles for model weights, from Python.

A binding of libdcr (the C library of this repository) through ctypes: make a
bundle from two checkpoints (:func:`encode`), open and check one (:class:`Bundle`,
:func:`validate`), and apply it to weights held in memory (:meth:`Bundle.apply_to`,
numpy arrays or CPU tensors patched in place, on threads, with the GIL released),
to files (:meth:`Bundle.apply_file`, :meth:`Bundle.apply_in_place`), or change by
change (:meth:`Bundle.changes`, for device memory); squash a chain of bundles
into one (:func:`squash`) and keep a run's chain in a history archive
(:mod:`dcr.history`); sign bundles and require signatures by trusted keys
(:func:`keygen`, :func:`sign`, :class:`Keyring`, ``require_signature=``). Every
failure raises a
:class:`Error` carrying the DCR_E_ name, its number and the library's detail.

The library is found through the DCR_LIBRARY environment variable (a path to
libdcr.so.1), else a copy installed next to this package, else the system's
libdcr.so.1; importing fails with ImportError if its version is not the one this
package was written for.
"""

from __future__ import annotations

import ctypes
import io
import os
from typing import Any, BinaryIO, Callable, List, Mapping, Optional, Tuple, Union

from . import _lib
from ._bundle import (
    Bundle,
    BundleInfo,
    Cancel,
    Change,
    Changes,
    ChunkInfo,
    FetchStats,
    MemberInfo,
    PatchStats,
    Problem,
    SectionInfo,
    TensorInfo,
    TensorSide,
    _Callbacks,
    checkpoint_path,
)
from ._errors import (
    ArgumentError,
    BaseMismatchError,
    Cancelled,
    ChangedError,
    CheckpointError,
    Detail,
    Error,
    FetchError,
    FormatError,
    IOFailure,
    OutOfMemory,
    SignatureError,
    TargetMismatchError,
    argument_error,
    check,
    error_message,
    error_name,
    renamed,
)
from ._checkpoint import opened_checkpoint, reader_limits
from ._encoding import EncodeStats, max_minor
from ._squash import squash
from ._placement import Place
from ._scatter import scatter
from ._signing import Keyring, SignatureResult, keygen, scope_code, sign
from . import history
from ._safetensors import TensorData, Tensors, load_checkpoint, load_safetensors, memory_file, save_safetensors

__all__ = [
    "ABI_VERSION", "FORMAT_VERSION", "VERSION", "__version__", "library_version", "library_path",
    "default_threads",
    "encode", "encode_bytes", "encode_tensors", "squash", "history", "keygen", "sign", "Keyring",
    "SignatureResult", "SignatureError", "state_id", "validate", "save_safetensors", "load_safetensors", "load_checkpoint",
    "Bundle", "Place", "scatter", "BundleInfo", "TensorInfo", "TensorSide", "ChunkInfo", "SectionInfo", "MemberInfo",
    "Problem", "PatchStats", "EncodeStats", "Change", "Changes", "Cancel", "TensorData", "Tensors",
    "Error", "Detail", "ArgumentError", "FormatError", "BaseMismatchError", "TargetMismatchError",
    "CheckpointError", "Cancelled", "IOFailure", "OutOfMemory", "FetchError", "ChangedError",
    "FetchStats", "error_name", "error_message",
]

__version__ = _lib.VERSION_STRING
VERSION: Tuple[int, int, int] = (_lib.VERSION_MAJOR, _lib.VERSION_MINOR, _lib.VERSION_PATCH)
ABI_VERSION: int = _lib.ABI_VERSION
FORMAT_VERSION: Tuple[int, int] = (_lib.FORMAT_MAJOR, _lib.FORMAT_MINOR)
library_version = _lib.library_version
library_path: str = _lib.path

PathLike = Union[str, "os.PathLike[str]"]
Progress = Callable[[int, int], Any]
L = _lib.lib


def default_threads() -> int:
    """The thread count that ``threads=0`` means: the CPUs this process may use
    (affinity and cgroup quota), at most 32."""
    return int(L.dcr_default_threads())


def _encode_options(
    chunk_size: Optional[int], level: Optional[int], threads: int, raw: bool,
    metadata: Optional[Mapping[str, Any]], cb: _Callbacks, replace: bool, sync: bool, max_memory: int,
    unrelated: bool, format: Optional[str],
) -> Tuple["_lib.EncodeOptions", Any]:
    o = _lib.EncodeOptions()
    L.dcr_encode_options_default(ctypes.byref(o))
    if chunk_size is not None:
        o.chunk_size = chunk_size
    if level is not None:
        o.level = level
    o.threads = threads
    o.raw = int(raw)
    keep: List[Any] = []
    if metadata:
        for k, v in metadata.items():  # stored as text (SPEC.md §6.4): a number is written in decimal
            if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (str, int)):
                raise argument_error(f"metadata is text: a str key and a str or int value, not {k!r}: {v!r}")
        pairs = [(k.encode(), str(v).encode()) for k, v in metadata.items()]
        arr = (_lib.Meta * len(pairs))(*[_lib.Meta(k, v) for k, v in pairs])
        keep += [pairs, arr]
        o.meta = ctypes.cast(arr, ctypes.POINTER(_lib.Meta))
        o.meta_count = len(pairs)
    o.progress = cb.fn
    o.cancel = cb.cancel._pointer
    o.no_replace = int(not replace)
    o.no_sync = int(not sync)
    o.max_memory = max_memory
    o.unrelated = int(unrelated)
    if format is not None:
        o.max_minor = max_minor(format)
    return o, keep


def encode(
    base: PathLike,
    target: PathLike,
    out: Union[PathLike, BinaryIO],
    *,
    chunk_size: Optional[int] = None,
    level: Optional[int] = None,
    threads: int = 0,
    raw: bool = False,
    metadata: Optional[Mapping[str, Any]] = None,
    replace: bool = True,
    sync: bool = True,
    max_memory: int = 0,
    unrelated: bool = False,
    format: Optional[str] = None,
    progress: Optional[Progress] = None,
    cancel: Optional[Cancel] = None,
    sign_key: Optional[PathLike] = None,
    sign_scope: str = "checkpoints",
    sliced: Optional[List[str]] = None,
) -> EncodeStats:
    """Encodes the changes from ``base`` to ``target`` (safetensors files, model
    directories, or any two files with ``raw=True``) into a bundle, as ``dcr
    encode`` does, and returns its statistics.

    Args:
        out: a path, written atomically (a temporary file linked into place when the
            bundle is whole, fsynced unless ``sync=False``; an existing file is
            replaced unless ``replace=False``); or a binary file object with
            ``write`` (whose contents must be discarded if this raises).
        chunk_size: a power of two from 4 KiB (default 4 MiB).
        level: zstd level, 0 stores without compression (default 3).
        threads: worker threads; 0 = the CPUs this process may use.
        metadata: key/value pairs stored in the bundle as text (``--meta step=1200``):
            str keys, str or int values (an int is written in decimal, and
            :attr:`Bundle.metadata` gives it back as a str; :attr:`Bundle.step` as a number).
        max_memory: memory budget for reading the inputs' headers (0: 1 GiB).
        unrelated: encode inputs that share no tensor name.
        format: the newest format the bundle may need, "1.0" to "1.3" (default);
            "1.1" leaves out DELTA_CLASSED (1.2) and DELTA_BANDED (1.3) chunks,
            whose positions depend on the base (:meth:`Bundle.changes` then needs
            no base).
        progress: called with (bytes done, total) from the calling thread; an
            exception it raises stops the encode and is raised again.
        cancel: a :class:`Cancel` token that stops the encode from another thread.
        sign_key: a secret key file (:func:`keygen`): the bundle is signed with it
            as it is written (SPEC.md §20), in the encode's one pass: the same
            bytes as :func:`sign` of the unsigned bundle, with no second read of
            the bundle or the checkpoints.
        sign_scope: what ``sign_key`` signs. "checkpoints" (default): the bundle
            and SHA-256 digests of the base's and target's tensors, so that a
            checkpoint can be checked against the signature
            (:meth:`Bundle.verify_signed_checkpoint`); hashing both costs more
            than the encode itself. "bundle": the bundle alone (signature format
            2.0, SPEC.md §20.6), nearly free, and all a worker that applies the
            bundle to a base of its own needs. README, "Signed bundles", has both
            costs measured.
        sliced: fnmatch patterns of the tensors that workers hold in part
            (tensor-parallel slices, :class:`dcr.Place`): their chunks are coded
            with positions that need no base, so that a rank holding any block of
            them decodes it alone, at about 1.4x their size; the rest keep the
            default format's coding. A pattern that matches no tensor raises
            :class:`dcr.ArgumentError`.
    """
    cb = _Callbacks(progress, cancel)
    o, keep = _encode_options(chunk_size, level, threads, raw, metadata, cb, replace, sync, max_memory,
                              unrelated, format)
    o.sign_scope = scope_code(sign_scope)
    if sign_key is None and sign_scope != "checkpoints":
        raise argument_error("sign_scope without sign_key: nothing is signed")
    if sign_key is not None:
        key = os.fsencode(os.fspath(sign_key))
        keep = (keep, key)
        o.sign_key = key
    if sliced:
        patterns = (ctypes.c_char_p * len(sliced))(*(p.encode() for p in sliced))
        keep = (keep, patterns)
        o.sliced, o.sliced_count = ctypes.cast(patterns, ctypes.POINTER(ctypes.c_char_p)), len(sliced)
    if hasattr(out, "write"):
        return _encode_to(base, target, out.write, o, cb)  # type: ignore[union-attr]
    stats = _encode_file(base, target, out, o, cb)  # type: ignore[arg-type]
    del keep
    return stats


def _encode_file(base: PathLike, target: PathLike, out: PathLike, o: "_lib.EncodeOptions",
                 cb: _Callbacks) -> EncodeStats:
    st = _lib.EncodeStatsC()
    d = _lib.Detail()
    rc = L.dcr_encode_file(_c(base), _c(target), _b(out), ctypes.byref(o), ctypes.byref(st), ctypes.byref(d))
    cb.reraise()
    check(rc, d)
    return EncodeStats._from_c(st)


def _b(p: PathLike) -> bytes:
    return os.fsencode(os.fspath(p))


def _c(p: PathLike) -> bytes:
    return os.fsencode(checkpoint_path(p))


def _encode_to(base: PathLike, target: PathLike, write: Callable[[bytes], Any], o: "_lib.EncodeOptions",
               cb: _Callbacks) -> EncodeStats:
    errors: List[BaseException] = []

    def sink(opaque: Any, data: int, size: int) -> int:
        try:
            write(ctypes.string_at(data, size))
            return 0
        except BaseException as e:  # carried to the caller
            errors.append(e)
            return 1

    fn = _lib.WRITE_FN(sink)
    st = _lib.EncodeStatsC()
    d = _lib.Detail()
    rc = L.dcr_encode(_c(base), _c(target), ctypes.byref(o), fn, None, ctypes.byref(st), ctypes.byref(d))
    if errors:
        raise errors[0]
    cb.reraise()
    check(rc, d)
    return EncodeStats._from_c(st)


def encode_bytes(base: PathLike, target: PathLike, **options: Any) -> Tuple[bytes, EncodeStats]:
    """:func:`encode` into memory: returns the bundle's bytes and the statistics
    (options as for :func:`encode`; ``replace`` and ``sync`` do not apply). With
    ``sign_key`` the bytes are the signed bundle."""
    buf = io.BytesIO()
    stats = encode(base, target, buf, **options)
    return buf.getvalue(), stats


def encode_tensors(
    base: Mapping[str, Any],
    target: Mapping[str, Any],
    out: Union[PathLike, BinaryIO, None] = None,
    *,
    base_dtypes: Optional[Mapping[str, str]] = None,
    target_dtypes: Optional[Mapping[str, str]] = None,
    **options: Any,
) -> Union[EncodeStats, Tuple[bytes, EncodeStats]]:
    """:func:`encode` from tensors held in memory (mappings of names to numpy arrays
    or CPU tensors, BF16 torch tensors included, or :class:`TensorData`), with no
    file on any filesystem: each side is written as safetensors (tensors in name
    order) into an anonymous memory file (memfd) for the library to read, so it
    costs one copy of each side in memory for the duration of the call. With
    ``out=None`` returns ``(bytes, stats)``, else the stats. ``base_dtypes`` and
    ``target_dtypes`` name the safetensors dtype of arrays whose own dtype does not
    tell it (BF16 held as uint16; by default the mapping's ``dtypes``, as
    :func:`load_safetensors` gives)."""
    with memory_file(base, "base", base_dtypes) as bp, memory_file(target, "target", target_dtypes) as tp:
        try:
            if out is None:
                return encode_bytes(bp, tp, **options)
            return encode(bp, tp, out, **options)
        except Error as e:
            raise renamed(e, {bp: "<base tensors>", tp: "<target tensors>"}) from None


def state_id(source: Union[PathLike, Mapping[str, Any]], *, raw: bool = False, threads: int = 0,
             max_memory: int = 0, dtypes: Optional[Mapping[str, str]] = None) -> str:
    """The state id (SPEC.md §7) of a checkpoint, as 32 hex digits, as ``dcr id``
    prints it: the id a bundle names as its base (``bundle.base_state``) and its
    target. ``source`` is a safetensors file, a model directory (a checkpoint set),
    any file with ``raw=True``, or a mapping of tensor names to arrays held in
    memory (written to an anonymous memory file first: one copy). The id depends
    only on the tensors' names, dtypes, shapes and bytes: for a mapping, ``dtypes``
    names the safetensors dtype of arrays whose own dtype does not tell it (BF16
    held as uint16; by default the mapping's ``dtypes``, as :func:`load_safetensors`
    gives)."""
    if isinstance(source, Mapping):
        with memory_file(source, "state", dtypes) as p:
            try:
                return _state_id_path(p, 1, threads, max_memory)
            except Error as e:
                raise renamed(e, {p: "<tensors>"}) from None
    path = checkpoint_path(source)
    kind = 0 if raw else 3 if os.path.isdir(path) else 1
    return _state_id_path(path, kind, threads, max_memory)


def _state_id_path(path: PathLike, kind: int, threads: int, max_memory: int) -> str:
    with opened_checkpoint(path, kind, reader_limits(max_memory)) as ck:
        out = (ctypes.c_uint8 * 16)()
        d = _lib.Detail()
        check(L.dcr_checkpoint_state_id(ck, threads, ctypes.byref(out), ctypes.byref(d)), d)
        return bytes(out).hex()


def validate(
    source: Union[PathLike, bytes, bytearray, memoryview],
    base: Optional[PathLike] = None,
    target: Optional[PathLike] = None,
    *,
    threads: int = 0,
    max_memory: int = 0,
) -> List[Problem]:
    """Every problem ``dcr validate --json BUNDLE [--base B] [--target T]`` reports,
    as :class:`Problem` objects, structure problems (found when the bundle is
    opened) included; empty when valid. See :meth:`Bundle.validate`."""
    try:
        b = Bundle(source, threads=threads, max_memory=max_memory)
    except Error as e:
        return [Problem.from_error(e, "structure")]
    with b:
        return b.validate(base, target)

"""dcr.Bundle: an open bundle, its description, validation, and applying it to
arrays in memory, to files, or change by change."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple, Union

import numpy as np

from . import _lib
from ._buffers import region
from ._closing import _Closing
from ._checkpoint import reader_limits
from ._errors import Detail, Error, argument_error, check, error_name
from ._http import http_options, is_url
from ._placement import apply_placed, placed
from ._signing import Keys, SignatureResult, trusted, verify_reader

L = _lib.lib
PathLike = Union[str, "os.PathLike[str]"]
Progress = Callable[[int, int], Any]

KINDS = {0: "raw", 1: "safetensors", 3: "set"}
VERIFY = {"full": 0, "chunk": 1, "none": 2}
OPS = {0: "xor", 1: "overwrite", 2: "delta"}
COMPRESSIONS = {0: "none", 1: "zstd"}


def _hex(b: Any) -> str:
    return bytes(b).hex()


def _str(ptr: Optional[int], length: int) -> str:
    return ctypes.string_at(ptr, length).decode("utf-8", "backslashreplace") if length else ""


def _dtype_name(code: int) -> str:
    s = L.dcr_dtype_name(code)
    return s.decode() if s else f"dtype {code}"


def _verify_level(verify: str) -> int:
    try:
        return VERIFY[verify]
    except (KeyError, TypeError):
        raise argument_error(f"verify must be 'full', 'chunk' or 'none', not {verify!r}") from None


def checkpoint_path(p: PathLike) -> str:
    """A checkpoint set may be named by its index file, as the CLI allows:
    "DIR/model.safetensors.index.json" is the directory DIR."""
    s = os.fspath(p)
    if s.endswith(".safetensors.index.json") and os.path.isfile(s):
        return os.path.dirname(s) or "."
    return s


def _path(p: PathLike) -> bytes:
    return os.fsencode(os.fspath(p))


def _ckpt(p: PathLike) -> bytes:
    return os.fsencode(checkpoint_path(p))


# ---- descriptions -----------------------------------------------------------------


@dataclass(frozen=True)
class BundleInfo:
    """A bundle's header and manifest summary (``dcr_bundle_info``)."""

    format_version: Tuple[int, int]
    bundle_size: int
    kind: str  # "safetensors", "raw" or "set"
    chunk_size: int
    entry_count: int
    chunk_count: int
    prefix_length: int
    target_size: int
    base_state: str  # state ids (SPEC.md §7) as 32 hex digits, as `dcr id` prints them
    target_state: str
    meta_count: int
    section_count: int
    member_count: int


@dataclass(frozen=True)
class TensorSide:
    """One side (base or target) of a manifest entry."""

    dtype: str
    shape: Tuple[int, ...]
    byte_length: int
    offset: int  # target only: offset in the data region
    hash: str  # the tensor hash (SPEC.md §7), 32 hex digits


@dataclass(frozen=True)
class TensorInfo:
    """A manifest entry: the tensor's base and target sides (None where absent)."""

    index: int
    name: str
    base: Optional[TensorSide]
    target: Optional[TensorSide]
    delta_coded: bool  # coded against the base bytes, patched in place
    resized: bool  # coded against the base over the common prefix (format 1.1)
    changed_chunks: int  # chunks the bundle carries for it
    selected: bool = True  # False if Bundle.select left it out
    raw: int = 0  # a set's raw member file (config.json...) on the sides 1 base, 2 target, 3 both

    @property
    def raw_member(self) -> bool:
        """A raw member of a set (SPEC.md §2.3) on every side it has: one that
        :meth:`Bundle.apply_to` skips when it is not given."""
        sides = (1 if self.base else 0) | (2 if self.target else 0)
        return bool(self.raw) and self.raw & sides == sides

    @property
    def status(self) -> str:
        """As ``dcr inspect`` names it: "removed", "added", "resized", "recoded",
        "reshaped" (same bytes, new shape), "changed" or "unchanged"."""
        if self.target is None:
            return "removed"
        if self.base is None:
            return "added"
        if self.resized:
            return "resized"
        if not self.delta_coded:
            return "recoded"
        if self.base.shape != self.target.shape:
            return "reshaped"
        return "changed" if self.changed_chunks else "unchanged"


@dataclass(frozen=True)
class ChunkInfo:
    """A changed chunk's index record (``dcr_chunk_info``)."""

    tensor: int  # manifest entry
    tensor_name: str
    chunk: int
    encoding: str  # "XOR_DENSE", ..., "DELTA_CLASSED", "DELTA_BANDED"
    compression: str  # "none" or "zstd"
    count: int  # changed elements
    offset: int  # of the CHNK section in the bundle
    payload_length: int
    base_check: int
    target_check: int


@dataclass(frozen=True)
class SectionInfo:
    """A section of the bundle, in file order."""

    type: str
    critical: bool
    compression: str
    offset: int
    length: int


@dataclass(frozen=True)
class MemberInfo:
    """A member file of a checkpoint set's target (format 1.1)."""

    path: str
    kind: str
    prefix_length: int
    data_length: int


@dataclass(frozen=True)
class Problem:
    """One problem found by validation: the fields of an element of the "errors"
    list that ``dcr validate --json`` prints (see :meth:`to_dict`)."""

    code: str  # "DCR_E_CHECKSUM"
    number: int  # 8
    message: str
    stage: str  # "structure", "chunks", "base" or "target"
    file: Optional[str]
    offset: Optional[int]
    section: Optional[str]
    tensor: Optional[str]  # the tensor's name
    chunk: Optional[int]

    @classmethod
    def from_detail(cls, d: Detail, stage: str) -> "Problem":
        return cls(d.name, d.code, d.message, stage, d.file, d.offset, d.section, d.tensor_name, d.chunk)

    @classmethod
    def from_error(cls, e: Error, stage: str) -> "Problem":
        return cls.from_detail(e.detail, stage)

    def to_dict(self) -> Dict[str, Any]:
        """The problem as ``dcr validate --json`` writes it."""
        return {
            "code": self.code,
            "number": self.number,
            "message": self.message,
            "stage": self.stage,
            "file": self.file,
            "offset": self.offset,
            "section": self.section,
            "tensor": self.tensor,
            "chunk": self.chunk,
        }


@dataclass(frozen=True)
class FetchStats:
    """What a :class:`Bundle` opened from a URL has fetched so far."""

    bundle_size: int
    bytes_fetched: int  # body bytes received, retries included
    requests: int
    retries: int


@dataclass(frozen=True)
class PatchStats:
    """What :meth:`Bundle.apply_to` or :meth:`Bundle.apply_in_place` did."""

    already_target: bool  # the input was the target already: nothing written
    recovered: bool  # a journal left by an interrupted in-place apply was replayed
    chunks_patched: int
    bytes_checked: int
    bytes_written: int
    journal_bytes: int
    added: Tuple[str, ...] = ()  # apply_to: names inserted into the mapping
    replaced: Tuple[str, ...] = ()  # apply_to: names whose array was replaced (recoded)
    removed: Tuple[str, ...] = ()  # apply_to: names deleted from the mapping
    reshaped: Tuple[str, ...] = ()  # apply_to: names given a view of their new shape
    journal_discarded: bool = False  # in place: a journal that could not be replayed was
    # removed, the file being proven its base or target (SPEC.md §18.4, R-JNL-4)
    salvaged: bool = False  # in place: a part-written file was finished (salvage=True)
    chunks_unchecked: int = 0  # apply_to with places: chunks held in part, written unchecked
    chunks_not_held: int = 0  # apply_to with places: changed chunks no place touches


class Cancel:
    """A cancel token: :meth:`set` (from any thread) stops a running encode,
    validation or apply with :class:`dcr.Cancelled` (DCR_E_INTERRUPTED) where the
    library checks it; an in-memory or in-place apply is stopped only during its
    checking pass, so it never leaves a patch half done."""

    def __init__(self) -> None:
        self._flag = ctypes.c_int(0)

    def set(self) -> None:
        """Ask the operation to stop."""
        self._flag.value = 1

    def clear(self) -> None:
        """Make the token usable again."""
        self._flag.value = 0

    def is_set(self) -> bool:
        return bool(self._flag.value)

    @property
    def _pointer(self) -> "ctypes._Pointer[ctypes.c_int]":
        return ctypes.pointer(self._flag)


class _Callbacks:
    """A progress callback and a cancel flag for one call. An exception raised by
    the progress callback (KeyboardInterrupt included) cancels the operation and is
    raised again when the call returns."""

    def __init__(self, progress: Optional[Progress], cancel: Optional[Cancel]) -> None:
        self.cancel = cancel if cancel is not None else Cancel()
        self.error: Optional[BaseException] = None
        self.user = progress
        self.fn = _lib.PROGRESS_FN(self._progress) if progress is not None else _lib.PROGRESS_FN()

    def _progress(self, opaque: Any, done: int, total: int) -> None:
        if self.error is not None or self.user is None:
            return
        try:
            self.user(done, total)
        except BaseException as e:  # noqa: B902 - carried to the caller
            self.error = e
            self.cancel.set()

    def reraise(self) -> None:
        if self.error is not None:
            e, self.error = self.error, None
            raise e


# ---- the bundle -------------------------------------------------------------------


class Bundle(_Closing):
    """An open DCR bundle.

    ``Bundle(path)`` opens a file; ``Bundle(data)`` a bundle in memory (bytes,
    bytearray, memoryview, a numpy uint8 array: any buffer, kept referenced while
    the bundle is open). Opening checks the whole structure (header, every section
    checksum, manifest, index); a bad bundle raises :class:`dcr.FormatError` (or
    another :class:`dcr.Error`). Chunk contents are decoded by :meth:`validate`,
    :meth:`verify` and the apply methods.

    ``Bundle("https://...")`` reads a bundle from an HTTP(S) URL (an object store's
    presigned URL, an origin, a caching relay) by range requests (SPEC.md §21):
    the footer, manifest, identities and index at once, then the chunks as the
    apply methods use them, each checked as it arrives; faults are retried. A fetch
    that fails for good raises :class:`dcr.FetchError`; an object that changes
    while it is read, :class:`dcr.ChangedError`. See :attr:`fetch_stats`.

    Use it as a context manager, or call :meth:`close`, to free it at once. One
    Bundle may be used from several threads: calls on it are serialized.

    Args:
        source: a path, or the bundle's bytes.
        max_memory: the reader's memory budget in bytes (0: the library's 1 GiB).
        limits: other ``dcr_limits`` fields to tighten, e.g. ``{"max_tensors": 4096}``.
        threads: threads for decoding chunks; 0 = the CPUs this process may use.
        headers: for a URL, headers sent with every request, e.g.
            ``{"Authorization": "Bearer ..."}`` (never shown in errors).
        http_retries: for a URL, attempts after the first per request (5).
        http_timeout: for a URL, seconds a transfer may receive nothing before it is
            retried (30).
        ca_file: for an https URL, PEM CA certificates (default: the system's).
        require_signature: trusted public keys (a list of key files, as ``dcr
            keygen`` writes NAME.pub, or a :class:`dcr.Keyring`): the bundle must
            be signed by one of them (SPEC.md §20.4), checked by the reader this
            object then applies from, on the bytes it holds (the file, the
            buffer, or the URL's, fetched whole for it), before any chunk is
            decoded. An unsigned bundle, one signed by no trusted key, or one
            whose bytes are not what was signed raises :class:`dcr.SignatureError`
            (DCR_E_SIGNATURE) here. See :meth:`verify_signature`.
    """

    def __init__(
        self,
        source: Union[PathLike, bytes, bytearray, memoryview, np.ndarray],
        *,
        max_memory: int = 0,
        limits: Optional[Mapping[str, int]] = None,
        threads: int = 0,
        headers: Optional[Mapping[str, str]] = None,
        http_retries: Optional[int] = None,
        http_timeout: Optional[int] = None,
        ca_file: Optional[PathLike] = None,
        require_signature: Optional[Keys] = None,
    ) -> None:
        self._reader = ctypes.c_void_p()
        self._lock = threading.RLock()
        self._keep: Any = None
        self.path: Optional[str] = None
        lim = reader_limits(max_memory, limits)
        d = _lib.Detail()
        url = is_url(source)
        http, _headers = http_options(url, headers, http_retries, http_timeout, ca_file)  # kept until opened
        if url:
            self.path = str(source)
            rc = L.dcr_reader_open_url(ctypes.byref(self._reader), self.path.encode(), ctypes.byref(http),
                                       ctypes.byref(lim), ctypes.byref(d))
        elif isinstance(source, (str, os.PathLike)):
            self.path = os.fspath(source)
            rc = L.dcr_reader_open_file(ctypes.byref(self._reader), _path(source), ctypes.byref(lim), ctypes.byref(d))
        else:
            r = region(source, "the bundle's bytes")
            self._keep = r.keep
            rc = L.dcr_reader_open_memory(
                ctypes.byref(self._reader), ctypes.c_void_p(r.address), r.nbytes, ctypes.byref(lim), ctypes.byref(d)
            )
        check(rc, d)
        self._threads = threads
        L.dcr_reader_set_threads(self._reader, threads)
        if require_signature is not None:
            try:
                self.verify_signature(require_signature)
            except BaseException:
                self.close()
                raise
        self._info: Optional[BundleInfo] = None
        self._tensors: Optional[List[TensorInfo]] = None
        self._chunks: Optional[List[ChunkInfo]] = None

    def select(self, *patterns: str) -> int:
        """Restricts the bundle to the tensors whose names match one of the
        patterns (fnmatch(3): ``*`` matches dots too), for a worker that holds a
        slice of the model: :meth:`apply_to` then patches those only (the mapping
        needs no others), :meth:`verify` and :meth:`changes` see their chunks only,
        and a bundle opened from a URL fetches their chunks only. ``"full"``
        verification checks each selected tensor's hashes, not the state ids.
        :meth:`apply_file`, :meth:`apply_in_place` and :meth:`check_target` need
        every tensor and raise :class:`dcr.ArgumentError`. No pattern selects all
        tensors again. Returns how many are selected; a pattern that matches none
        raises :class:`dcr.ArgumentError` and changes nothing."""
        with self._lock:
            arr = (ctypes.c_char_p * max(len(patterns), 1))(*(p.encode() for p in patterns))
            n = ctypes.c_uint64()
            d = _lib.Detail()
            check(L.dcr_reader_select_tensors(self._r(), arr, len(patterns), ctypes.byref(n), ctypes.byref(d)), d)
            self._tensors = None
            return n.value

    @property
    def fetch_stats(self) -> FetchStats:
        """What has been fetched so far (all zeros for a bundle not opened from a URL)."""
        with self._lock:
            s = _lib.FetchStatsC()
            L.dcr_reader_fetch_stats(self._r(), ctypes.byref(s), ctypes.sizeof(s))
            return FetchStats(s.bundle_size, s.bytes_fetched, s.requests, s.retries)

    # -- lifetime

    def close(self) -> None:
        """Frees the reader. Further use raises ValueError."""
        with self._lock:
            if self._reader:
                L.dcr_reader_free(self._reader)
                self._reader = ctypes.c_void_p()
            self._keep = None

    def _r(self) -> ctypes.c_void_p:
        if not self._reader:
            raise ValueError("the bundle is closed")
        return self._reader

    def __repr__(self) -> str:
        if not self._reader:
            return "<dcr.Bundle (closed)>"
        i = self.info
        src = self.path if self.path is not None else "<memory>"
        return (
            f"<dcr.Bundle {src}: format {i.format_version[0]}.{i.format_version[1]}, "
            f"{i.entry_count} tensors, {i.chunk_count} changed chunks, "
            f"{i.base_state} -> {i.target_state}>"
        )

    # -- description

    @property
    def info(self) -> BundleInfo:
        """Header and manifest summary; state ids as 32 hex digits."""
        if self._info is None:
            c = _lib.BundleInfoC()
            L.dcr_reader_info(self._r(), ctypes.byref(c))
            self._info = BundleInfo(
                (c.format_major, c.format_minor), c.bundle_size, KINDS.get(c.kind, str(c.kind)),
                c.chunk_size, c.entry_count, c.chunk_count, c.prefix_length, c.target_size,
                _hex(c.base_state), _hex(c.target_state), c.meta_count, c.section_count, c.member_count,
            )
        return self._info

    @property
    def base_state(self) -> str:
        """The state id of the checkpoint the bundle applies to."""
        return self.info.base_state

    @property
    def target_state(self) -> str:
        """The state id of the checkpoint the bundle produces."""
        return self.info.target_state

    @staticmethod
    def _side(s: "_lib.TensorSideC") -> Optional[TensorSide]:
        if not s.present:
            return None
        shape = tuple(int(s.dims[k]) for k in range(s.rank))
        return TensorSide(_dtype_name(s.dtype), shape, s.byte_length, s.offset, _hex(s.hash))

    @property
    def tensors(self) -> List[TensorInfo]:
        """The manifest: one entry per tensor of either side, in name order."""
        if self._tensors is None:
            counts: Dict[int, int] = {}
            for c in self.chunks:
                counts[c.tensor] = counts.get(c.tensor, 0) + 1
            out = []
            t = _lib.TensorInfoC()
            r = self._r()
            for i in range(self.info.entry_count):
                L.dcr_reader_tensor(r, i, ctypes.byref(t))
                out.append(
                    TensorInfo(i, _str(t.name, t.name_length), self._side(t.base), self._side(t.target),
                               bool(t.delta_coded), bool(t.resized), counts.get(i, 0), bool(t.selected),
                               int(t.raw))
                )
            self._tensors = out
        return self._tensors

    @property
    def chunks(self) -> List[ChunkInfo]:
        """The chunk index: every changed chunk the bundle carries, in index order."""
        if self._chunks is None:
            names: Dict[int, str] = {}
            t = _lib.TensorInfoC()
            c = _lib.ChunkInfoC()
            r = self._r()
            out = []
            for i in range(self.info.chunk_count):
                L.dcr_reader_chunk(r, i, ctypes.byref(c))
                if c.tensor not in names:
                    L.dcr_reader_tensor(r, c.tensor, ctypes.byref(t))
                    names[c.tensor] = _str(t.name, t.name_length)
                enc = L.dcr_encoding_name(c.encoding)
                out.append(
                    ChunkInfo(c.tensor, names[c.tensor], c.chunk, enc.decode() if enc else str(c.encoding),
                              COMPRESSIONS.get(c.compression, str(c.compression)), c.count, c.offset,
                              c.payload_length, c.base_check, c.target_check)
                )
            self._chunks = out
        return self._chunks

    @property
    def metadata(self) -> Dict[str, str]:
        """The bundle's metadata pairs (``--meta step=1200``), in key order. The
        format stores keys and values as text (SPEC.md §6.4): ``encode(metadata=
        {"step": 7})`` reads back as ``{"step": "7"}``; :attr:`step` gives the
        standard key as a number."""
        m = _lib.Meta()
        r = self._r()
        out: Dict[str, str] = {}
        for i in range(self.info.meta_count):
            L.dcr_reader_meta(r, i, ctypes.byref(m))
            out[(m.key or b"").decode()] = (m.value or b"").decode()
        return out

    @property
    def step(self) -> Optional[int]:
        """The ``step`` metadata (SPEC.md §6.4.1) as a number, None where the bundle
        has none. A value the standard does not allow (a sign, leading zeros, 2**53
        or more) raises :class:`dcr.ArgumentError`: a bundle with it is still valid,
        but its step cannot be used."""
        value = self.metadata.get("step")
        if value is None:
            return None
        if not (value.isascii() and value.isdigit()) or (value[0] == "0" and value != "0") or int(value) >= 2**53:
            raise argument_error(f"the bundle's step metadata {value!r} is not a decimal integer below 2**53 "
                                 "without sign or leading zeros (SPEC.md §6.4.1)")
        return int(value)

    @property
    def sections(self) -> List[SectionInfo]:
        """Every section, in file order (the footer included)."""
        s = _lib.SectionInfoC()
        r = self._r()
        out = []
        for i in range(self.info.section_count):
            L.dcr_reader_section(r, i, ctypes.byref(s))
            out.append(SectionInfo(s.type.decode("latin-1"), bool(s.critical),
                                   COMPRESSIONS.get(s.compression, str(s.compression)), s.offset, s.length))
        return out

    @property
    def members(self) -> List[MemberInfo]:
        """A checkpoint set's target member files (format 1.1); empty otherwise."""
        m = _lib.MemberInfoC()
        r = self._r()
        out = []
        for i in range(self.info.member_count):
            L.dcr_reader_member(r, i, ctypes.byref(m))
            out.append(MemberInfo(_str(m.path, m.path_length), KINDS.get(m.kind, str(m.kind)),
                                  m.prefix_length, m.data_length))
        return out

    # -- checking

    def verify(self, *, progress: Optional[Progress] = None, cancel: Optional[Cancel] = None) -> None:
        """Decodes every chunk and checks every rule that needs no base (SPEC.md §9);
        raises the first problem as a :class:`dcr.Error`."""
        with self._lock:
            cb = _Callbacks(progress, cancel)
            r = self._r()
            L.dcr_reader_set_progress(r, cb.fn, None)
            L.dcr_reader_set_cancel(r, cb.cancel._pointer)
            d = _lib.Detail()
            try:
                rc = L.dcr_reader_verify(r, ctypes.byref(d))
            finally:
                L.dcr_reader_set_progress(r, _lib.PROGRESS_FN(), None)
                L.dcr_reader_set_cancel(r, None)
            cb.reraise()
            check(rc, d)

    def verify_signature(self, keys: Keys) -> SignatureResult:
        """Checks that the bundle is signed by one of ``keys`` (a list of public key
        files or a :class:`dcr.Keyring`) and is, section by section, what was
        signed (SPEC.md §20.4), as ``dcr verify --pubkey`` does; reads every byte
        before the signature once (a bundle at a URL: fetches it), decodes no
        chunk and needs no checkpoint. Returns what was found; raises
        :class:`dcr.SignatureError` (DCR_E_SIGNATURE) naming the first failure."""
        with self._lock:
            return verify_reader(self._r(), keys)

    def verify_signed_checkpoint(self, keys: Keys, path: PathLike, side: str = "base", *,
                                 threads: Optional[int] = None) -> None:
        """:meth:`verify_signature`, then that the checkpoint at ``path`` holds,
        tensor by tensor, the bytes whose SHA-256 digests were signed as the
        bundle's ``side`` ("base" or "target"), as ``dcr verify --base/--target``
        does: for a checkpoint from storage others can write, which might have been
        crafted to match the XXH3 hashes the apply checks. Reads it whole. A
        checkpoint of other tensors raises :class:`dcr.BaseMismatchError`
        (:class:`dcr.TargetMismatchError`); tensors with other bytes,
        :class:`dcr.SignatureError` naming the first."""
        sides = {"base": 0, "target": 1}
        if side not in sides:
            raise argument_error(f"side must be 'base' or 'target', not {side!r}")
        with self._lock, trusted(keys) as ring:
            d = _lib.Detail()
            check(L.dcr_reader_verify_signed_checkpoint(self._r(), ring._handle(), _ckpt(path), sides[side],
                                                        self._threads if threads is None else threads,
                                                        ctypes.byref(d)), d)

    def validate(
        self,
        base: Optional[PathLike] = None,
        target: Optional[PathLike] = None,
        *,
        threads: Optional[int] = None,
        progress: Optional[Progress] = None,
        cancel: Optional[Cancel] = None,
    ) -> List[Problem]:
        """Every problem ``dcr validate --json`` would report, as :class:`Problem`
        objects (``[p.to_dict() for p in ...]`` is its "errors" list); empty when the
        bundle is valid. Every bad chunk is reported; then, if the chunks are sound,
        whether the bundle applies to ``base`` (a checkpoint file or directory) and
        whether ``target`` is exactly its target. Structure problems are found when
        the bundle is opened: :func:`dcr.validate` reports those too."""
        problems: List[Problem] = []
        with self._lock:
            r = self._r()
            cb = _Callbacks(progress, cancel)
            if threads is not None:
                L.dcr_reader_set_threads(r, threads)
            L.dcr_reader_set_progress(r, cb.fn, None)
            L.dcr_reader_set_cancel(r, cb.cancel._pointer)

            def record(opaque: Any, dp: Any) -> int:
                try:
                    problems.append(Problem.from_detail(Detail.from_c(dp.contents), "chunks"))
                except BaseException as e:  # pragma: no cover - carried to the caller
                    cb.error = e
                    return 1
                return 0

            fn = _lib.PROBLEM_FN(record)
            try:
                rc = L.dcr_reader_verify_all(r, fn, None)
            finally:
                L.dcr_reader_set_progress(r, _lib.PROGRESS_FN(), None)
                L.dcr_reader_set_cancel(r, None)
                if threads is not None:
                    L.dcr_reader_set_threads(r, self._threads)
            cb.reraise()
            if rc != 0 and not problems:  # a stop the callback did not see (interrupted)
                problems.append(Problem(error_name(rc), rc, "", "chunks", None, None, None, None, None))
            if rc:
                return problems
            opt = self._apply_options(threads if threads is not None else self._threads, cb)
            d = _lib.Detail()
            if base is not None:
                rc = L.dcr_apply(r, _ckpt(base), None, ctypes.byref(opt), ctypes.byref(d))
                cb.reraise()
                if rc:
                    problems.append(Problem.from_detail(Detail.from_c(d, rc), "base"))
            if target is not None:
                rc = L.dcr_check_target(r, _ckpt(target), ctypes.byref(opt), ctypes.byref(d))
                cb.reraise()
                if rc:
                    problems.append(Problem.from_detail(Detail.from_c(d, rc), "target"))
        return problems

    def check_target(self, path: PathLike) -> None:
        """Raises :class:`dcr.TargetMismatchError` unless the checkpoint at path is
        exactly the bundle's target; writes nothing."""
        with self._lock:
            d = _lib.Detail()
            check(L.dcr_check_target(self._r(), _ckpt(path), None, ctypes.byref(d)), d)

    # -- applying to files

    @staticmethod
    def _apply_options(threads: int, cb: _Callbacks, sync: bool = True, replace: bool = True,
                       max_target_size: int = 0) -> "_lib.ApplyOptions":
        o = _lib.ApplyOptions()
        L.dcr_apply_options_default(ctypes.byref(o))
        o.threads = threads
        o.progress = cb.fn
        o.cancel = cb.cancel._pointer
        o.sync = int(sync)
        o.no_replace = int(not replace)
        o.max_target_size = max_target_size
        return o

    def apply_file(
        self,
        base: PathLike,
        out: Optional[PathLike],
        *,
        threads: Optional[int] = None,
        sync: bool = True,
        replace: bool = True,
        max_target_size: int = 0,
        progress: Optional[Progress] = None,
        cancel: Optional[Cancel] = None,
    ) -> None:
        """Rebuilds the target from the checkpoint at ``base`` into a new file (or
        directory, for a set) at ``out``, atomically, checking every hash (SPEC.md
        §10); ``out=None`` checks without writing. A base that already is the target
        is accepted (re-applying is a no-op). ``replace=False`` keeps an existing
        ``out`` (DCR_E_IO); ``max_target_size`` caps the target a bundle may declare.
        """
        with self._lock:
            cb = _Callbacks(progress, cancel)
            opt = self._apply_options(self._threads if threads is None else threads, cb, sync, replace,
                                      max_target_size)
            d = _lib.Detail()
            rc = L.dcr_apply(self._r(), _ckpt(base), None if out is None else _path(out), ctypes.byref(opt),
                             ctypes.byref(d))
            cb.reraise()
            check(rc, d)

    def _patch(self, verify: str, threads: Optional[int], cb: _Callbacks) -> ctypes.c_void_p:
        level = _verify_level(verify)
        p = ctypes.c_void_p()
        d = _lib.Detail()
        check(L.dcr_patch_create(ctypes.byref(p), self._r(), ctypes.byref(d)), d)
        L.dcr_patch_set_verify(p, level)
        L.dcr_patch_set_threads(p, self._threads if threads is None else threads)
        L.dcr_patch_set_progress(p, cb.fn, None)
        L.dcr_patch_set_cancel(p, cb.cancel._pointer)
        return p

    @staticmethod
    def _stats(p: ctypes.c_void_p, **names: Tuple[str, ...]) -> PatchStats:
        s = _lib.PatchStatsC()
        L.dcr_patch_stats_get(p, ctypes.byref(s), ctypes.sizeof(s))
        return PatchStats(bool(s.already_target), bool(s.recovered), s.chunks_patched, s.bytes_checked,
                          s.bytes_written, s.journal_bytes, **names,
                          journal_discarded=bool(s.journal_discarded), salvaged=bool(s.salvaged),
                          chunks_unchecked=s.chunks_unchecked, chunks_not_held=s.chunks_not_held)

    def apply_in_place(
        self,
        path: PathLike,
        *,
        verify: str = "full",
        threads: Optional[int] = None,
        sync: bool = True,
        salvage: bool = False,
        progress: Optional[Progress] = None,
        cancel: Optional[Cancel] = None,
    ) -> PatchStats:
        """Patches the checkpoint file at path into the target where it lies,
        writing only changed chunks, crash-safe through an apply journal beside it
        (``PATH.dcr-journal``, replayed by the next call if a run was killed). The
        target's layout must be the base's (no tensor added, removed or recoded):
        otherwise :class:`dcr.ArgumentError`; use :meth:`apply_file`.

        verify: "full" (every tensor hash, the default), "chunk" (changed chunks
        only) or "none" (trusted). A journal that cannot be replayed beside a file
        that is not a whole state raises :class:`dcr.FormatError` (DCR_E_JOURNAL)
        and changes nothing; ``salvage=True`` then finishes the file from this
        bundle if every changed chunk is its base's or its target's (SPEC.md §18.4).

        A set bundle takes path as a model directory, patched member by member
        through one journal, ``PATH/.dcr-journal`` (SPEC.md §18.6): the target is
        staged and checked in ``PATH/.dcr-stage/`` first, then members of the same
        size get their changed blocks, resized, added and removed ones are renamed
        in or removed."""
        with self._lock:
            cb = _Callbacks(progress, cancel)
            p = self._patch(verify, threads, cb)
            try:
                L.dcr_patch_set_sync(p, int(sync))
                L.dcr_patch_set_salvage(p, int(salvage))
                d = _lib.Detail()
                rc = L.dcr_patch_file(p, _path(path), ctypes.byref(d))
                cb.reraise()
                check(rc, d)
                return self._stats(p)
            finally:
                L.dcr_patch_free(p)

    # -- applying to memory

    def _changed_entries(self) -> Set[int]:
        return {c.tensor for c in self.chunks}

    def apply_to(
        self,
        tensors: Mapping[str, Any],
        verify: str = "chunk",
        *,
        threads: Optional[int] = None,
        progress: Optional[Progress] = None,
        cancel: Optional[Cancel] = None,
        base: Optional[Mapping[str, Any]] = None,
    ) -> PatchStats:
        """Patches the caller's tensors, held in memory, into the bundle's target,
        in place, on threads, with the GIL released (other Python threads run).

        ``tensors`` maps tensor names to C-contiguous CPU arrays: numpy arrays, or
        any object with ``__array_interface__``, ``__dlpack__`` (a torch CPU tensor,
        BF16 included; torch is not needed by this package) or the buffer protocol.
        Each array's bytes must be the tensor's (its byte length is checked, not its
        dtype: a BF16 tensor may be held as uint16). Only changed chunks are written;
        an array the bundle changes must be writable.

        verify: "full" (every base and target tensor hash: reads every byte),
        "chunk" (the default: each changed chunk's base and result checks) or
        "none" (trusted: one probe of the first changed chunk). ``progress`` is
        called with (bytes written, total) while changed chunks are written, a
        phase that always completes: an exception it raises is raised again after
        the apply. ``cancel`` (a :class:`Cancel` set from another thread) stops the
        checking pass, before anything is written. With "full" or
        "chunk" nothing is written unless every check passes: a wrong base raises
        :class:`dcr.BaseMismatchError` and leaves the arrays as they were. Tensors
        that are already the target are left alone (``stats.already_target``), so
        a bundle received twice is harmless.

        Tensors the bundle adds or recodes (a new dtype or size) need a new array:
        if ``tensors`` is a mutable mapping (a dict) one is allocated and stored in
        it after success (a writable array of the right size already there is used
        as it is). A tensor the bundle resizes (format 1.1: a vocabulary grown) is
        read from the array held and written into a new one, which replaces it in
        the dict. Tensors the bundle removes are deleted from it, and a tensor
        given a new shape (same bytes) is replaced by a view of that shape (its
        ``reshape``); the names are in the returned stats. Names the bundle does not
        know are ignored.

        A set's bundle (a model directory, SPEC.md §2.3) applies to the weights
        alone, as :func:`dcr.load_checkpoint` reads them: raw members (config.json,
        tokenizer files, the index) not in ``tensors`` are skipped, neither checked
        nor written; given (as uint8 arrays), they are patched like any tensor.
        Under "full" every tensor held is checked against the bundle's base hash
        before anything is written, and its result against the target hash: with
        every weight tensor held, that proves the result's state id (which leaves
        raw members out), and the base's too unless the bundle removes or recodes
        a tensor (whose old bytes are then not read unless a removed one is still
        in ``tensors``), so no separate :func:`dcr.state_id` pass is needed. The
        raw members skipped are not checked.

        **Slices and fused parameters** (a tensor-parallel rank of a serving
        engine): a value may be a :class:`dcr.Place`, or a list of them, instead of
        a whole array: the block of the tensor a buffer holds and where (a fused
        ``qkv_proj`` buffer is given once per tensor it stacks, at its rows). Only
        the changed chunks that touch a held block are decoded and only held
        elements written; tensors not in ``tensors`` are not held. Checks (under
        "full" and "chunk" alike: tensor hashes need whole tensors): each changed
        chunk whose base the caller can show whole, because its blocks hold all
        of it or ``base`` gives the whole base tensor (host arrays, only read: a
        node's shared copy), must give its base and target checks before anything
        is written; a chunk held only in part with no ``base`` is written
        unchecked (``stats.chunks_unchecked``), and one of the default format
        (1.3) or 1.2, whose positions depend on the whole chunk's base, cannot be
        decoded then: :class:`dcr.Error` before anything is written, unless
        ``base`` has the tensor or the bundle was encoded with ``format="1.1"``.
        Tensors the bundle adds are written into their places; resized ones
        cannot be placed.
        """
        if base is not None or placed(tensors):
            with self._lock:
                p = apply_placed(self, tensors, verify, threads, _Callbacks(progress, cancel), base)
                try:
                    return self._stats(p)
                finally:
                    L.dcr_patch_free(p)
        level = _verify_level(verify)
        with self._lock:
            entries = self.tensors
            changed = self._changed_entries()
            n = len(entries)
            bufs = (_lib.BufferC * max(n, 1))()
            fresh = (_lib.BufferC * max(n, 1))()  # resized tensors' new arrays
            keep: List[Any] = []
            new: Dict[str, np.ndarray] = {}
            removed: List[str] = []
            mutable = isinstance(tensors, MutableMapping)
            for t in entries:
                if not t.selected:  # left out by select(): not resolved, not patched
                    continue
                name = t.name
                obj = tensors.get(name)
                if obj is None and t.raw_member:  # config.json and the like: skipped
                    continue
                if t.target is None:  # removed: its bytes are hashed under "full"
                    if obj is not None:
                        if mutable:
                            removed.append(name)
                        if level == 0:
                            r = region(obj, f'tensor "{name}"')
                            if r.nbytes == t.base.byte_length:  # type: ignore[union-attr]
                                bufs[t.index].data, bufs[t.index].size = r.address, r.nbytes
                                keep.append(r.keep)
                    continue
                want = t.target.byte_length
                if t.resized:  # read as held, written into a new array
                    assert t.base is not None
                    if obj is None:
                        raise argument_error(
                            f'tensor "{name}" is missing: the bundle resizes it ({t.base.byte_length} '
                            f"to {want} bytes)", name)
                    r = region(obj, f'tensor "{name}"')
                    if r.nbytes not in (t.base.byte_length, want):
                        raise argument_error(
                            f'tensor "{name}" has {r.nbytes} bytes; the bundle resizes it from '
                            f"{t.base.byte_length} to {want}", name)
                    bufs[t.index].data, bufs[t.index].size = r.address or None, r.nbytes
                    keep.append(r.keep)
                    if r.nbytes == t.base.byte_length:
                        if not mutable:
                            raise argument_error(
                                f'tensor "{name}" is resized by the bundle: give a dict to store its new '
                                f"array in ({t.target.dtype} {list(t.target.shape)})", name)
                        arr = _new_array(t.target)
                        new[name] = arr
                        fr = region(arr, f'tensor "{name}"')
                        fresh[t.index].data, fresh[t.index].size = fr.address or None, fr.nbytes
                        keep.append(fr.keep)
                    continue
                if t.delta_coded:
                    if obj is None:
                        raise argument_error(
                            f'tensor "{name}" is missing: the bundle patches it in place '
                            f"({t.target.dtype} {list(t.target.shape)}, {want} bytes)", name)
                    r = region(obj, f'tensor "{name}"')
                    if r.nbytes != want:
                        raise argument_error(
                            f'tensor "{name}" has {r.nbytes} bytes; the bundle\'s base has {want} '
                            f"({t.target.dtype} {list(t.target.shape)})", name)
                    if not r.writable and t.index in changed:
                        raise argument_error(
                            f'tensor "{name}" is read-only, and the bundle changes it: pass a '
                            "writable array (numpy: arr.flags.writeable, or a copy)", name)
                else:  # added or recoded: a buffer for the new tensor, written whole
                    r = None
                    if obj is not None:
                        try:
                            cand = region(obj, f'tensor "{name}"')
                            if cand.nbytes == want and cand.writable:
                                r = cand
                        except Error:
                            if not mutable:
                                raise
                    if r is None:
                        if not mutable:
                            raise argument_error(
                                f'tensor "{name}" is {"recoded" if t.base else "added"} by the bundle: give a '
                                f"writable array of {want} bytes for it ({t.target.dtype} "
                                f"{list(t.target.shape)}), or a dict to store a new one in", name)
                        arr = _new_array(t.target)
                        new[name] = arr
                        r = region(arr, f'tensor "{name}"')
                bufs[t.index].data, bufs[t.index].size = r.address or None, r.nbytes
                keep.append(r.keep)

            errors: List[BaseException] = []

            def resolve(opaque: Any, entry: int, info: Any, buf: Any) -> int:
                try:
                    t = info[0]
                    b = fresh[entry] if t.resized and not t.base.present else bufs[entry]
                    buf[0].data, buf[0].size = b.data, b.size
                    return 0
                except BaseException as e:  # pragma: no cover - carried to the caller
                    errors.append(e)
                    return 1

            fn = _lib.RESOLVE_FN(resolve)
            cb = _Callbacks(progress, cancel)
            p = self._patch(verify, threads, cb)
            try:
                d = _lib.Detail()
                rc = L.dcr_patch_memory(p, fn, None, ctypes.byref(d))
                if errors:
                    raise errors[0]
                cb.reraise()
                check(rc, d)
                stats = self._stats(p)
            finally:
                L.dcr_patch_free(p)
            added: List[str] = []
            replaced: List[str] = []
            reshaped: List[str] = []
            if mutable:
                # a dcr.Tensors (load_safetensors) keeps each tensor's dtype name
                dtypes = getattr(tensors, "dtypes", None)
                if not stats.already_target:
                    for name, arr in new.items():
                        (replaced if name in tensors else added).append(name)
                        tensors[name] = arr  # type: ignore[index]
                for t in entries:  # same bytes, new shape: a view of the new shape
                    if t.selected and t.status == "reshaped" and t.name in tensors:
                        obj = tensors[t.name]
                        if hasattr(obj, "reshape") and tuple(getattr(obj, "shape", ())) != t.target.shape:
                            tensors[t.name] = obj.reshape(t.target.shape)  # type: ignore[index,union-attr]
                            reshaped.append(t.name)
                if isinstance(dtypes, dict):
                    for t in entries:
                        if t.selected and t.target is not None and t.name in tensors:
                            dtypes[t.name] = t.target.dtype
                for name in removed:
                    del tensors[name]  # type: ignore[attr-defined]
                    if isinstance(dtypes, dict):
                        dtypes.pop(name, None)
            return PatchStats(stats.already_target, stats.recovered, stats.chunks_patched, stats.bytes_checked,
                              stats.bytes_written, stats.journal_bytes, tuple(added), tuple(replaced),
                              tuple(removed), tuple(reshaped))

    # -- changes, for callers that scatter them themselves

    def changes(self, base: Optional[Mapping[str, Any]] = None) -> "Changes":
        """An iterator over the changed chunks, each a :class:`Change` whose
        ``positions`` and ``values`` are numpy views into the library's memory,
        valid until the next item: for callers that scatter changes into memory the
        library cannot reach (an accelerator). Nothing else is checked against a
        base: verify the result by other means (its state id).

        DELTA_BANDED chunks (format 1.3, the default) and DELTA_CLASSED ones (1.2)
        name their changes by rank among base elements of a band or class of
        exponents, so their positions need the base: ``base``
        maps tensor names to the base tensors as C-contiguous CPU arrays (as
        :meth:`apply_memory` takes them; a host copy of a tensor that lives on an
        accelerator), only read. Such a chunk then comes as op "delta" with
        positions; its base bytes must give the chunk's ``base_check`` (else
        :class:`dcr.BaseMismatchError`), and are walked once: about the CPU of
        applying the chunk with :meth:`apply_memory`. Without ``base`` such a chunk
        raises :class:`dcr.ArgumentError` (encode with ``format="1.1"`` for
        callers that cannot give it). Other encodings never read ``base``."""
        return Changes(self, base)


def _new_array(side: TensorSide) -> np.ndarray:
    """A new array for a tensor the bundle adds or recodes."""
    from ._buffers import _NUMPY_DTYPES

    names = {v: k for k, v in _NUMPY_DTYPES.items()}
    np_name = names.get(side.dtype)
    dt: Optional[np.dtype] = None
    if np_name is not None:
        try:
            dt = np.dtype(np_name)
        except TypeError:
            dt = None
    if dt is None and side.dtype in ("BF16",):
        dt = np.dtype(np.uint16)  # the bits of a bfloat16 (no numpy dtype for it)
    if dt is not None and dt.itemsize * int(np.prod(side.shape, dtype=np.int64)) == side.byte_length:
        return np.empty(side.shape, dt)
    return np.empty(side.byte_length, np.uint8)


@dataclass
class Change:
    """One changed chunk: apply ``op`` with ``values`` at ``positions`` (sparse) or
    at every element (dense, ``positions is None``) of the bytes
    ``[offset, offset + length)`` of tensor ``name`` (SPEC.md §9.1):

    - "xor": element ^= value
    - "overwrite": element = value
    - "delta": element = key(key(element) + unzigzag(value)) on unsigned w-bit
      integers, where key(u) = u ^ (2**(w-1) - 1) if u's top bit is set, else u,
      and unzigzag(z) = (z >> 1) ^ -(z & 1), modulo 2**w.

    ``values`` is a read-only numpy array of unsigned integers of element_size
    bytes; both arrays are views valid until the iterator moves on (copy them to
    keep them)."""

    entry: int
    name: str
    chunk: int
    offset: int
    length: int
    element_size: int
    op: str
    count: int
    positions: Optional[np.ndarray]
    values: np.ndarray
    base_check: int
    target_check: int
    _owner: "Changes" = field(repr=False, compare=False, default=None)  # type: ignore[assignment]
    _generation: int = field(repr=False, compare=False, default=0)

    def apply(self, chunk: Any) -> None:
        """Applies the change on the CPU, in place, to the chunk's bytes (an array of
        exactly ``length`` bytes: e.g. ``tensor.reshape(-1).view(np.uint8)[offset:offset + length]``):
        the library's reference for a caller's own kernel. Only valid while this is
        the iterator's current change."""
        self._owner._apply(self, chunk)


class Changes(_Closing):
    """Iterator over a bundle's changed chunks (see :meth:`Bundle.changes`); close
    it (or use ``with``) to free its decoder before it is exhausted."""

    def __init__(self, bundle: Bundle, base: Optional[Mapping[str, Any]] = None) -> None:
        self._bundle = bundle
        self._it = ctypes.c_void_p()
        self._generation = 0
        self._current = ctypes.POINTER(_lib.ChangeC)()
        self._names: Dict[int, str] = {t.index: t.name for t in bundle.tensors}
        self._errors: List[BaseException] = []
        self._held: Any = None  # the base region the library reads now
        d = _lib.Detail()
        check(L.dcr_changes_open(ctypes.byref(self._it), bundle._r(), ctypes.byref(d)), d)
        self._resolve = None
        if base is not None:

            def resolve(opaque: Any, entry: int, info: Any, buf: Any) -> int:
                try:
                    name = self._names.get(int(entry), "")
                    obj = base.get(name)
                    if obj is None:
                        raise argument_error(f'tensor "{name}" is missing from base: a DELTA_BANDED '
                                             "or DELTA_CLASSED chunk's positions need its base "
                                             "bytes", name)
                    r = region(obj, f'tensor "{name}"')
                    self._held = r
                    buf[0].data, buf[0].size = r.address or None, r.nbytes
                    return 0
                except BaseException as e:  # carried to the caller of __next__
                    self._errors.append(e)
                    return 1

            self._resolve = _lib.RESOLVE_FN(resolve)
            L.dcr_changes_set_base(self._it, self._resolve, None)

    def __iter__(self) -> "Changes":
        return self

    def __next__(self) -> Change:
        if not self._it:
            raise StopIteration
        self._bundle._r()  # the bundle must still be open
        d = _lib.Detail()
        self._generation += 1
        with self._bundle._lock:
            rc = L.dcr_changes_next(self._it, ctypes.byref(self._current), ctypes.byref(d))
        if rc:
            self.close()
            if self._errors:
                raise self._errors[0]
            check(rc, d)
        if not self._current:
            self.close()
            raise StopIteration
        c = self._current.contents
        es = c.element_size
        vdt = np.dtype(f"<u{es}")
        nvalues = c.count if c.positions else c.length // es
        values = _view(c.values, nvalues, vdt)
        positions = _view(ctypes.cast(c.positions, ctypes.c_void_p).value, c.count, np.dtype("<u4")) \
            if c.positions else None
        return Change(int(c.entry), self._names.get(int(c.entry), ""), c.chunk, c.offset, c.length, es,
                      OPS.get(c.op, str(c.op)), c.count, positions, values, c.base_check, c.target_check,
                      self, self._generation)

    def _apply(self, change: Change, chunk: Any) -> None:
        if change._generation != self._generation or not self._it or not self._current:
            raise ValueError("this Change is no longer current: apply it before moving the iterator on")
        r = region(chunk, "the chunk")
        if not r.writable:
            raise argument_error("the chunk is read-only")
        d = _lib.Detail()
        check(L.dcr_change_apply(self._current, ctypes.c_void_p(r.address), r.nbytes, ctypes.byref(d)), d)

    def close(self) -> None:
        """Frees the iterator's decoder."""
        if self._it:
            L.dcr_changes_free(self._it)
            self._it = ctypes.c_void_p()


def _view(address: Optional[int], count: int, dt: np.dtype) -> np.ndarray:
    if not count or not address:
        return np.empty(0, dt)
    a = np.frombuffer((ctypes.c_char * (count * dt.itemsize)).from_address(address), dtype=dt)
    a.flags.writeable = False
    return a

"""dcr.history: history archives (SPEC.md §19), a training run's chain of bundles
with keyframes (whole checkpoints) in one tar, tar.zst or zip file that tar and
unzip open, so that any step is rebuilt in one pass over the archive.

The functions here are libdcr's (dcr_history_*), as ``dcr history`` runs them:
:func:`create` writes an archive from a keyframe and bundles, :func:`append` adds
the next steps (a plain tar in place, under an undo journal, ARCHIVE.dcr-append,
that :func:`recover` or the next use rolls back), :func:`extract` rebuilds a step
by number or by state id, :func:`verify` reads every member, and :func:`list` or
:class:`Archive` give the index, from a path or an http(s) URL. Failures raise
:class:`dcr.Error` with the library's DCR_E_ name and detail.

``require_signature=`` (on :func:`append`, :meth:`Archive.extract`,
:meth:`Archive.verify` and the functions over them) takes trusted public keys, a
list of key files or a :class:`dcr.Keyring`: every bundle added or read must then
be signed by one of them, checked before it is used (DCR_E_SIGNATURE,
:class:`dcr.SignatureError`, otherwise).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from ._bundle import Cancel, _ckpt, _path, _verify_level
from ._closing import _Closing
from ._checkpoint import reader_limits
from ._errors import argument_error, check
from ._http import http_options, is_url
from ._signing import Keyring, Keys, trusted

__all__ = ["Archive", "Index", "Member", "create", "append", "extract", "verify", "list", "recover"]

L = _lib.lib
PathLike = Union[str, "os.PathLike[str]"]
StateId = Union[str, bytes]

CONTAINERS = {1: "tar", 2: "tar.zst", 3: "zip"}
KINDS = {1: "keyframe", 2: "bundle"}


@dataclass(frozen=True)
class Member:
    """One member of the archive's index (``dcr_history_member``), in archive order."""

    kind: str  # "keyframe" or "bundle"
    step: int
    name: str  # its path in the archive
    size: int  # bytes; a directory keyframe: its files' sum
    digest: Optional[str]  # XXH3-128 of its bytes as xxh128sum prints it; None for a directory
    base_state: Optional[str]  # a bundle: the state it applies to (32 hex digits); keyframe: None
    state: str  # the state the step ends in
    metadata: Dict[str, str]  # a bundle's metadata
    directory: bool  # a keyframe that is a model directory (a checkpoint set)
    file_count: int  # a directory keyframe: its files; else 0


@dataclass(frozen=True)
class Index:
    """An archive's index (``dcr_history_summary`` and its members)."""

    container: str  # "tar", "tar.zst" or "zip"
    version: Tuple[int, int]  # of the archive layout (§19.5)
    first_step: int
    last_step: int
    keyframe_every: Optional[int]  # None: none declared
    run_id: Optional[str]
    members: Tuple[Member, ...]


def _state_bytes(state: StateId) -> bytes:
    """A state id given as 32 hex digits (as ``dcr id`` prints it) or 16 bytes."""
    if isinstance(state, str):
        try:
            raw = bytes.fromhex(state)
        except ValueError:
            raw = b""
    else:
        raw = bytes(state)
    if len(raw) != 16:
        raise argument_error(f"a state id is 32 hex digits or 16 bytes, not {state!r}")
    return raw


def _options(
    *,
    threads: int = 0,
    verify: Optional[str] = None,
    sync: bool = True,
    replace: bool = True,
    max_target_size: int = 0,
    container: Optional[str] = None,
    keyframe_every: int = 0,
    first_step: int = 0,
    run_id: Optional[str] = None,
    temp_dir: Optional[PathLike] = None,
    cancel: Optional[Cancel] = None,
    max_memory: int = 0,
    ring: Optional[Keyring] = None,
) -> "_lib.HistoryOptions":
    """dcr_history_options: the library's defaults with those given (each call
    names the ones that apply to it)."""
    o = _lib.HistoryOptions()
    L.dcr_history_options_default(ctypes.byref(o))
    o.threads = threads
    if verify is not None:
        o.verify = _verify_level(verify)
    o.sync = int(sync)
    o.no_replace = int(not replace)
    o.max_target_size = max_target_size
    if container is not None:
        names = {v: k for k, v in CONTAINERS.items()}
        if container not in names:
            raise argument_error(f"container must be 'tar', 'tar.zst' or 'zip', not {container!r}")
        o.container = names[container]
    o.keyframe_every = keyframe_every
    o.first_step = first_step
    if run_id is not None:
        o.run_id = run_id.encode()
    if temp_dir is not None:
        o.temp_dir = _path(temp_dir)
    if cancel is not None:
        o.cancel = cancel._pointer
    o.max_memory = max_memory
    if ring is not None:
        o.require_signature = ring._handle()
    return o


@contextlib.contextmanager
def _ring(keys: Optional[Keys]) -> Iterator[Optional[Keyring]]:
    """require_signature as the Keyring that dcr_history_options points to, alive
    for the block (None: no signature required)."""
    if keys is None:
        yield None
    else:
        with trusted(keys) as ring:
            yield ring


def _paths(bundles: Sequence[PathLike]) -> Tuple[Any, int]:
    """The bundle paths as the C array the library takes, and their count."""
    paths = [_path(b) for b in bundles]
    return (ctypes.c_char_p * max(len(paths), 1))(*paths), len(paths)


class Archive(_Closing):
    """A history archive opened at a path or an http(s) URL, its index read and
    checked (:attr:`index`). Its members are read once, by one :meth:`extract` or
    :meth:`verify` (a second raises :class:`dcr.ArgumentError`: open it again).

    While open it holds a read lock on a local archive, which an :func:`append`
    waits for: use it as a context manager, or call :meth:`close`.

    Args:
        source: a path, or an http:// or https:// URL (members read by range).
        max_memory: the memory budget for the index and the members (0: 1 GiB).
        limits: other ``dcr_limits`` fields to tighten, as for :class:`dcr.Bundle`.
        headers, http_retries, http_timeout, ca_file: for a URL, as for
            :class:`dcr.Bundle`.
    """

    def __init__(
        self,
        source: PathLike,
        *,
        max_memory: int = 0,
        limits: Optional[Mapping[str, int]] = None,
        headers: Optional[Mapping[str, str]] = None,
        http_retries: Optional[int] = None,
        http_timeout: Optional[int] = None,
        ca_file: Optional[PathLike] = None,
    ) -> None:
        self._h = ctypes.c_void_p()
        lim = reader_limits(max_memory, limits)
        url = is_url(source)
        http, _headers = http_options(url, headers, http_retries, http_timeout, ca_file)  # kept until opened
        d = _lib.Detail()
        if url:
            rc = L.dcr_history_open_url(ctypes.byref(self._h), str(source).encode(), ctypes.byref(http),
                                        ctypes.byref(lim), ctypes.byref(d))
        else:
            rc = L.dcr_history_open(ctypes.byref(self._h), _path(source), ctypes.byref(lim), ctypes.byref(d))
        check(rc, d)
        self.path = str(source) if url else os.fspath(source)
        self.index = self._read_index()

    def _read_index(self) -> Index:
        s = _lib.HistorySummaryC()
        L.dcr_history_info(self._h, ctypes.byref(s))
        members: List[Member] = []
        m = _lib.HistoryMemberC()
        pair = _lib.Meta()
        for i in range(s.member_count):
            L.dcr_history_member_get(self._h, i, ctypes.byref(m))
            meta = {}
            for j in range(m.meta_count):
                L.dcr_history_member_meta(self._h, i, j, ctypes.byref(pair))
                meta[(pair.key or b"").decode()] = (pair.value or b"").decode()
            keyframe = m.kind == 1
            members.append(Member(
                kind=KINDS.get(m.kind, str(m.kind)),
                step=m.step,
                name=(m.name or b"").decode("utf-8", "backslashreplace"),
                size=m.size,
                digest=None if m.directory else bytes(m.digest).hex(),
                base_state=None if keyframe else bytes(m.base_state).hex(),
                state=bytes(m.state).hex(),
                metadata=meta,
                directory=bool(m.directory),
                file_count=m.file_count,
            ))
        return Index(
            container=CONTAINERS.get(s.container, str(s.container)),
            version=(s.version_major, s.version_minor),
            first_step=s.first_step,
            last_step=s.last_step,
            keyframe_every=s.keyframe_every or None,
            run_id=s.run_id.decode() if s.run_id is not None else None,
            members=tuple(members),
        )

    def _handle(self) -> ctypes.c_void_p:
        if not self._h:
            raise argument_error("the archive is closed")
        return self._h

    def close(self) -> None:
        """Frees the archive and its lock (at once, rather than when collected)."""
        h = getattr(self, "_h", None)
        if h:
            L.dcr_history_free(h)
            self._h = ctypes.c_void_p()

    def step_of(self, state: StateId) -> int:
        """The first step whose state is ``state`` (32 hex digits or 16 bytes);
        :class:`dcr.ArgumentError` if no step has it."""
        raw = (ctypes.c_uint8 * 16)(*_state_bytes(state))
        step = ctypes.c_uint64()
        d = _lib.Detail()
        check(L.dcr_history_find_state(self._handle(), ctypes.byref(raw), ctypes.byref(step), ctypes.byref(d)), d)
        return step.value

    def extract(
        self,
        out: PathLike,
        *,
        step: Optional[int] = None,
        state: Optional[StateId] = None,
        verify: str = "chunk",
        threads: int = 0,
        sync: bool = True,
        replace: bool = True,
        max_target_size: int = 0,
        cancel: Optional[Cancel] = None,
        require_signature: Optional[Keys] = None,
    ) -> int:
        """Rebuilds the checkpoint of one step at ``out`` (a file, or a directory
        for an archive of model directories) and returns the step: given by number
        (``step``) or by the state id it ends in (``state``, 32 hex digits or 16
        bytes). The nearest keyframe at or before it is read, then each bundle
        after it applied in place to one work file beside ``out``, which appears
        only when every check has passed (the state id at the end included,
        unless ``verify="none"``).

        Args:
            verify: how each bundle is checked: "chunk" (default), "full" or "none".
            replace: False refuses an existing ``out``.
            max_target_size: refuse a larger checkpoint (0: no cap).
            cancel: a :class:`dcr.Cancel` token that stops it from another thread.
            require_signature: trusted public keys (key files or a
                :class:`dcr.Keyring`): each bundle read must be signed by one.
        """
        if (step is None) == (state is None):
            raise argument_error("give one of step= and state=")
        if state is not None:
            step = self.step_of(state)
        assert step is not None
        with _ring(require_signature) as ring:
            o = _options(verify=verify, threads=threads, sync=sync, replace=replace,
                         max_target_size=max_target_size, cancel=cancel, ring=ring)
            d = _lib.Detail()
            check(L.dcr_history_extract(self._handle(), step, _path(out), ctypes.byref(o), ctypes.byref(d)), d)
        return step

    def verify(self, *, threads: int = 0, temp_dir: Optional[PathLike] = None,
               cancel: Optional[Cancel] = None, require_signature: Optional[Keys] = None) -> Index:
        """Reads every member: its size and digest, each bundle whole with its
        state ids and metadata as the index says, each keyframe's state id, which
        with the index's chain rules checks every link. Returns the index; raises
        :class:`dcr.Error` at the first fault.

        Args:
            temp_dir: where a keyframe is hashed (default TMPDIR, else /tmp).
            require_signature: trusted public keys (key files or a
                :class:`dcr.Keyring`): every bundle must be signed by one.
        """
        with _ring(require_signature) as ring:
            o = _options(threads=threads, temp_dir=temp_dir, cancel=cancel, ring=ring)
            d = _lib.Detail()
            check(L.dcr_history_verify(self._handle(), ctypes.byref(o), ctypes.byref(d)), d)
        return self.index


def create(
    path: PathLike,
    keyframe: PathLike,
    bundles: Sequence[PathLike] = (),
    *,
    container: Optional[str] = None,
    keyframe_every: int = 0,
    first_step: int = 0,
    run_id: Optional[str] = None,
    threads: int = 0,
    sync: bool = True,
    replace: bool = True,
    max_memory: int = 0,
    cancel: Optional[Cancel] = None,
) -> Index:
    """Writes a new archive at ``path``: the keyframe (a safetensors file or a
    model directory), then the bundles in step order, each applying to the state
    the one before ends in. Atomic: ``path`` appears whole or not at all. Returns
    the new archive's index.

    Args:
        container: "tar", "tar.zst" or "zip"; default from the name's suffix
            (.tar, .tar.zst or .tzst, .zip).
        keyframe_every: a keyframe at every step that is a multiple of it, built
            from the chain (0: none).
        first_step: the keyframe's step.
        run_id: the run the archive keeps (default: the first bundle's run_id
            metadata, if any).
        replace: False refuses an existing ``path``.
        max_memory: the memory budget for reading the keyframe and bundles.
    """
    o = _options(container=container, keyframe_every=keyframe_every, first_step=first_step, run_id=run_id,
                 threads=threads, sync=sync, replace=replace, max_memory=max_memory, cancel=cancel)
    arr, n = _paths(bundles)
    d = _lib.Detail()
    check(L.dcr_history_create(_path(path), _ckpt(keyframe), arr, n, ctypes.byref(o), ctypes.byref(d)), d)
    return list(path)


def append(
    path: PathLike,
    bundles: Sequence[PathLike],
    *,
    keyframe_every: int = 0,
    threads: int = 0,
    sync: bool = True,
    max_memory: int = 0,
    cancel: Optional[Cancel] = None,
    require_signature: Optional[Keys] = None,
) -> Index:
    """Adds bundles to the archive at ``path``, each the next step: its base must
    be the state the archive ends in (:class:`dcr.BaseMismatchError`), its
    metadata must agree with the archive (step, run_id, parent_bundle:
    DCR_E_ARCHIVE). A plain tar with room in its index is appended to in place
    (the same file: the old members neither read nor written) under a journal,
    ARCHIVE.dcr-append, that undoes a torn append; other archives are rewritten
    beside themselves and renamed over. Concurrent appends are serialized, and an
    append waits for open :class:`Archive` objects on the file to be closed.
    Returns the index after the append.

    Args:
        keyframe_every: a keyframe at every step that is a multiple of it, built
            from the chain (0 keeps the archive's).
        require_signature: trusted public keys (key files or a
            :class:`dcr.Keyring`): every bundle must be signed by one, checked
            before the archive is touched.
    """
    arr, n = _paths(bundles)
    with _ring(require_signature) as ring:
        o = _options(keyframe_every=keyframe_every, threads=threads, sync=sync, max_memory=max_memory,
                     cancel=cancel, ring=ring)
        d = _lib.Detail()
        check(L.dcr_history_append(_path(path), arr, n, ctypes.byref(o), ctypes.byref(d)), d)
    return list(path)


# The keywords of Archive(), which extract() and verify() take beside their own.
_OPEN = ("max_memory", "limits", "headers", "http_retries", "http_timeout", "ca_file")


def _opened(source: PathLike, options: Dict[str, Any]) -> Archive:
    """An Archive on source, opened with the keywords of options that are
    Archive()'s; they are taken out of options, which keeps the others."""
    return Archive(source, **{k: options.pop(k) for k in _OPEN if k in options})


def extract(source: PathLike, *, out: PathLike, step: Optional[int] = None, state: Optional[StateId] = None,
            **options: Any) -> int:
    """Rebuilds one step of the archive at ``source`` (a path or a URL) at ``out``
    and returns the step: :meth:`Archive.extract` (``step=`` or ``state=``, and its
    options) on an :class:`Archive` opened with the options that are its own
    (``max_memory``, ``headers`` and so on)."""
    with _opened(source, options) as a:
        return a.extract(out, step=step, state=state, **options)


def verify(source: PathLike, **options: Any) -> Index:
    """Checks every member of the archive at ``source`` (a path or a URL) and
    returns its index; raises :class:`dcr.Error` at the first fault. The options
    are :meth:`Archive.verify`'s and :class:`Archive`'s."""
    with _opened(source, options) as a:
        return a.verify(**options)


def recover(path: PathLike, *, sync: bool = True) -> bool:
    """Undoes the append that a dead process left half done at ``path`` (its
    journal, ARCHIVE.dcr-append, beside it): the archive is made again, byte for
    byte, what it was before, and the journal removed. Returns whether there was
    one to roll back. A damaged journal, or one that another archive is at
    ``path`` for, raises :class:`dcr.Error` (DCR_E_JOURNAL) and both files are
    kept. :func:`append` and opening an archive do this first on their own."""
    o = _options(sync=sync)
    rolled = ctypes.c_int()
    d = _lib.Detail()
    check(L.dcr_history_recover(_path(path), ctypes.byref(o), ctypes.byref(rolled), ctypes.byref(d)), d)
    return bool(rolled.value)


def list(source: PathLike, **open_options: Any) -> Index:  # noqa: A001 - dcr.history.list, as `dcr history list`
    """The index of the archive at ``source`` (a path or a URL): its container,
    layout version, steps, run id and members. ``open_options`` as for
    :class:`Archive`."""
    with Archive(source, **open_options) as a:
        return a.index

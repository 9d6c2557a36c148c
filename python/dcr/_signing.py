"""Signed bundles (SPEC.md §20) from Python: key pairs (:func:`keygen`), the
public keys a reader trusts (:class:`Keyring`), signing a bundle
(:func:`sign`), and what checking a bundle's signatures found
(:class:`SignatureResult`). The checks themselves run on an open bundle
(:class:`dcr.Bundle`'s ``require_signature=`` and :meth:`dcr.Bundle.verify_signature`),
so that they cover the very bytes that bundle then applies.

Everything is libdcr's (dcr_keygen, dcr_keyring_*, dcr_sign_file,
dcr_reader_verify_signature): keys are the library's text files, as ``dcr
keygen`` writes them, and every failure to verify is DCR_E_SIGNATURE
(:class:`dcr.SignatureError`) with the library's detail.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator, List, Optional, Union

from . import _lib
from ._closing import _Closing
from ._errors import argument_error, check

if TYPE_CHECKING:
    from ._bundle import Cancel

L = _lib.lib
PathLike = Union[str, "os.PathLike[str]"]


def _key_id() -> "ctypes.Array[ctypes.c_uint8]":
    return (ctypes.c_uint8 * _lib.KEY_ID_SIZE)()


def keygen(secret_path: PathLike, public_path: PathLike) -> str:
    """Makes a new Ed25519 key pair from the system's random source, as ``dcr
    keygen`` does: the secret key file (mode 0600) and the public key file (0644),
    both new (an existing file raises :class:`dcr.IOFailure` and is kept). Returns
    the key id, 32 hex digits. The secret key signs (:func:`sign`, ``encode(...,
    sign_key=)``); the public key file is what readers trust (:class:`Keyring`)."""
    kid = _key_id()
    d = _lib.Detail()
    check(L.dcr_keygen(os.fsencode(os.fspath(secret_path)), os.fsencode(os.fspath(public_path)),
                       ctypes.byref(kid), ctypes.byref(d)), d)
    return bytes(kid).hex()


class Keyring(_Closing):
    """The public keys a reader trusts (``dcr_keyring``), read from key files as
    ``dcr keygen`` writes them (NAME.pub). Trust comes only from these keys, never
    from a key or key id the bundle carries (SPEC.md §20.4).

    Wherever ``require_signature=`` is accepted (:class:`dcr.Bundle`,
    :meth:`dcr.Bundle.verify_signature`, :mod:`dcr.history`), a list of key file
    paths does as well as a Keyring; a Keyring reads its files once, for callers
    that check many bundles.

    Args:
        paths: public key files; a malformed file, or a secret key given as a
            public one, raises :class:`dcr.ArgumentError`.
    """

    def __init__(self, paths: Iterable[PathLike] = ()) -> None:
        self._ring = ctypes.c_void_p()
        self.key_ids: List[str] = []  # of the keys added, in order, as 32 hex digits
        d = _lib.Detail()
        check(L.dcr_keyring_create(ctypes.byref(self._ring), ctypes.byref(d)), d)
        for p in paths:
            self.add(p)

    def add(self, path: PathLike) -> str:
        """Trusts the public key in the file at ``path``; returns its key id."""
        kid = _key_id()
        d = _lib.Detail()
        check(L.dcr_keyring_add_file(self._handle(), os.fsencode(os.fspath(path)), ctypes.byref(kid),
                                     ctypes.byref(d)), d)
        self.key_ids.append(bytes(kid).hex())
        return self.key_ids[-1]

    def _handle(self) -> ctypes.c_void_p:
        if not self._ring:
            raise ValueError("the keyring is closed")
        return self._ring

    def close(self) -> None:
        """Frees the keyring. Further use raises ValueError."""
        ring = getattr(self, "_ring", None)
        if ring:
            L.dcr_keyring_free(ring)
            self._ring = ctypes.c_void_p()

    def __repr__(self) -> str:
        return f"<dcr.Keyring {', '.join(self.key_ids) or '(empty)'}>" if self._ring else "<dcr.Keyring (closed)>"


Keys = Union[Keyring, PathLike, Iterable[PathLike]]


@contextlib.contextmanager
def trusted(keys: Keys) -> Iterator[Keyring]:
    """keys as a Keyring for the length of the block: the Keyring given, or one
    read from a key file path or a list of them, freed when the block ends. An
    empty list is refused: requiring a signature by no key would accept nothing
    (and the library takes no ring as no requirement at all)."""
    if isinstance(keys, Keyring):
        yield keys
        return
    paths = [keys] if isinstance(keys, (str, bytes, os.PathLike)) else list(keys)
    if not paths:
        raise argument_error("require_signature needs at least one public key file (or a Keyring)")
    with Keyring(paths) as ring:
        yield ring


@dataclass(frozen=True)
class SignatureResult:
    """What checking a bundle's signatures found (``dcr_signature_result``)."""

    signature_count: int  # signatures the bundle carries, by any key
    verified_count: int  # of those, by a trusted key, each verified
    key_id: str  # the first trusted key (lowest key id) that signed it, 32 hex digits
    scope: str = "checkpoints"  # what is signed: "checkpoints" (and the bundle) or "bundle" alone


def scope_code(scope: str) -> int:
    """DCR_SIGN_CHECKPOINTS or DCR_SIGN_BUNDLE for "checkpoints" or "bundle"."""
    if scope not in _lib.SIGN_SCOPES:
        raise argument_error("sign scope %r: 'checkpoints' or 'bundle'" % (scope,))
    return _lib.SIGN_SCOPES[scope]


def verify_reader(reader: ctypes.c_void_p, keys: Keys) -> SignatureResult:
    """dcr_reader_verify_signature on an open reader: the bundle's bytes before
    SIGN read once and checked against the signed table; DCR_E_SIGNATURE when the
    bundle is unsigned, signed by no trusted key, or not what was signed."""
    with trusted(keys) as ring:
        r = _lib.SignatureResultC()
        d = _lib.Detail()
        check(L.dcr_reader_verify_signature(reader, ring._handle(), ctypes.byref(r), ctypes.byref(d)), d)
        return SignatureResult(r.signature_count, r.verified_count, bytes(r.key_id).hex(),
                               "bundle" if r.scope == _lib.SIGN_SCOPES["bundle"] else "checkpoints")


def sign(
    bundle: PathLike,
    secret_key: PathLike,
    *,
    base: Optional[PathLike] = None,
    target: Optional[PathLike] = None,
    scope: str = "checkpoints",
    out: Optional[PathLike] = None,
    threads: int = 0,
    sync: bool = True,
    cancel: Optional["Cancel"] = None,
) -> None:
    """Signs the bundle at ``bundle`` with the secret key file, as ``dcr sign``
    does. The bundle is checked whole first, and ``base`` and ``target`` must be
    its base and target checkpoints (:class:`dcr.BaseMismatchError`,
    :class:`dcr.TargetMismatchError`): their tensors' SHA-256 digests are what the
    signature binds (SPEC.md §20.2). A bundle already signed by other keys gets
    one signature more, of the same scope; signing again with the same key
    changes nothing.

    Args:
        scope: "checkpoints" (default; ``base`` and ``target`` needed) or
            "bundle": the signature signs the bundle alone (signature format 2.0,
            SPEC.md §20.6), nothing is hashed but the bundle, and ``base`` and
            ``target`` are optional (given, they are checked).
        out: where the signed bundle goes, atomically; None (default) replaces
            ``bundle``, which is left as it was on any failure.
        threads: for hashing the checkpoints; 0 = the CPUs this process may use.
        sync: False skips the fsync of the output (survives a killed process, not
            a power loss).
        cancel: a :class:`dcr.Cancel` token that stops it from another thread.
    """
    o = _lib.SignOptions()
    L.dcr_sign_options_default(ctypes.byref(o))
    o.threads = threads
    o.no_sync = int(not sync)
    o.scope = scope_code(scope)
    if cancel is not None:
        o.cancel = cancel._pointer
    d = _lib.Detail()
    from ._bundle import _ckpt, _path  # (_bundle imports this module)

    check(L.dcr_sign_file(_path(bundle), _path(secret_key), None if base is None else _ckpt(base),
                          None if target is None else _ckpt(target),
                          None if out is None else _path(out), ctypes.byref(o), ctypes.byref(d)), d)


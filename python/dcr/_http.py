"""The HTTP(S) options (dcr_http_options) shared by everything that opens a URL:
a bundle (:class:`dcr.Bundle`) and a history archive (:class:`dcr.history.Archive`)."""

from __future__ import annotations

import ctypes
import os
from typing import Any, Mapping, Optional, Tuple, Union

from . import _lib
from ._errors import argument_error

PathLike = Union[str, "os.PathLike[str]"]


def is_url(source: Any) -> bool:
    """Whether source names an http:// or https:// URL (else it is a path)."""
    return isinstance(source, str) and source.lower().startswith(("http://", "https://"))


def http_options(
    url: bool,
    headers: Optional[Mapping[str, str]],
    retries: Optional[int],
    timeout: Optional[int],
    ca_file: Optional[PathLike],
) -> Tuple["_lib.HttpOptions", Any]:
    """The library's default HTTP options with those given, and what must stay
    referenced while they are used (the header lines). Headers and the rest are
    refused for a source that is not a URL (url false): they would be ignored."""
    if not url:
        if headers is not None or retries is not None or timeout is not None or ca_file is not None:
            raise argument_error("headers, http_retries, http_timeout and ca_file are for a URL")
    o = _lib.HttpOptions()
    _lib.lib.dcr_http_options_default(ctypes.byref(o))
    lines = []
    for k, v in (headers or {}).items():
        if not k or any(c in k + v for c in "\r\n") or ":" in k:
            raise argument_error(f"bad header name or value for {k!r}")
        lines.append(f"{k}: {v}".encode())
    arr = (ctypes.c_char_p * max(len(lines), 1))(*lines)
    o.headers, o.header_count = arr, len(lines)
    if retries is not None:
        o.retries = retries
    if timeout is not None:
        o.timeout_s = timeout
    if ca_file is not None:
        o.ca_file = os.fsencode(os.fspath(ca_file))
    return o, arr

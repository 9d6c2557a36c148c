"""What every Python object that owns a libdcr object shares (a bundle, a
keyring, a history archive): it is freed by close(), by a with block, or when
collected. Its own module so that the modules of those objects can all use it."""

from __future__ import annotations

from typing import Any, TypeVar

_T = TypeVar("_T", bound="_Closing")


class _Closing:
    """What owns a libdcr object: closed by close(), by a with block, or when
    collected."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

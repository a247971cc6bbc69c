"""Where logs live: a local directory (a `Path`) or a URL of an object store (a `Store`).

A local path never reaches fsspec: `is_url()` tells them apart by a protocol other
than `file://`, and only a URL imports fsspec (and its backend, such as s3fs).

A store that does not answer costs a bounded time: each call of a backend that runs
on fsspec's event loop (s3fs, gcsfs, adlfs) is given up after `VITALS_STORE_TIMEOUT`
seconds, whatever retries the backend makes inside it, and a view from `bounded()`
gives up sooner: each call after fewer seconds, or every call once the store has not
answered for some seconds (each answer starts them again: a slow store that answers
is not a dead one).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from .._errors import ConfigError, StoreError
from ..config import ENV_STORE_TIMEOUT, store_timeout_from_env
from .failures import store_error

__all__ = ["INSTALL", "Store", "StoredObject", "as_store", "is_url", "stamp"]

_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
INSTALL = 'pip install "vitals-engine[s3]"'
T = TypeVar("T")


def is_url(dir: str | os.PathLike[str] | Store | None) -> bool:
    """Whether `dir` names an object store (any fsspec URL but `file://`), not a path.

    Example:
        >>> is_url("s3://team-evals/qa"), is_url("logs"), is_url("file:///tmp/logs")
        (True, False, False)
    """
    if isinstance(dir, Store):
        return True
    if dir is None or isinstance(dir, os.PathLike):
        return False
    match = _URL.match(dir)
    return match is not None and match.group(1).lower() not in ("file", "local")


def _filesystem(url: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise ConfigError(
            f"'{url}' is an object store's URL; logs there need fsspec and the store's "
            f"backend: {INSTALL} (for S3; gcsfs for gs://, adlfs for az://)."
        ) from None
    try:
        return fsspec.url_to_fs(url)
    except ImportError as exc:
        raise ConfigError(
            f"'{url}': the backend of this store is not installed ({exc}). For S3: {INSTALL}."
        ) from None
    except ValueError as exc:
        raise ConfigError(f"'{url}' is not a URL fsspec knows: {exc}.") from None


class StoredObject:
    """An object of the store: its name under the log directory, size, time and tag."""

    __slots__ = ("modified", "name", "size", "tag")

    def __init__(self, name: str, size: int, modified: float, tag: str) -> None:
        self.name, self.size, self.modified, self.tag = name, size, modified, tag

    def __repr__(self) -> str:
        return f"StoredObject({self.name!r}, {self.size})"


def stamp(local: Path, modified: float) -> None:
    """Give `local`, a copy of an object (pulled, or put from here), the object's
    modification time in the store (when known): a copy as the store has it.

    Example:
        >>> stamp(Path("staging/run.json"), store.info("run.json").modified)
    """
    if modified > 0:
        os.utime(local, (modified, modified))


def _modified(info: dict[str, Any]) -> float:
    for key in ("LastModified", "mtime", "created", "last_modified", "updated"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value)
    return 0.0


class _Patience:
    """How long the views sharing it wait for a store that does not answer: `seconds`
    from `since`, which each answer moves on."""

    __slots__ = ("seconds", "since")

    def __init__(self, seconds: float) -> None:
        self.seconds, self.since = seconds, time.monotonic()

    def left(self) -> float:
        return self.since + self.seconds - time.monotonic()


class Store:
    """A log directory in an object store, reached through fsspec.

    Every call turns the backend's errors into `StoreError`s saying what to do.

    Example:
        >>> store = Store("s3://team-evals/qa")
        >>> store.put("notes.txt", b"hello")
        >>> [o.name for o in store.list()]
        ['notes.txt']
    """

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._fs: Any = None
        self._root = ""
        self._per_call: float | None = None  # None: VITALS_STORE_TIMEOUT, read when called
        self._patience: _Patience | None = None  # None: no call is given up for the others

    def bounded(self, *, per_call: float | None = None, seconds: float | None = None) -> Store:
        """This store, its calls given up sooner: each after `per_call` seconds, and, with
        `seconds`, every one once the store has not answered for `seconds` (from now, and
        from each answer since: a `StoreUnreachable` saying so). The view shares the
        connection, and the views made from it share its patience.

        Example:
            >>> ending = store.bounded(seconds=60)   # the end of a run: a minute of silence
            >>> ending.put_file(log, log.name)
        """
        view = Store(self.url)
        view._fs, view._root = self.fs, self._root
        view._per_call = per_call if per_call is not None else self._per_call
        view._patience = _Patience(seconds) if seconds is not None else self._patience
        return view

    @property
    def patience(self) -> float | None:
        """The seconds without an answer after which this view gives up (None: it never
        gives up for its past calls)."""
        return self._patience.seconds if self._patience is not None else None

    def left(self) -> float | None:
        """Seconds before this view gives up, unless the store answers (None: never)."""
        return self._patience.left() if self._patience is not None else None

    def _seconds(self) -> float:
        """What the next call may take; a `TimeoutError` once the view gave up."""
        cap = self._per_call if self._per_call is not None else store_timeout_from_env()
        left = self.left()
        if left is None:
            return cap
        if left <= 0:
            raise TimeoutError(f"no answer for {self.patience:g} s ({ENV_STORE_TIMEOUT})")
        return min(cap, left)

    def op(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The filesystem's `method(*args, **kwargs)`, given up after the seconds this
        store allows (a `TimeoutError`, which `call` passes on as an `OSError`).

        Example:
            >>> store.call("writing", lambda: store.op("pipe_file", store.path("a"), b"x"))
        """
        fs = self.fs
        if not getattr(fs, "async_impl", False):  # in-process (memory://): never waits
            return getattr(fs, method)(*args, **kwargs)
        seconds = self._seconds()
        try:
            done = getattr(fs, method)(*args, timeout=seconds, **kwargs)
        except TimeoutError:
            raise TimeoutError(f"no answer within {seconds:g} s ({ENV_STORE_TIMEOUT})") from None
        except (FileNotFoundError, FileExistsError):
            self._answered()  # "no such object", "there is one": answers too
            raise
        self._answered()
        return done

    def _answered(self) -> None:
        if self._patience is not None:
            self._patience.since = time.monotonic()

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Store) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Store, (self.url,))  # a Ray worker opens its own connection

    @property
    def protocol(self) -> str:
        return self.url.split("://", 1)[0].lower()

    @property
    def fs(self) -> Any:
        """The fsspec filesystem (opened on first use)."""
        if self._fs is None:
            self._fs, root = _filesystem(self.url)
            self._root = root.rstrip("/")
        return self._fs

    def path(self, name: str) -> str:
        """The backend's path of `name` (a `/`-separated name under the directory)."""
        _ = self.fs
        return f"{self._root}/{name}" if name else self._root

    def url_of(self, name: str) -> str:
        """The URL of `name`, as a user would write it."""
        return f"{self.url}/{name}"

    def call(self, doing: str, fn: Callable[[], T], name: str = "") -> T:
        """`fn()`, a backend error turned into a `StoreError` about `doing`; an `OSError`
        passes (what it means depends on the call: see `failure`)."""
        try:
            return fn()
        except (OSError, StoreError):
            raise
        except Exception as exc:
            raise store_error(exc, self.url_of(name) if name else self.url, doing) from exc

    def _call(self, doing: str, fn: Callable[[], T], name: str = "") -> T:
        try:
            return self.call(doing, fn, name)
        except FileNotFoundError as exc:
            if name and self._bucket_exists():
                raise
            raise self.failure(exc, doing, name) from exc
        except OSError as exc:
            raise self.failure(exc, doing, name) from exc

    def failure(self, exc: OSError, doing: str, name: str = "") -> StoreError:
        """The `StoreError` of an `OSError` the backend raised while `doing` at `name`."""
        if isinstance(exc, FileNotFoundError):
            return store_error(exc, self.url, doing)  # a missing object is no error of ours
        return store_error(exc, self.url_of(name) if name else self.url, doing)

    def _bucket_exists(self) -> bool:
        bucket = self._root.split("/", 1)[0]
        try:
            return bool(self.op("exists", bucket)) if bucket else True
        except Exception:
            return True  # cannot tell: the missing object is the news

    def put(self, name: str, data: bytes) -> None:
        """Write one object whole."""
        self._call("writing", lambda: self.op("pipe_file", self.path(name), data), name)

    def put_file(self, local: Path, name: str) -> None:
        """Copy a local file to one object (it appears whole or not at all)."""
        self._call("writing", lambda: self.op("put_file", str(local), self.path(name)), name)

    def get(self, name: str) -> bytes:
        """The bytes of one object (`FileNotFoundError` when there is none)."""
        return self._call("reading", lambda: self.op("cat_file", self.path(name)), name)

    def get_file(self, name: str, local: Path) -> None:
        """Copy one object to a local file."""
        self._fresh(name)
        self._call("reading", lambda: self.op("get_file", self.path(name), str(local)), name)

    def _fresh(self, name: str) -> None:
        """Forget what the backend remembers of `name` (listings it keeps), so that a size
        or a tag is the store's now: another machine may have written since."""
        self.fs.invalidate_cache(self.path(name))

    def open(self, name: str, block_size: int = 64 * 1024) -> Any:
        """One object as a seekable binary file read in ranges of `block_size`."""
        self._fresh(name)
        return self._call(
            "reading",
            lambda: self.fs.open(
                self.path(name), "rb", block_size=block_size, cache_type="readahead"
            ),
            name,
        )

    def info(self, name: str) -> StoredObject | None:
        """What the store says of one object, or None when there is none."""
        self._fresh(name)
        try:
            info = self._call("reading", lambda: self.op("info", self.path(name)), name)
        except FileNotFoundError:
            return None
        return self._object(info)

    def _object(self, info: dict[str, Any]) -> StoredObject:
        name = str(info["name"]).removeprefix(self._root).lstrip("/")
        tag = str(info.get("ETag") or info.get("etag") or info.get("md5Hash") or "")
        return StoredObject(name, int(info.get("size") or 0), _modified(info), tag)

    def list(self, under: str = "", *, recursive: bool = False) -> list[StoredObject]:
        """The objects under `under` (a folder name; "" is the directory itself)."""
        path = self.path(under)

        def listing() -> list[dict[str, Any]]:
            self.fs.invalidate_cache(path)
            if recursive:
                found = self.op("find", path, detail=True)
                return list(found.values())
            return self.op("ls", path, detail=True)

        try:
            entries = self._call("listing", listing, under)
        except FileNotFoundError:
            return []
        return [self._object(e) for e in entries if e.get("type", "file") == "file"]

    def folders(self, under: str = "") -> list[str]:
        """The names of the folders right under `under`."""
        path = self.path(under)

        def listing() -> list[dict[str, Any]]:
            self.fs.invalidate_cache(path)
            return self.op("ls", path, detail=True)

        try:
            entries = self._call("listing", listing, under)
        except FileNotFoundError:
            return []
        return [
            str(e["name"]).rstrip("/").rsplit("/", 1)[-1]
            for e in entries
            if e.get("type") == "directory"
        ]

    def remove(self, names: list[str]) -> None:
        """Remove objects (those already gone are no error)."""
        if not names:
            return
        paths = [self.path(name) for name in names]
        with contextlib.suppress(FileNotFoundError):
            self._call("removing", lambda: self.op("rm", paths), names[0])

    def check(self) -> None:
        """Raise the `StoreError` of a store that cannot be listed (missing, denied, down)."""
        bucket = self._root.split("/", 1)[0]
        try:
            self.call("opening", lambda: self.op("ls", bucket or self._root, detail=False), "")
        except OSError as exc:
            raise store_error(exc, self.url, "opening") from exc


def as_store(dir: str | os.PathLike[str] | Store) -> Store | None:
    """A `Store` for a URL, else None (a local path).

    Example:
        >>> as_store("s3://team-evals/qa")
        Store('s3://team-evals/qa')
        >>> as_store("logs") is None
        True
    """
    if isinstance(dir, Store):
        return dir
    return Store(os.fspath(dir)) if is_url(dir) else None

"""The store of cached replies: one SQLite database in WAL mode, shared by processes.

Why SQLite: it is in the standard library, one file holds the whole store, and in
WAL mode readers never wait for a writer and writers from several processes take
turns under a lock the database manages itself; a crash mid-write leaves the last
committed state. A directory of files would need our own locking and atomic renames
for the same, and `vitals cache ls|stats|clear` would have to walk it all.

Each entry carries a checksum of its key, reply and origin: a reply changed on disk (a
flipped byte that still decodes, an entry moved to another key) is a miss, never
served. Entries of a store made before checksums (schema 1) have none and are served
as they were; the store gains the column when first opened. An entry dated more than
`CLOCK_SKEW` seconds ahead (a clock set wrong) counts as expired wherever an expiry
applies.

Each reply is committed as soon as it is stored: another process sees it at once,
and a run killed mid-way loses nothing it paid for. A stored reply that cannot be
read back (a damaged entry) is skipped with a warning and replaced by the next reply
for its key: the call goes out as if nothing were cached, it never fails. A store
that cannot be opened at all is reported once and the run goes on without it.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from .._logging import log
from ..vocab.model_calls import ReplyOrigin
from ..vocab.turns import Turn

__all__ = ["CLOCK_SKEW", "STORE_FILE", "CachedReply", "ModelStats", "ReplyStore", "open_store"]

#: The database's file name in the cache directory.
STORE_FILE = "replies.sqlite"
_SCHEMA_VERSION = 2
_BUSY_MS = 30_000
#: Seconds an entry may seem to come from the future (clocks of processes sharing a store).
CLOCK_SKEW = 300.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    base_url TEXT NOT NULL,
    model TEXT NOT NULL,
    created REAL NOT NULL,
    reply BLOB NOT NULL,
    origin BLOB,
    checksum BLOB
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS replies_created ON replies (created);
CREATE INDEX IF NOT EXISTS replies_model ON replies (model);
"""


@dataclass(frozen=True, slots=True)
class CachedReply:
    """A reply found in the store: the turn, the call it first answered, when."""

    turn: Turn
    origin: ReplyOrigin
    created: float


@dataclass(frozen=True, slots=True)
class ModelStats:
    """What the store holds of one model: replies, their bytes, oldest and newest."""

    provider: str
    model: str
    replies: int
    bytes: int
    oldest: float
    newest: float


_encode_turn = msgspec.json.Encoder().encode
_decode_turn = msgspec.json.Decoder(Turn).decode
_encode_origin = msgspec.json.Encoder().encode
_decode_origin = msgspec.json.Decoder(ReplyOrigin).decode


class ReplyStore:
    """The replies in one cache directory.

    Example:
        >>> store = ReplyStore(Path("~/.cache/vitals-engine").expanduser())
        >>> store.put(key, "OpenAI", "https://api.openai.com/v1", "gpt-4.1", turn)
        >>> store.get(key).turn.text
        'Paris'
    """

    def __init__(self, dir: Path) -> None:
        dir.mkdir(parents=True, exist_ok=True)
        self.path = dir / STORE_FILE
        self._lock = threading.Lock()
        self._warned_damage = False
        self._db = sqlite3.connect(
            self.path, timeout=_BUSY_MS / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            _when_free(lambda: _set_up(self._db))
        except BaseException:
            self._db.close()
            raise

    def get(self, key: str, *, max_age: float | None = None) -> CachedReply | None:
        """The reply stored under `key`, unless it is older than `max_age` seconds or
        cannot be read (then a warning, and None)."""
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT reply, origin, created, checksum FROM replies WHERE key = ?", (key,)
                ).fetchone()
        except sqlite3.Error as exc:
            self._damaged(key, exc)
            return None
        if row is None:
            return None
        reply, origin, created, checksum = row
        if checksum is not None and checksum != _checksum(key, reply, origin):
            self._damaged(key, ValueError("the entry does not match its checksum"))
            return None
        try:
            created = float(created)
            if max_age is not None and not _fresh(created, max_age):
                return None
            return CachedReply(
                _decode_turn(reply), _decode_origin(origin) if origin else ReplyOrigin(), created
            )
        except (msgspec.DecodeError, TypeError, ValueError) as exc:
            self._damaged(key, exc)
            return None

    def _damaged(self, key: str, exc: Exception) -> None:
        if not self._warned_damage:  # once per store: a damaged file may hold thousands
            self._warned_damage = True
            log.warning(
                f"vitals-engine: the cache in {self.path} failed on a reply ({exc}); the call "
                "goes out instead (a damaged entry is replaced by its new reply). Said once "
                "per store; `vitals cache clear` empties the cache."
            )

    def put(
        self,
        key: str,
        provider: str,
        base_url: str,
        model: str,
        turn: Turn,
        origin: ReplyOrigin | None = None,
    ) -> None:
        """Store `turn` as the reply under `key` (replacing what was there), committed
        at once."""
        reply = _encode_turn(turn)
        stored_origin = _encode_origin(origin) if origin is not None else None
        row = (
            key,
            provider,
            base_url,
            model,
            time.time(),
            reply,
            stored_origin,
            _checksum(key, reply, stored_origin),
        )
        try:
            with self._lock:
                self._db.execute(
                    "INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row
                )
        except sqlite3.Error as exc:  # a reply not kept costs a call later, never a sample
            self._damaged(key, exc)

    def stats(self, *, model: str | None = None) -> list[ModelStats]:
        """What the store holds, per provider and model (only `model`'s, if given)."""
        where, args = _where(None, model)
        with self._lock:
            rows = self._db.execute(
                "SELECT provider, model, count(*), "
                "sum(length(reply) + coalesce(length(origin), 0) + length(key)), "
                f"min(created), max(created) FROM replies {where} "
                "GROUP BY provider, model ORDER BY provider, model",
                args,
            ).fetchall()
        return [ModelStats(p, m, n, b or 0, lo, hi) for p, m, n, b, lo, hi in rows]

    def entries(
        self, *, model: str | None = None, older_than: float | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """The stored replies, newest first: key, provider, base URL, model, when, size
        and the call each first answered (only `model`'s, or those older than
        `older_than` seconds, if given)."""
        where, args = _where(older_than, model)
        sql = (
            "SELECT key, provider, base_url, model, created, length(reply), origin "
            f"FROM replies {where} ORDER BY created DESC"
        )
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        out = []
        for key, provider, base_url, name, created, size, origin in rows:
            try:
                found = _decode_origin(origin) if origin else ReplyOrigin()
            except msgspec.DecodeError:
                found = ReplyOrigin()
            out.append(
                {
                    "key": key,
                    "provider": provider,
                    "base_url": base_url,
                    "model": name,
                    "created": created,
                    "bytes": size,
                    "origin": found,
                }
            )
        return out

    def clear(self, *, older_than: float | None = None, model: str | None = None) -> int:
        """Remove stored replies (only those older than `older_than` seconds, or of
        `model`, if given); return how many went."""
        where, args = _where(older_than, model)
        with self._lock:
            gone = self._db.execute(f"DELETE FROM replies {where}", args).rowcount
            if older_than is None and model is None:
                self._db.execute("VACUUM")
        return gone

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _checksum(key: str, reply: Any, origin: Any) -> bytes:
    """What an entry's checksum is: a digest of its key, reply and origin (as the database
    hands them back: bytes, or text where a damaged entry holds some)."""
    digest = hashlib.blake2b(key.encode(), digest_size=16)
    for part in (reply, origin or b""):
        digest.update(b"\0" + (part if isinstance(part, bytes) else str(part).encode()))
    return digest.digest()


def _fresh(created: float, max_age: float) -> bool:
    """Whether an entry stored at `created` is younger than `max_age` seconds (one dated
    in the future beyond the clocks' skew is not)."""
    now = time.time()
    return now - max_age <= created <= now + CLOCK_SKEW


def _set_up(db: sqlite3.Connection) -> None:
    db.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.executescript(_SCHEMA)
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == 1:  # made before checksums: its entries keep none
        db.execute("ALTER TABLE replies ADD COLUMN checksum BLOB")
        version = 0
    if version == 0:
        db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
    elif version != _SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"its schema is version {version}, this vitals-engine reads {_SCHEMA_VERSION}"
        )


_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
#: Waits between two tries of `_when_free` (a test replaces it to release a lock it holds).
_pause: Callable[[float], None] = time.sleep


def _when_free(step: Callable[[], None]) -> None:
    """Run `step`, again while the database is locked, for up to the busy timeout.

    Switching a new store to WAL needs the file's exclusive lock: while another process
    making the store at the same moment is writing it (it holds the reserved lock),
    SQLite answers "database is locked" at once, not after busy_timeout, as waiting
    could deadlock.
    """
    deadline = time.monotonic() + _BUSY_MS / 1000
    pause = 0.002
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", None)
            if code is None or code & 0xFF not in _BUSY_CODES or time.monotonic() > deadline:
                raise
        _pause(pause)
        pause = min(pause * 2, 0.1)


def _where(older_than: float | None, model: str | None) -> tuple[str, tuple[Any, ...]]:
    terms: list[str] = []
    args: list[Any] = []
    if older_than is not None:
        terms.append("created < ?")
        args.append(time.time() - older_than)
    if model is not None:
        terms.append("(model = ? OR lower(provider) || '/' || model = lower(?))")
        args += [model, model]
    return ("WHERE " + " AND ".join(terms) if terms else ""), tuple(args)


_stores: dict[Path, ReplyStore | None] = {}
_stores_lock = threading.Lock()


def open_store(dir: Path) -> ReplyStore | None:
    """The process's store in `dir`, opened on first use; None (after one warning) when
    it cannot be opened: the run goes on without a cache."""
    where = dir.expanduser().resolve()
    with _stores_lock:
        if where in _stores:
            return _stores[where]
        try:
            store: ReplyStore | None = ReplyStore(where)
        except (OSError, sqlite3.Error) as exc:
            log.warning(
                f"vitals-engine: the cache in {where} cannot be used ({exc}); running without "
                f"it. Delete {where / STORE_FILE} or set VITALS_CACHE_DIR to another directory."
            )
            store = None
        _stores[where] = store
        return store

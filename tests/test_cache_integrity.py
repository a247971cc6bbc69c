"""A cached reply is served only as it was stored: a byte changed on disk is a miss (and
one warning), never a wrong answer; an entry dated in the future is not forever young."""

from __future__ import annotations

import logging
import sqlite3
import time

from vitals_engine.caching.store import STORE_FILE, ReplyStore
from vitals_engine.vocab.model_calls import ReplyOrigin
from vitals_engine.vocab.turns import ContentText, TokenUsage, Turn

PARIS = Turn("assistant", [ContentText("Paris")], tokens=TokenUsage(input=3, output=1))


def stored(tmp_path, key="k1") -> ReplyStore:
    store = ReplyStore(tmp_path)
    store.put(key, "OpenAI", "https://api.openai.com/v1", "gpt-4.1", PARIS, ReplyOrigin(task="t"))
    return store


def sql(tmp_path, statement: str, *args) -> None:
    with sqlite3.connect(tmp_path / STORE_FILE) as db:
        db.execute(statement, args)


def test_a_byte_changed_on_disk_is_a_miss_with_one_warning(tmp_path, caplog):
    store = stored(tmp_path)
    store.put("k2", "OpenAI", "https://api.openai.com/v1", "gpt-4.1", PARIS)
    assert store.get("k1").turn.text == "Paris"
    for key in ("k1", "k2"):  # still valid JSON, another answer: only a checksum tells
        sql(
            tmp_path,
            "UPDATE replies SET reply = replace(reply, 'Paris', 'Parks') WHERE key = ?",
            key,
        )
    with caplog.at_level(logging.WARNING, logger="vitals_engine"):
        assert store.get("k1") is None
        assert store.get("k2") is None
    said = [r.getMessage() for r in caplog.records if "cache" in r.getMessage()]
    assert len(said) == 1
    assert "does not match its checksum" in said[0]


def test_a_damaged_entry_is_replaced_by_the_next_reply(tmp_path):
    store = stored(tmp_path)
    sql(tmp_path, "UPDATE replies SET reply = replace(reply, 'Paris', 'Parks')")
    assert store.get("k1") is None
    store.put("k1", "OpenAI", "https://api.openai.com/v1", "gpt-4.1", PARIS)
    assert store.get("k1").turn.text == "Paris"


def test_an_entry_moved_to_another_key_is_a_miss(tmp_path):
    store = stored(tmp_path)
    sql(tmp_path, "UPDATE replies SET key = 'k9' WHERE key = 'k1'")
    assert store.get("k9") is None


def test_an_entry_dated_in_the_future_expires(tmp_path):
    """A clock set wrong when it was stored does not keep an entry from expiring."""
    store = stored(tmp_path)
    sql(tmp_path, "UPDATE replies SET created = ?", time.time() + 86_400)
    assert store.get("k1", max_age=3600) is None
    assert store.get("k1").turn.text == "Paris"  # no expiry asked: still served


def test_a_store_of_the_earlier_schema_is_read_and_its_entries_trusted(tmp_path):
    """A store made before checksums (schema 1) opens; its entries, which have none, are
    served as before, and new ones get one."""
    with sqlite3.connect(tmp_path / STORE_FILE) as db:
        db.executescript(
            "CREATE TABLE replies (key TEXT PRIMARY KEY, provider TEXT NOT NULL, "
            "base_url TEXT NOT NULL, model TEXT NOT NULL, created REAL NOT NULL, "
            "reply BLOB NOT NULL, origin BLOB) WITHOUT ROWID; PRAGMA user_version = 1;"
        )
        db.execute(
            "INSERT INTO replies VALUES ('old', 'OpenAI', 'u', 'm', ?, ?, NULL)",
            (time.time(), b'{"role":"assistant","contents":[{"type":"text","text":"Rome"}]}'),
        )
    store = ReplyStore(tmp_path)
    assert store.get("old").turn.text == "Rome"
    store.put("new", "OpenAI", "u", "m", PARIS)
    sql(tmp_path, "UPDATE replies SET reply = replace(reply, 'Paris', 'Parks') WHERE key = 'new'")
    assert store.get("new") is None

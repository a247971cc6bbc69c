"""Reading logs that live in an object store (`s3://bucket/prefix/<log>`).

A header is read in ranges, never the whole object: a `.json` log's bytes up to its
`"samples"` key (`json_reader.json_header_from`), an `.eval`'s zip directory and its
`header.json` member. A whole log is copied once into the store's staging directory
(again only when its size changed) and read there; a running journal is rebuilt there
from its shipped segments.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

from .._errors import LogFormatError, StoreError
from ..storage.location import Store, StoredObject, as_store
from ..storage.segments import journals, rebuild
from ..storage.staging import mirror_dir
from ..storage.sync import LOG_SUFFIXES, pull, pull_log
from . import schema as s
from .decoding import decode_json, header_decoder
from .eval_reader import MAX_HEADER_BYTES
from .formats import read_parts
from .journal_format import JOURNAL_SUFFIX
from .json_reader import json_header_from

__all__ = ["fetch", "pulled", "split_url", "stored_header", "stored_headers", "stored_logs"]

_MANIFESTS = frozenset({"listing.json", "logs.json", "eval-set.json"})


def split_url(url: str) -> tuple[Store, str]:
    """A log's URL as its directory's store and its name there.

    Example:
        >>> split_url("s3://team-evals/qa/run.json")
        (Store('s3://team-evals/qa'), 'run.json')
    """
    parent, _, name = url.rstrip("/").rpartition("/")
    store = as_store(parent)
    if store is None or not name:
        raise LogFormatError(f"{url}: not the URL of a log in a store.")
    return store, name


def _eval_header(fh: zipfile.ZipFile, where: Path) -> s.EvalLog:
    for member in ("header.json", "_journal/start.json"):
        try:
            info = fh.getinfo(member)
        except KeyError:
            continue
        if info.file_size > MAX_HEADER_BYTES:
            raise LogFormatError(f"{where}: its {member} is too big for a header.")
        return decode_json(header_decoder, fh.read(member), where, member).header(where)
    raise LogFormatError(f"{where}: no header.json or _journal/start.json in the zip.")


def stored_header(store: Store, name: str) -> s.EvalLog:
    """The header of the log `name` in `store`, read in ranges.

    Raises `LogFormatError` for what is not a readable log, `StoreError` for a store
    that fails.

    Example:
        >>> stored_header(Store("s3://team-evals/qa"), "2026-11-28T10-00-00_qa_abc.json").status
        'success'
    """
    where = Path(store.url_of(name))
    with store.open(name) as fh:
        if name.lower().endswith(".eval"):
            try:
                with zipfile.ZipFile(fh) as zf:
                    return _eval_header(zf, where)
            except zipfile.BadZipFile as exc:
                raise LogFormatError(f"{where}: not a readable .eval zip: {exc}.") from None
        return json_header_from(fh, where)


def stored_logs(store: Store) -> Iterator[StoredObject]:
    """The final logs right under the store's directory (no manifests, no journals)."""
    for obj in store.list():
        name = obj.name
        if name.endswith(LOG_SUFFIXES) and name not in _MANIFESTS and not name.startswith("."):
            yield obj


def fetch(url: str) -> Path:
    """A local copy of the log or journal at `url` (in the store's staging directory).

    Example:
        >>> read_log(fetch("s3://team-evals/qa/run.json"))
    """
    store, name = split_url(url)
    local = mirror_dir(store.url) / name
    if name.endswith(JOURNAL_SUFFIX):
        if name not in journals(store):
            raise LogFormatError(f"{url}: no such journal in the store.")
        rebuild(store, name, local)
        return local
    obj = store.info(name)
    if obj is None:
        raise LogFormatError(f"{url}: the log does not exist.")
    try:
        return pull_log(store, obj, local)
    except FileNotFoundError:
        raise LogFormatError(f"{url}: the log does not exist.") from None
    except StoreError:
        raise


def pulled(url: str) -> Path:
    """A local directory holding copies of every log and journal of the store at `url`
    (each copied again only when it changed).

    Example:
        >>> read_logs(pulled("s3://team-evals/qa"))
    """
    store = as_store(url)
    if store is None:
        raise LogFormatError(f"{url}: not the URL of an object store.")
    return pull(store, mirror_dir(store.url))


def stored_headers(url: str) -> Iterator[tuple[str, float, s.EvalLog | LogFormatError, bool]]:
    """Each log of the store at `url`: its name, modification time, header (or why it
    cannot be read) and whether it is a running journal. Final logs' headers are read in
    ranges; journals are rebuilt from their segments (a journal whose final log is in
    place is left out). `StoreError` when the store cannot be listed.

    Example:
        >>> [(name, header.status) for name, _, header, _ in stored_headers("s3://b/qa")]
    """
    store = as_store(url)
    if store is None:
        raise LogFormatError(f"{url}: not the URL of an object store.")
    store.check()
    finals = set()
    for obj in stored_logs(store):
        finals.add(obj.name.rsplit(".", 1)[0])
        try:
            header: s.EvalLog | LogFormatError = stored_header(store, obj.name)
        except LogFormatError as exc:
            header = exc
        yield obj.name, obj.modified, header, False
    for journal in journals(store):
        if journal.removesuffix(JOURNAL_SUFFIX) in finals:
            continue
        try:
            header = read_parts(fetch(store.url_of(journal)), True)[0]
        except LogFormatError as exc:
            header = exc
        yield journal, 0.0, header, True

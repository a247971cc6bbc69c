"""A provider's batch API: submit many requests at once, ask how the batch is doing,
take each request's outcome, cancel. One subclass per wire format (`openai_batch.py`,
`anthropic_batch.py`, `google_batch.py`); this module holds what they share: the HTTP
calls (through the run's connection pool, with the provider's headers and errors) and
the shapes the batch queue works with.

Every request in a batch has a `custom_id` the caller chose; its outcome comes back
under it: a reply body (parsed by the provider as a live reply is), an error body
(classified as a live error is), or the news that it expired or was cancelled before
it ran.

Results are read line by line (`read_lines`): a line that cannot be read (not JSON, cut
short, without a string `custom_id`, not the shape the format promises) is an
"unreadable" outcome saying where and why, under the custom id it names when one can be
told, and never loses the lines around it. What to do with such a line, a duplicate, or
a request missing from the results (the provider's `BatchState.answered` says how many
it ended) is the batch queue's business (`batching/results.py`).

A server that answers the batch API's endpoint with 404 has none (most local
OpenAI-compatible servers): `BatchUnsupported`, which says to run without batch mode.

Example:
    >>> api = batch_api(provider)
    >>> batch_id = await api.submit([BatchEntry("s1-e1-0", provider.body(request))])
    >>> state = await api.state(batch_id)
    >>> if state.ended:
    ...     outcomes = await api.outcomes(state)
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal
from urllib.parse import urljoin

import msgspec

from .._errors import BatchUnsupported, ProviderError
from ..transport.base import HttpResponse
from ..transport.pool import current_pool, transport_scope
from ..vocab.turns import Turn
from .answered import origin
from .http import HttpProvider

__all__ = [
    "BatchApi",
    "BatchEntry",
    "BatchOutcome",
    "BatchState",
    "BatchUnsupported",
]

_encoder = msgspec.json.Encoder()

Kind = Literal["succeeded", "errored", "expired", "cancelled", "unreadable"]
#: A custom id named in a line that is not JSON (cut short, say): `"custom_id": "..."`.
_NAMED_ID = re.compile(rb'"custom_id"\s*:\s*"([A-Za-z0-9_.:-]{1,128})"')


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """One request of a batch: the caller's id for it, and the body a live call would POST."""

    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BatchState:
    """What the provider says of a submitted batch.

    `ended`: its outcomes can be taken (it completed, expired or was cancelled);
    `failed`: the whole batch was refused (say, it did not validate), with the reason;
    `counts`: requests by state, in the provider's words;
    `answered`: how many requests the provider counts as ended with an outcome in its
    results (succeeded, errored, expired or cancelled), None when it does not say.
    """

    id: str
    status: str
    ended: bool
    counts: Mapping[str, int] = field(default_factory=dict)
    failed: str | None = None
    #: What the provider needs to fetch the outcomes (an output file's id, a URL...).
    results: Any = None
    answered: int | None = None


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """One request's outcome: a reply or an error body (with the HTTP status it stands
    for), or that it expired or was cancelled before it ran; or ("unreadable") a line of
    the results that could not be read, `body` saying where and why, under the custom id
    it names ("" when it names none that can be told)."""

    custom_id: str
    kind: Kind
    status: int = 200
    body: Any = None


class BatchApi(ABC):
    """A provider's batch API, over the provider's own connection settings and errors."""

    #: Requests one batch may hold, and its size in bytes, at most (the provider's caps).
    max_requests: ClassVar[int] = 50_000
    max_bytes: ClassVar[int] = 100_000_000
    #: The endpoint named in errors (relative to the base URL).
    endpoint: ClassVar[str] = ""

    def __init__(self, provider: HttpProvider) -> None:
        self.provider = provider
        self._encoded: dict[str, bytes] = {}
        self._origin = origin(provider.base_url)

    # -- what a wire format implements ---------------------------------------------

    def entry_size(self, entry: BatchEntry) -> int:
        """Bytes `entry` adds to a batch (encoded as the batch holds it, with some room)."""
        return len(self.encoded(entry)) + len(entry.custom_id) + 64

    @abstractmethod
    async def submit(self, entries: Sequence[BatchEntry], key: str = "") -> str:
        """Submit `entries` as one batch (`key`: the run's name for it, which a format that
        can label a batch puts on it, for `find`); its id."""

    async def find(self, key: str, since: float) -> str | None:
        """The id of the batch labelled `key` by `submit`, made no earlier than `since`
        (Unix seconds): for a run that died before the provider's answer to its
        submission arrived. None when the format cannot label batches, or none is found."""
        return None

    @abstractmethod
    async def state(self, batch_id: str) -> BatchState:
        """How batch `batch_id` is doing."""

    @abstractmethod
    async def outcomes(self, state: BatchState) -> list[BatchOutcome]:
        """Every request's outcome, once `state.ended`."""

    @abstractmethod
    async def cancel(self, batch_id: str) -> None:
        """Ask the provider to cancel batch `batch_id` (its unfinished requests)."""

    # -- what the queue does with an outcome ----------------------------------------

    def turn(self, outcome: BatchOutcome) -> Turn:
        """The assistant turn of a reply, or the `ProviderError` an error stands for
        (raised), as a live call's reply or error would be."""
        provider = self.provider
        if outcome.kind == "succeeded" and 200 <= outcome.status < 300:
            try:  # the body is decoded already: parse it as a live reply's
                return provider.parse(outcome.body)
            except (KeyError, TypeError, IndexError, ValueError, AttributeError):
                pass  # malformed: said as a live call would say it, below
        body = outcome.body if isinstance(outcome.body, bytes) else _encoder.encode(outcome.body)
        response = HttpResponse(outcome.status, {}, body)
        try:
            return provider._read_whole(self.url(self.endpoint), response)
        except ProviderError as exc:
            exc.provider, exc.model = provider.name, provider.model
            provider._redact(exc)
            raise

    def encoded(self, entry: BatchEntry) -> bytes:
        """`entry` as the batch's body holds it (what `entry_size` counts), encoded once:
        kept until `submit` takes it."""
        found = self._encoded.get(entry.custom_id)
        if found is None:
            found = self._encoded[entry.custom_id] = self.encode(entry)
        return found

    def take_encoded(self, entry: BatchEntry) -> bytes:
        """`encoded(entry)`, forgotten here (a batch submits an entry once)."""
        found = self._encoded.pop(entry.custom_id, None)
        return found if found is not None else self.encode(entry)

    def encode(self, entry: BatchEntry) -> bytes:
        """`entry` as the batch's body holds it (default: its request body as JSON)."""
        return _encoder.encode(entry.body)

    # -- HTTP --------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return f"{self.provider.base_url}{path}"

    def resolve(self, address: str) -> str:
        """An address the provider gave (a results URL: whole, root-relative or relative),
        resolved against the base URL as RFC 3986 says."""
        return urljoin(self.provider.base_url.rstrip("/") + "/", address)

    def headers(self, url: str, **extra: str) -> dict[str, str]:
        """The headers of a request to `url`: the provider's, credentials included, on the
        base URL's own server (scheme, host and port); elsewhere (a storage bucket's
        signed URL, say) only who is asking."""
        own = self.provider._request_headers()
        if origin(url) != self._origin:
            own = {"user-agent": own["user-agent"]}
        return {**own, **extra}

    async def post(self, path: str, body: bytes, **headers: str) -> Any:
        """POST `body` to `path` (relative to the base URL); the decoded JSON answer."""
        return await self._call("POST", path, body, headers)

    async def get(self, path: str) -> HttpResponse:
        """GET `path` (relative to the base URL, or a whole URL); the whole response."""
        return await self._call("GET", path, b"", {}, decode=False)

    async def _call(
        self, method: str, path: str, body: bytes, headers: dict[str, str], *, decode: bool = True
    ) -> Any:
        provider = self.provider
        provider.check_key()
        url = path if "://" in path else self.url(path)
        sent = self.headers(url, **headers)
        if method == "GET":
            sent.pop("content-type", None)
        pool = current_pool()
        try:
            if pool is None:
                async with transport_scope(pool_size=2) as own:
                    response = await self._exchange(own, method, url, sent, body)
            else:
                response = await self._exchange(pool, method, url, sent, body)
        except ProviderError as exc:
            exc.provider, exc.model = provider.name, provider.model
            provider._redact(exc)
            raise
        if response.status == 404:
            raise BatchUnsupported(
                f"{url} answered 404: the server at {provider.base_url} has no batch API "
                f"for {provider.name} (or no such batch). Run without batch mode (batch=False)",
                provider=provider.name,
                model=provider.model,
                status=404,
            )
        if response.status >= 400:
            error = provider._error(response)
            provider._redact(error)
            raise error
        if not decode:
            return response
        return provider._decode(response)

    async def _exchange(
        self, pool: Any, method: str, url: str, headers: dict[str, str], body: bytes
    ) -> HttpResponse:
        provider = self.provider
        transport = pool.get(provider.base_url, provider.client)
        if method == "GET":
            return await transport.get(url, headers, provider.timeouts)
        return await transport.post(url, headers, body, provider.timeouts)


_decoder = msgspec.json.Decoder()


def read_lines(
    data: bytes, where: str, outcome: Callable[[str, dict[str, Any]], BatchOutcome]
) -> list[BatchOutcome]:
    """The outcome of each line of a JSON Lines results file (`where`: which file, for the
    reports), read by `outcome(custom_id, line)`; blank lines skipped. A line that cannot
    be read is an "unreadable" outcome, never an error: not JSON (under the custom id it
    names, if a cut line still shows one), not an object, without a string `custom_id`,
    or one `outcome` cannot make sense of (a KeyError, TypeError, ValueError ...).

    Example:
        >>> [o.kind for o in read_lines(data, "output file file-1", _outcome)]
        ['succeeded', 'unreadable', 'errored']   # line 2: "not JSON (cut short?)"
    """
    found: list[BatchOutcome] = []
    for number, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        at = f"line {number} of the {where}"
        try:
            line = _decoder.decode(raw)
        except msgspec.DecodeError:
            named = _NAMED_ID.search(raw)
            custom_id = named.group(1).decode() if named is not None else ""
            found.append(unreadable(custom_id, f"{at}: not JSON (cut short?)"))
            continue
        if not isinstance(line, dict):
            found.append(unreadable("", f"{at}: not a JSON object"))
            continue
        custom_id = line.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id:
            said = _encoder.encode(custom_id).decode()
            why = f"custom_id {said}" if "custom_id" in line else "no custom_id"
            found.append(unreadable("", f"{at}: {why}"))
            continue
        try:
            found.append(outcome(custom_id, line))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            found.append(unreadable(custom_id, f"{at}: not a result ({type(exc).__name__})"))
    return found


def unreadable(custom_id: str, why: str) -> BatchOutcome:
    """The outcome of a line of results that could not be read: `why` says where and why."""
    return BatchOutcome(custom_id, "unreadable", 0, why)

"""What every HTTP provider shares: keys, the request round trip, error classification.

A wire format subclasses `HttpProvider` and implements four methods:
`url()`, `headers()`, `body(request)` and `parse(data)`. Everything else
(API keys, sending through the run's transport, timing, mapping HTTP
failures to our error tree, reading rate-limit waits from headers) is here.

Streaming: a wire format that can stream also implements `stream_reader()`
(a `StreamReader` that reads the server-sent events of one reply into the
body the API would have answered whole, which `parse()` then reads), and
where it differs, `stream_url()` and `stream_body()`. `HttpProvider` streams
when `stream=True`, or when `auto_stream(body)` says the API wants it. The
reply comes back as the same `Turn` the whole body would give; on the way,
each piece of its text goes to the run's `text_sink()`, under a key of its
own per attempt. A stream that ends before its completion marker is
`ProviderUnavailable` (retryable; the partial reply is never the answer), an
error event is classified like the HTTP status it stands for (and carries
that status), and an event that is not the JSON the API promises is
`MalformedResponse`. `Timeouts.read` bounds each wait between two events.

Every request says who sends it (`User-Agent: vitals-engine/<version>`,
unless the user's own headers say otherwise). Credentials in a base URL
(`https://user:pass@host/v1`) become Basic auth and leave the URL.

Secrets: the API key and URL passwords live only in the headers of the
request being sent. They are never part of `repr()`, of an error message,
or of anything logged.
"""

from __future__ import annotations

import base64
import email.utils
import math
import os
import re
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, NoReturn
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import msgspec

from .._errors import (
    AuthenticationError,
    ConfigError,
    MalformedResponse,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    QuotaExhausted,
    RateLimitError,
)
from .._logging import log
from .._version import version
from ..pacing.scope import text_sink
from ..transport.base import (
    MAX_REDIRECTS,
    HttpResponse,
    StreamedResponse,
    Timeouts,
    same_origin_redirect,
)
from ..transport.pool import TransportPool, current_pool, transport_scope
from ..transport.sse import ServerSentEvent, server_sent_events
from ..vocab.model_calls import ChatRequest
from ..vocab.turns import Turn
from .answered import ANSWERED, origin
from .base import Provider

__all__ = ["HttpProvider", "StreamErrorEvent", "StreamReader", "retry_after_seconds"]

_encoder = msgspec.json.Encoder()
#: Body keys of a streamed request, dropped when `stream=False` overrides `params`.
_STREAM_KEYS = frozenset(("stream", "stream_options"))
#: Header names whose values are credentials.
_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|session|password", re.IGNORECASE)


_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def _page(response: HttpResponse) -> str | None:
    """What an HTML error page (a proxy's or gateway's, not the provider's JSON) says: its
    title, or None for a body that is no such page."""
    head = response.body[:4096].lstrip()
    kind = response.headers.get("content-type", "").lower()
    if "html" not in kind and not head[:15].lower().startswith((b"<html", b"<!doctype html")):
        return None
    found = _TITLE.search(head)
    title = " ".join(found.group(1).decode("utf-8", "replace").split()) if found else ""
    page = f"an HTML page titled '{title}'" if title else "an HTML page"
    return (
        f"{page}, from a proxy or gateway between us and the provider (not the provider's "
        "own answer)"
    )


def _events(count: int) -> str:
    return f"{count} event" + ("" if count == 1 else "s")


def _user_agent() -> str:
    return f"vitals-engine/{version()}"


_EXCERPT = 500
_DURATION = re.compile(
    r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$"
)


def _parse_duration(text: str) -> float | None:
    """'1.5', '20ms', '6m0s', '1h2m3s' -> seconds."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        return value if math.isfinite(value) and value >= 0 else None
    match = _DURATION.match(text)
    if not match or not any(match.groups()):
        return None
    hours, minutes, seconds, millis = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds + millis / 1000


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def _checked_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The user's extra headers, lower-cased, or a ConfigError naming one that cannot be
    sent (its value is never shown: it may be a secret)."""
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ConfigError(
                f"The header name {name!r} cannot be sent: a header name is one word of "
                "letters, digits and !#$%&'*+-.^_`|~ (no spaces, no colon)."
            )
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise ConfigError(
                f"The value of header {name!r} cannot be sent: it must be a string without "
                "line breaks or NUL characters."
            )
        checked[name.lower()] = value
    return checked


def _split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """(the URL without user info, a Basic authorization value, the user name)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    user = unquote(parts.username or "")
    password = unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return bare, f"Basic {token}", user


def _seconds_until(stamp: str) -> float | None:
    """An RFC 3339 or HTTP date -> seconds from now (never negative)."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(stamp).timestamp()
        except (TypeError, ValueError):
            return None
    return max(0.0, when - time.time())


def retry_after_seconds(headers: Mapping[str, str], *, resets: bool = True) -> float | None:
    """The wait a provider asks for, from `retry-after-ms`, `retry-after`, or (with
    `resets`, for a 429) the rate-limit reset headers of OpenAI (`x-ratelimit-reset-*`)
    and Anthropic (`anthropic-ratelimit-*-reset`). None when no header says."""
    headers = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in headers:
        millis = _parse_duration(headers["retry-after-ms"])
        if millis is not None:
            return millis / 1000
    if "retry-after" in headers:
        value = headers["retry-after"].strip()
        seconds = _parse_duration(value)
        if seconds is None:
            seconds = _seconds_until(value)
        if seconds is not None:
            return seconds
    if not resets:
        return None
    waits = []
    for name, value in headers.items():
        if name.startswith("x-ratelimit-reset"):
            waits.append(_parse_duration(value))
        elif name.startswith("anthropic-ratelimit-") and name.endswith("-reset"):
            waits.append(_seconds_until(value))
    known = [w for w in waits if w is not None]
    return max(known) if known else None


class StreamErrorEvent(Exception):
    """Raised by a `StreamReader` for an error event in the stream: the HTTP status it
    stands for, and the event's data (the provider's error body)."""

    def __init__(self, status: int, data: str) -> None:
        super().__init__(status, data)
        self.status = status
        self.data = data


class StreamReader(ABC):
    """Reads the server-sent events of one streamed reply into the body the API would have
    answered whole (for `HttpProvider.parse()`).

    `feed()` takes each event and returns the new reply text it carries (None if none).
    It raises `StreamErrorEvent` for an error event, and msgspec.DecodeError, KeyError,
    TypeError, IndexError or ValueError for an event that is not what the API promises.
    """

    #: The completion marker, as the error for a stream cut before it names it.
    marker: ClassVar[str] = "its completion marker"
    #: Whether reading stops at the marker; if not, the stream must also end after it.
    stops_at_marker: ClassVar[bool] = True

    def __init__(self) -> None:
        #: Whether the completion marker came.
        self.complete = False

    @abstractmethod
    def feed(self, event: ServerSentEvent) -> str | None:
        """Take one event; the reply text it adds (not thinking), or None."""

    @abstractmethod
    def body(self) -> Any:
        """The whole reply, as the non-streaming API would have answered it."""


@dataclass(frozen=True, slots=True)
class Reply:
    """Where a reply's body came from: the response (a stream's status and headers, its
    body read already), and whether it was streamed."""

    response: HttpResponse
    streamed: bool


class HttpProvider(Provider):
    """A provider reached over HTTP with a JSON body."""

    #: Environment variable holding the API key (None: no key needed).
    env_key: ClassVar[str | None] = None
    #: Further variables tried, in order, when `env_key` is unset.
    fallback_env_keys: ClassVar[tuple[str, ...]] = ()
    #: Whether a request without a key makes sense (local servers).
    key_required: ClassVar[bool] = True
    default_base_url: ClassVar[str] = ""
    #: What to check when nothing listens at `base_url`.
    start_hint: ClassVar[str] = (
        "check base_url for a typo in the host or port, and that the server there is running"
    )
    #: Environment variable that, when set, replaces `default_base_url` (None: none).
    env_base_url: ClassVar[str | None] = None

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        params: dict[str, Any] | None = None,
        client: Any = None,
        timeouts: Timeouts | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool | None = None,
    ) -> None:
        if not model:
            raise ConfigError(f"{self.name} needs a model name: pass model=...")
        if not base_url and self.env_base_url:
            base_url = os.environ.get(self.env_base_url)
        url, basic_auth, user = _split_credentials((base_url or self.default_base_url).rstrip("/"))
        super().__init__(model, url, params)
        #: The key given, else found in the environment; a missing one is an error only
        #: when a request is sent (`check_key()`), so a chat can be built without it.
        self._given_key = api_key
        self._api_key = self._find_key() or ""
        self.client = client
        self.timeouts = timeouts or Timeouts()
        #: True: stream every reply; False: never; None: when `auto_stream()` says so.
        self.stream = stream
        self.extra_headers = _checked_headers(headers or {})
        self._basic_auth = basic_auth
        if basic_auth is not None and "authorization" in {
            name.lower() for name in self.headers(self._api_key)
        }:
            raise ConfigError(
                f"base_url holds credentials (user '{user}') for Basic auth, but {self.name} "
                "sends its API key in the Authorization header, and a request has only one. "
                "Remove the credentials from base_url, or pass headers={'Authorization': ...} "
                "yourself."
            )
        self._all_headers: dict[str, str] | None = None
        self._secret_values: tuple[str, ...] | None = None
        self._origin = origin(url)

    def _find_key(self) -> str | None:
        if self._given_key is not None:
            return self._given_key
        names = [self.env_key, *self.fallback_env_keys] if self.env_key else []
        return next((os.environ[n] for n in names if os.environ.get(n)), None)

    def check_key(self) -> None:
        """Raise `AuthenticationError` when this model needs a key and has none. The
        environment is read again while no key was found (a variable set after the chat
        was built counts)."""
        if self._api_key or not self.key_required:
            return
        key = self._find_key()
        if key:
            self._api_key = key
            self._all_headers = self._secret_values = None  # made with no key
            return
        where = f"set {self.key_variables} or " if self.env_key else ""
        raise AuthenticationError(
            f"No API key for {self.name}: {where}pass api_key=... to the chat",
            provider=self.name,
            model=self.model,
        )

    @property
    def key_variables(self) -> str:
        """Where the key is looked for, as a phrase: "the X (or Y) environment variable"."""
        others = "".join(f" (or {n})" for n in self.fallback_env_keys)
        return f"the {self.env_key}{others} environment variable"

    # -- what a wire format implements -------------------------------------------

    @abstractmethod
    def url(self) -> str:
        """The endpoint to POST to."""

    @abstractmethod
    def headers(self, api_key: str) -> dict[str, str]:
        """Request headers, including authentication."""

    @abstractmethod
    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The request body for `request`."""

    @abstractmethod
    def parse(self, data: Any) -> Turn:
        """The assistant turn (with tokens and finish reason) from a decoded body.

        May raise KeyError, TypeError, IndexError or ValueError on a body that
        lacks what the API promises: those become `MalformedResponse`.
        """

    # -- what a wire format that streams implements --------------------------------

    def stream_url(self) -> str:
        """The endpoint to POST a streamed request to (default: `url()`)."""
        return self.url()

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body` (from `body()`) asking for a streamed reply."""
        return {**body, "stream": True}

    def stream_reader(self) -> StreamReader:
        """A reader for one streamed reply."""
        raise NotImplementedError(f"{self.name} cannot stream")

    def auto_stream(self, body: dict[str, Any]) -> bool:
        """Whether to stream `body` when nobody said (`stream=None`): default never."""
        return False

    def streams(self, body: dict[str, Any]) -> bool:
        """Whether `body` goes out streamed: as `stream=` says; unset, when `params` hold
        `"stream": true` or `auto_stream(body)` says so."""
        if self.stream is not None:
            return self.stream
        return body.get("stream") is True or self.auto_stream(body)

    def error_message(self, data: Any) -> str | None:
        """The provider's own words from an error body, if it has any."""
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                return error["message"]
            if isinstance(error, str):
                return error
            if isinstance(data.get("message"), str):
                return data["message"]
        return None

    #: Where the account's quota and billing are seen to.
    billing_hint: ClassVar[str] = "the provider's billing page"

    def quota_exhausted(self, status: int, data: Any) -> bool:
        """Whether an error answer (decoded `data`) says the account's quota or credit is
        spent, which waiting does not cure. Default: no provider says so."""
        return False

    def classify_status(self, status: int) -> type[ProviderError]:
        """The error class of an HTTP status."""
        if status == 429:
            return RateLimitError
        if status in (401, 403):
            return AuthenticationError
        if status in (408, 409) or status >= 500:
            return ProviderUnavailable
        return ProviderError

    # -- the round trip ---------------------------------------------------------------

    async def generate(self, request: ChatRequest) -> Turn:
        pool = current_pool()
        if pool is None:
            async with transport_scope(pool_size=4) as own:
                return await self._send(own, request)
        return await self._send(pool, request)

    def _request_headers(self) -> dict[str, str]:
        headers = self._all_headers
        if headers is None:  # built once: the key and extra headers do not change
            headers = {"content-type": "application/json", "user-agent": _user_agent()}
            headers.update((k.lower(), v) for k, v in self.headers(self._api_key).items())
            if self._basic_auth is not None:
                headers["authorization"] = self._basic_auth
            headers.update(self.extra_headers)
            self._all_headers = headers
        return headers

    def _secrets(self) -> tuple[str, ...]:
        """What must never be stored or raised: the API key, the values of headers that
        carry credentials (their tokens too), and the password of base-URL credentials."""
        found = self._secret_values
        if found is None:
            values = {self._api_key}
            for name, value in self._request_headers().items():
                if _SECRET_HEADER.search(name):
                    values.add(value)
                    values.add(value.rpartition(" ")[2])  # the token of "Bearer <token>"
            if self._basic_auth is not None:
                token = self._basic_auth.rpartition(" ")[2]
                user_pass = base64.b64decode(token).decode("utf-8", "replace")
                values.update((token, user_pass.partition(":")[2]))
            found = tuple(sorted((v for v in values if len(v) >= 4), key=len, reverse=True))
            self._secret_values = found
        return found

    def _redact(self, exc: ProviderError) -> None:
        """Take every secret out of an error's message and body, whatever put it there (a
        gateway echoing the request's headers in its error body, say)."""
        secrets = self._secrets() + self.live_secrets()
        if not secrets:
            return
        for attr in ("message", "body"):
            text = getattr(exc, attr)
            if isinstance(text, str) and any(secret in text for secret in secrets):
                for secret in secrets:
                    text = text.replace(secret, "[redacted]")
                setattr(exc, attr, text)
        exc.args = (exc.message,)

    async def _send(self, pool: TransportPool, request: ChatRequest) -> Turn:
        self.check_key()
        payload = self.body(request)
        started = time.time()
        try:
            data, source = await self.exchange(pool, payload)
            data = await self.continue_reply(pool, payload, data)
        except ProviderError as exc:
            exc.provider, exc.model = self.name, self.model
            if exc.refused and self._origin not in ANSWERED:
                self._nothing_listening(exc)
            self._redact(exc)
            raise
        turn = self._parsed(data, source)
        return msgspec.structs.replace(
            turn,
            model=turn.model or self.model,
            started_at=started,
            duration=time.time() - started,
        )

    async def exchange(self, pool: TransportPool, payload: dict[str, Any]) -> tuple[Any, Reply]:
        """Send `payload` (streamed when `streams()` says so) and read the reply: its body
        as the API answers it whole (a stream put together), and where it came from."""
        streaming = self.streams(payload)
        if streaming:
            url = self.stream_url()
            payload = self.stream_body(payload)
        else:
            url = self.url()
            if payload.get("stream") is True:  # params said stream, stream=False says not
                payload = {k: v for k, v in payload.items() if k not in _STREAM_KEYS}
        body = _encoder.encode(payload)
        headers = await self.authorize(url, self._request_headers(), body)
        transport = pool.get(self.base_url, self.client)
        if streaming:
            async with transport.stream(url, headers, body, self.timeouts) as streamed:
                ANSWERED.add(self._origin)
                return await self._read_streamed(url, streamed)
        response = await transport.post(url, headers, body, self.timeouts)
        ANSWERED.add(self._origin)
        return self._whole_data(url, response), Reply(response, streamed=False)

    async def authorize(self, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        """The headers of one attempt to POST `body` to `url`: `headers` (the request's own,
        never to be changed in place), with what authenticates this attempt. Default: the
        key is in `headers()` already. A cloud platform signs each attempt afresh here (a
        retry too), or adds a token it refreshes before it expires."""
        return headers

    def live_secrets(self) -> tuple[str, ...]:
        """Credentials that change while the chat lives (a platform's current token),
        taken out of error messages with the key. Default: none."""
        return ()

    def stream_events(self, response: StreamedResponse) -> AsyncGenerator[ServerSentEvent, None]:
        """The events of a streamed reply's body: server-sent events unless a wire format
        frames its stream otherwise (Bedrock's binary event stream)."""
        return server_sent_events(response.chunks())

    async def continue_reply(self, pool: TransportPool, payload: dict[str, Any], data: Any) -> Any:
        """The whole reply to `payload`, given its first part `data`: a wire format whose
        API can pause a reply (Anthropic's `pause_turn`) asks for the rest here. Default:
        `data` is the whole reply."""
        return data

    def _nothing_listening(self, exc: ProviderError) -> None:
        """A refused connection where nothing ever answered in this process: a typo in
        base_url, or a local server not started. Waiting will not fix it: not retried."""
        exc.retryable = False
        exc.message = (
            f"nothing is listening at {self.base_url} (connection refused): {self.start_hint}. "
            "Not retried: nothing has answered at this address yet"
        )
        exc.args = (exc.message,)

    def _read_whole(self, url: str, response: HttpResponse) -> Turn:
        return self._parsed(self._whole_data(url, response), Reply(response, streamed=False))

    def _whole_data(self, url: str, response: HttpResponse) -> Any:
        if response.status >= 400:
            raise self._error(response)
        if 300 <= response.status < 400:
            raise self._redirect(url, response)
        return self._decode(response)

    def _parsed(self, data: Any, source: Reply) -> Turn:
        """The turn `parse()` reads from a reply's body, or `MalformedResponse` saying what
        the body lacks."""
        try:
            return self.parse(data)
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
            response = source.response
            if source.streamed:
                whole = HttpResponse(response.status, response.headers, _encoder.encode(data))
                why = f"the streamed reply lacks a field ({exc!r})"
                raise self._malformed(whole, why) from exc
            raise self._malformed(response, f"missing or wrong field ({exc!r})") from exc

    async def _read_streamed(self, url: str, response: StreamedResponse) -> tuple[Any, Reply]:
        kind = response.headers.get("content-type", "").lower()
        if response.status >= 300 or "json" in kind:  # an error, or a reply sent whole
            whole = HttpResponse(response.status, response.headers, await response.read())
            return self._whole_data(url, whole), Reply(whole, streamed=False)
        reader = self.stream_reader()
        sink = text_sink()
        attempt = object()  # this attempt's key: a retried stream starts afresh
        count = 0
        events = self.stream_events(response)  # closed at once when we stop early
        async with aclosing(events):
            while True:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    break
                except ProviderTimeout as exc:  # the read timeout, between two events
                    raise ProviderTimeout(
                        f"{exc.message}, after {_events(count)} of the stream",
                        request_id=self._request_id(response.headers),
                    ) from exc
                except ProviderUnavailable as exc:  # the connection dropped
                    raise self._cut(response, count, reader, exc.message) from exc
                count += 1
                text = self._feed(reader, event, count, response)
                if text and sink is not None:
                    try:
                        sink(attempt, text)
                    except Exception:  # the live text is a view: it never fails the call
                        log.warning(
                            "dropped the live text of a reply: its sink failed", exc_info=True
                        )
                        sink = None
                if reader.complete and reader.stops_at_marker:
                    break
        if not reader.complete:
            raise self._cut(response, count, reader, "the body ended")
        head = HttpResponse(response.status, response.headers, b"")
        try:
            return reader.body(), Reply(head, streamed=True)
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
            raise self._malformed(head, f"the streamed reply lacks a field ({exc!r})") from exc

    def _feed(
        self, reader: StreamReader, event: ServerSentEvent, count: int, response: StreamedResponse
    ) -> str | None:
        try:
            return reader.feed(event)
        except StreamErrorEvent as exc:
            raise self._stream_error(exc, count, response) from None
        except msgspec.DecodeError as exc:
            self._malformed_event(event, count, response, "is not valid JSON", exc)
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
            self._malformed_event(event, count, response, f"lacks a field ({exc!r})", exc)

    def _malformed_event(
        self,
        event: ServerSentEvent,
        count: int,
        response: StreamedResponse,
        why: str,
        exc: Exception,
    ) -> NoReturn:
        data = HttpResponse(response.status, response.headers, event.data.encode())
        raise self._malformed(data, f"event {count} of the stream ({event.event!r}) {why}") from exc

    def _stream_error(
        self, exc: StreamErrorEvent, count: int, response: StreamedResponse
    ) -> ProviderError:
        """The error an error event stands for: classified as its HTTP status would be."""
        error = self._error(HttpResponse(exc.status, response.headers, exc.data.encode()))
        error.message = (
            f"{error.message} (an error event in the stream, after {_events(count - 1)})"
        )
        error.args = (error.message,)
        return error

    def _cut(
        self, response: StreamedResponse, count: int, reader: StreamReader, how: str
    ) -> ProviderUnavailable:
        return ProviderUnavailable(
            f"the stream was cut after {_events(count)}, before {reader.marker} ({how}); "
            "the partial reply was dropped and the call may be retried",
            provider=self.name,
            model=self.model,
            request_id=self._request_id(response.headers),
        )

    def _decode(self, response: HttpResponse) -> Any:
        try:
            return msgspec.json.decode(response.body)
        except msgspec.DecodeError as exc:
            raise self._malformed(response, "the body is not valid JSON") from exc

    def _excerpt(self, response: HttpResponse) -> str:
        text = response.body[:_EXCERPT].decode("utf-8", "replace")
        return text + ("..." if len(response.body) > _EXCERPT else "")

    def _malformed(self, response: HttpResponse, why: str) -> MalformedResponse:
        return MalformedResponse(
            f"malformed response: {why}. Body: {self._excerpt(response)!r}",
            provider=self.name,
            model=self.model,
            status=response.status,
            request_id=self._request_id(response.headers),
            body=self._excerpt(response),
        )

    @staticmethod
    def _request_id(headers: Mapping[str, str]) -> str | None:
        for name in ("x-request-id", "request-id", "x-goog-request-id", "cf-ray"):
            if name in headers:
                return headers[name]
        return None

    def _redirect(self, url: str, response: HttpResponse) -> ProviderError:
        location = response.headers.get("location")
        where = urljoin(url, location) if location else "no address"
        if same_origin_redirect(url, response.status, response.headers) is not None:
            message = (
                f"the server redirected {MAX_REDIRECTS} times in a row (307/308, last to "
                f"{where}): point base_url at the final address"
            )
        else:
            message = (
                f"the server answered with a redirect to {where}, which is not followed (only "
                "307 and 308 to the same server are): point base_url at the new address"
            )
        return ProviderError(
            message,
            provider=self.name,
            model=self.model,
            status=response.status,
            request_id=self._request_id(response.headers),
        )

    def _error(self, response: HttpResponse) -> ProviderError:
        try:
            data = msgspec.json.decode(response.body)
        except msgspec.DecodeError:
            data = None
        said = self.error_message(data) or _page(response) or self._excerpt(response)
        said = said or "no details"
        cls = self.classify_status(response.status)
        kw: dict[str, Any] = {
            "provider": self.name,
            "model": self.model,
            "status": response.status,
            "request_id": self._request_id(response.headers),
            "body": self._excerpt(response),
        }
        if self.quota_exhausted(response.status, data):
            return QuotaExhausted(
                f"the account's quota or billing: {said}. Not retried: no request will "
                f"succeed until the account behind the key has credit or quota again ("
                f"{self.billing_hint}); then resume the run (resume=True), which keeps the "
                "finished samples",
                **kw,
            )
        # Reset headers (sent on every answer by some) say when a rate window resets: a
        # 429's business only. Retry-After itself counts on any answer worth retrying.
        wait = (
            retry_after_seconds(response.headers, resets=cls is RateLimitError)
            if cls.retryable
            else None
        )
        hint = f" (retry after {wait:g}s)" if wait is not None else ""
        if cls is RateLimitError:
            return RateLimitError(f"rate limited: {said}{hint}", retry_after=wait, **kw)
        if cls is AuthenticationError:
            where = f" Check {self.key_variables} or api_key=." if self.env_key else ""
            return AuthenticationError(f"authentication failed: {said}.{where}", **kw)
        if response.status == 404:
            return ProviderError(
                f"not found: {said}. Check the model name '{self.model}' and base_url.", **kw
            )
        return cls(said + hint, retry_after=wait, **kw)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} model={self.model!r} base_url={self.base_url!r}>"

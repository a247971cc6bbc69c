"""What every HTTP provider shares: keys, the request round trip, error classification.

A wire format subclasses `HttpProvider` and implements four methods:
`url()`, `headers()`, `body(request)` and `parse(data)`. Everything else
(API keys, sending through the run's transport, timing, mapping HTTP
failures to our error tree, reading rate-limit waits from headers) is here.

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
from abc import abstractmethod
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import msgspec

from .._errors import (
    AuthenticationError,
    ConfigError,
    MalformedResponse,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
)
from .._version import version
from ..transport.base import HttpResponse, Timeouts
from ..transport.pool import TransportPool, current_pool, transport_scope
from ..vocab.calls import ChatRequest
from ..vocab.turns import Turn
from .base import Provider

__all__ = ["HttpProvider", "retry_after_seconds"]

_encoder = msgspec.json.Encoder()


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


class HttpProvider(Provider):
    """A provider reached over HTTP with a JSON body."""

    #: Environment variable holding the API key (None: no key needed).
    env_key: ClassVar[str | None] = None
    #: Further variables tried, in order, when `env_key` is unset.
    fallback_env_keys: ClassVar[tuple[str, ...]] = ()
    #: Whether a request without a key makes sense (local servers).
    key_required: ClassVar[bool] = True
    default_base_url: ClassVar[str] = ""

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
    ) -> None:
        if not model:
            raise ConfigError(f"{self.name} needs a model name: pass model=...")
        url, basic_auth, user = _split_credentials((base_url or self.default_base_url).rstrip("/"))
        super().__init__(model, url, params)
        names = [self.env_key, *self.fallback_env_keys] if self.env_key else []
        key = api_key
        if key is None:
            key = next((os.environ[n] for n in names if os.environ.get(n)), None)
        if not key and self.key_required:
            where = f"set {self.key_variables} or " if names else ""
            raise AuthenticationError(
                f"No API key for {self.name}: {where}pass api_key=...",
                provider=self.name,
                model=model,
            )
        self._api_key = key or ""
        self.client = client
        self.timeouts = timeouts or Timeouts()
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

    async def _send(self, pool: TransportPool, request: ChatRequest) -> Turn:
        url = self.url()
        body = _encoder.encode(self.body(request))
        headers = self._all_headers
        if headers is None:  # built once: the key and extra headers do not change
            headers = {"content-type": "application/json", "user-agent": _user_agent()}
            headers.update((k.lower(), v) for k, v in self.headers(self._api_key).items())
            if self._basic_auth is not None:
                headers["authorization"] = self._basic_auth
            headers.update(self.extra_headers)
            self._all_headers = headers
        started = time.time()
        try:
            response = await pool.get(self.base_url, self.client).post(
                url, headers, body, self.timeouts
            )
        except ProviderError as exc:
            exc.provider, exc.model = self.name, self.model
            raise
        if response.status >= 400:
            raise self._error(response)
        if 300 <= response.status < 400:
            raise self._redirect(url, response)
        data = self._decode(response)
        try:
            turn = self.parse(data)
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
            raise self._malformed(response, f"missing or wrong field ({exc!r})") from exc
        return msgspec.structs.replace(
            turn,
            model=turn.model or self.model,
            started_at=started,
            duration=time.time() - started,
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
        return ProviderError(
            f"the server answered with a redirect to {where}, which is not followed (only "
            "307 and 308 to the same server are): point base_url at the new address",
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
        said = self.error_message(data) or self._excerpt(response) or "no details"
        cls = self.classify_status(response.status)
        kw: dict[str, Any] = {
            "provider": self.name,
            "model": self.model,
            "status": response.status,
            "request_id": self._request_id(response.headers),
            "body": self._excerpt(response),
        }
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

"""Google Cloud's Application Default Credentials, for Vertex AI, through google-auth.

`GoogleAuth` finds the credentials the way every Google client library does
(`google.auth.default()`): the service-account or authorized-user file named by
`GOOGLE_APPLICATION_CREDENTIALS`, then the user credentials `gcloud auth
application-default login` wrote, then the metadata server of the machine the code runs
on (Compute Engine, Cloud Run, GKE ...). The project is the one given, else
`GOOGLE_CLOUD_PROJECT`, else the one the credentials name. Their access token (an hour's)
is refreshed in a worker thread `DEFAULT_MARGIN` seconds before it expires, so a long run
never sends a request with a lapsed token.

google-auth is the `vertex` extra, imported only here and only when a Vertex chat is
used. Its refresh needs a transport: `UrllibRequest` below is one on the standard library
(a few token requests an hour need no connection pool, and our own transport is async,
while google-auth calls its transport from a worker thread). google-auth's metadata-server
module imports `requests` itself, so the extra asks for `google-auth[requests]`: without
it `google.auth.default()` silently skips the metadata server.

Example:
    >>> auth = GoogleAuth(project=None)
    >>> auth.resolve()                 # blocking: files, maybe the metadata server
    >>> auth.project
    'my-project'
    >>> token = await auth.token()     # refreshed before it expires
"""

from __future__ import annotations

import http.client
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from .._errors import AuthenticationError, ConfigError, ProviderUnavailable
from .extras import require
from .refresh import DEFAULT_MARGIN, RefreshingCredential

__all__ = ["SCOPE", "GoogleAuth", "UrllibRequest"]

#: The OAuth scope Vertex AI's tokens are asked for.
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
#: Seconds a token request waits when google-auth names no timeout.
DEFAULT_TIMEOUT = 60.0
_PLATFORM = "Vertex AI"
_LOGIN = "gcloud auth application-default login"


class _Response:
    """A response as google-auth reads one (`google.auth.transport.Response`)."""

    def __init__(self, status: int, headers: Any, data: bytes) -> None:
        self.status = status
        self.headers = headers  # an http.client.HTTPMessage: names in any case
        self.data = data


class UrllibRequest:
    """`google.auth.transport.Request` on urllib: google-auth calls it to reach the token
    endpoint and the metadata server. Registered as that class when google-auth loads.

    Example:
        >>> response = UrllibRequest(timeout=10)("https://oauth2.googleapis.com/token",
        ...                                      method="POST", body=b"...")
    """

    def __init__(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _Response:
        exceptions = require("google.auth.exceptions", extra="vertex", platform=_PLATFORM)
        request = urllib.request.Request(url, data=body, headers=dict(headers or {}), method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                return _Response(response.status, response.headers, response.read())
        except urllib.error.HTTPError as error:  # an answer all the same: google-auth reads it
            with error:
                return _Response(error.code, error.headers, error.read())
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise exceptions.TransportError(f"{method} {url}: {exc}") from exc


def _register_transport() -> None:
    transport = require("google.auth.transport", extra="vertex", platform=_PLATFORM)
    transport.Request.register(UrllibRequest)


def _epoch(expiry: datetime | None) -> float | None:
    """google-auth's expiry (a naive UTC datetime) as epoch seconds."""
    if expiry is None:
        return None
    if expiry.tzinfo is None:
        expiry = expiry.replace(tzinfo=UTC)
    return expiry.timestamp()


def _no_credentials(reason: str) -> AuthenticationError:
    return AuthenticationError(
        f"No Google Cloud credentials for {_PLATFORM} ({reason}). Set "
        "GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or run "
        f"`{_LOGIN}` once on this machine, or run on Google Cloud (its metadata server), "
        "or pass credentials=... to the chat.",
        provider=_PLATFORM,
    )


class GoogleAuth:
    """Application Default Credentials (or `credentials` given) and the project they serve,
    with an access token refreshed `margin` seconds before it expires.

    `clock` gives epoch seconds (a test moves it); `timeout` bounds each token request.
    """

    def __init__(
        self,
        project: str | None = None,
        *,
        credentials: Any = None,
        margin: float = DEFAULT_MARGIN,
        clock: Callable[[], float] = time.time,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._given_project = project
        self._credentials = credentials
        self._project: str | None = None
        self._lock = threading.Lock()
        self._request = UrllibRequest(timeout)
        self._token: str | None = None
        self.token_credential = RefreshingCredential(
            self._load, what=f"the {_PLATFORM} access token", margin=margin, clock=clock
        )

    @property
    def resolved(self) -> bool:
        """Whether the credentials and the project are known."""
        return self._credentials is not None and self._project is not None

    @property
    def project(self) -> str:
        """The project requests go to (`resolve()` first)."""
        if self._project is None:
            raise ConfigError(f"{_PLATFORM}: the project is not known yet (resolve() first).")
        return self._project

    @property
    def quota_project(self) -> str | None:
        """The project billed for quota when the credentials name one (user credentials
        from gcloud often do), sent as `x-goog-user-project`."""
        found = getattr(self._credentials, "quota_project_id", None)
        return found if isinstance(found, str) and found else None

    def resolve(self) -> None:
        """Find the credentials and the project (blocking: reads files, may ask the
        metadata server). AuthenticationError when there are no credentials, ConfigError
        when google-auth is not installed or no project is known."""
        with self._lock:
            if self.resolved:
                return
            _register_transport()
            credentials, found = self._credentials, None
            if credentials is None:
                credentials, found = self._default()
            project = (
                self._given_project
                or os.environ.get("GOOGLE_CLOUD_PROJECT")
                or found
                or getattr(credentials, "project_id", None)
            )
            if not project:
                raise ConfigError(
                    f"{_PLATFORM} needs a Google Cloud project, and none is known: pass "
                    "project='my-project' to the chat, or set GOOGLE_CLOUD_PROJECT (the "
                    "credentials found name none)."
                )
            self._credentials, self._project = credentials, project

    def _default(self) -> tuple[Any, str | None]:
        auth = require("google.auth", extra="vertex", platform=_PLATFORM)
        exceptions = require("google.auth.exceptions", extra="vertex", platform=_PLATFORM)
        try:
            return auth.default(scopes=[SCOPE], request=self._request)
        except exceptions.DefaultCredentialsError as exc:
            raise _no_credentials(_first_line(exc)) from None

    def _load(self) -> tuple[str, float | None]:
        """A fresh token from google-auth (blocking), and when it expires."""
        self.resolve()
        exceptions = require("google.auth.exceptions", extra="vertex", platform=_PLATFORM)
        credentials = self._credentials
        try:
            credentials.refresh(self._request)
        except exceptions.RefreshError as exc:
            if getattr(exc, "retryable", False):
                raise ProviderUnavailable(
                    f"the Google token endpoint failed for now: {_first_line(exc)}",
                    provider=_PLATFORM,
                ) from None
            raise AuthenticationError(
                f"Google refused to refresh the {_PLATFORM} access token: "
                f"{_first_line(exc)}. For user credentials run `{_LOGIN}` again; for a "
                "service account check that its key is not deleted or disabled.",
                provider=_PLATFORM,
            ) from None
        except exceptions.TransportError as exc:
            raise ProviderUnavailable(
                f"could not reach Google's token endpoint or the metadata server: "
                f"{_first_line(exc)}",
                provider=_PLATFORM,
            ) from None
        token = credentials.token
        if not isinstance(token, str) or not token:
            raise AuthenticationError(
                f"google-auth refreshed the credentials but gave no {_PLATFORM} access token.",
                provider=_PLATFORM,
            )
        self._token = token
        return token, _epoch(credentials.expiry)

    async def token(self) -> str:
        """The access token, refreshed in a worker thread when it is near its expiry."""
        return await self.token_credential.get()

    def current_token(self) -> str | None:
        """The token held now, if any (no I/O): what errors must never show."""
        return self._token


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]

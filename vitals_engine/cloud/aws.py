"""AWS: the region, credentials from botocore's standard chain, and Signature Version 4.

Credentials come from the chain every AWS tool reads (botocore's): the environment
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), the shared config
and credentials files with their profiles (SSO and assumed roles included), web identity,
the container credentials endpoint and the instance metadata. Temporary credentials are
loaded again `margin` seconds before they expire (`RefreshingCredential`), in a worker
thread, so a long run never sends a request with keys about to lapse and the event loop
never waits on botocore's network calls. Each attempt is signed afresh with botocore's
`SigV4Auth` (its own date, so a retry is a new signature).

Example:
    >>> auth = AwsAuth(find_region("us-east-1"))
    >>> headers = await auth.sign_headers("POST", url, body)   # Authorization, X-Amz-Date ...
"""

from __future__ import annotations

import datetime
import functools
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from .._errors import AuthenticationError, ConfigError
from .extras import require
from .refresh import DEFAULT_MARGIN, RefreshingCredential

__all__ = [
    "AwsAuth",
    "AwsKeys",
    "check_installed",
    "find_region",
    "region_error",
    "region_hint",
]

PLATFORM = "Amazon Bedrock"
EXTRA = "bedrock"
#: How long credentials that say no expiry yet (botocore's deferred ones) are kept before
#: the chain is asked again.
_UNKNOWN_EXPIRY = 900.0
_WHERE_KEYS = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary "
    "keys), or AWS_PROFILE (or profile=) naming a profile of ~/.aws/config, or run "
    "`aws configure` (or `aws sso login` for an SSO profile); on AWS, give the instance, "
    "container or pod a role"
)


class AwsKeys(NamedTuple):
    """One set of AWS keys (frozen: the secret never changes under a signature)."""

    access_key: str
    secret_key: str
    token: str | None

    def __repr__(self) -> str:
        return f"AwsKeys(access_key={self.access_key!r}, ...)"


def region_hint() -> str:
    """What to set when no region is found."""
    return (
        "pass region='us-east-1' (or the region your models are in), or set AWS_REGION "
        "(or AWS_DEFAULT_REGION), or a region in your profile (`aws configure set region ...`)"
    )


def find_region(region: str | None = None, profile: str | None = None) -> str | None:
    """The region: `region`, else `AWS_REGION`, `AWS_DEFAULT_REGION`, else the profile's
    (read by botocore when installed); None when none says.

    Example:
        >>> find_region("eu-west-1")
        'eu-west-1'
    """
    if region:
        return region
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        import botocore.session
    except ImportError:
        return None
    try:
        found = botocore.session.Session(profile=profile).get_config_variable("region")
    except Exception:  # a profile that does not exist: check_key() says so
        return None
    return found if isinstance(found, str) and found else None


def _expiry(credentials: Any) -> float | None:
    """When botocore's credentials expire (epoch seconds), None for keys that never do.

    botocore keeps the expiry of its `RefreshableCredentials` (container, instance, SSO,
    assumed-role and web-identity credentials) as `_expiry_time` and offers no public
    accessor; plain `Credentials` (environment, credentials file) never expire. Read after
    `get_frozen_credentials()`, which fills it for the deferred kinds.
    """
    refreshable = require("botocore.credentials", extra=EXTRA, platform=PLATFORM)
    if not isinstance(credentials, refreshable.RefreshableCredentials):
        return None
    expiry = getattr(credentials, "_expiry_time", None)
    if isinstance(expiry, datetime.datetime):
        return expiry.timestamp()
    return time.time() + _UNKNOWN_EXPIRY


class AwsAuth:
    """The credentials of one profile (or the default chain) and SigV4 signatures made with
    them for `service` in `region`.

    `clock` is the credential's (a test moves it to see keys refreshed before expiry).
    """

    def __init__(
        self,
        region: str,
        *,
        profile: str | None = None,
        service: str = "bedrock",
        margin: float = DEFAULT_MARGIN,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.region = region
        self.profile = profile
        self.service = service
        self.credential: RefreshingCredential[AwsKeys] = RefreshingCredential(
            self._load, what="the AWS credentials", margin=margin, clock=clock
        )
        self._signer: Any = None
        self._signer_keys: AwsKeys | None = None
        self._last: tuple[str, ...] = ()

    def _load(self) -> tuple[AwsKeys, float | None]:
        """The chain resolved afresh (blocking: files, and the network for the container,
        instance and SSO kinds): a new botocore session each time, so the keys are fetched
        anew from whatever holds them, not botocore's copy, which would refresh itself only
        inside a signature (on the event loop) and only minutes before it lapses."""
        session_module = require("botocore.session", extra=EXTRA, platform=PLATFORM)
        exceptions = require("botocore.exceptions", extra=EXTRA, platform=PLATFORM)
        where = f" (profile {self.profile!r})" if self.profile else ""
        try:
            credentials = session_module.Session(profile=self.profile).get_credentials()
            frozen = credentials.get_frozen_credentials() if credentials is not None else None
        except exceptions.BotoCoreError as exc:
            raise AuthenticationError(
                f"{PLATFORM} could not load AWS credentials{where}: {exc}. "
                f"{_WHERE_KEYS[0].upper()}{_WHERE_KEYS[1:]}.",
                provider="Bedrock",
            ) from None
        if frozen is None or not frozen.access_key or not frozen.secret_key:
            raise AuthenticationError(
                f"No AWS credentials found for {PLATFORM}{where}: {_WHERE_KEYS}.",
                provider="Bedrock",
            )
        keys = AwsKeys(frozen.access_key, frozen.secret_key, frozen.token or None)
        return keys, _expiry(credentials)

    async def keys(self) -> AwsKeys:
        """The current keys, loaded (in a worker thread) when none are fresh."""
        return await self.credential.get()

    async def sign_headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        """The headers that sign one request: `Authorization`, `X-Amz-Date`, and
        `X-Amz-Security-Token` for temporary keys."""
        keys = self.credential.fresh()
        if keys is None:
            keys = await self.credential.get()
        return self.sign(keys, method, url, body)

    def sign(self, keys: AwsKeys, method: str, url: str, body: bytes) -> dict[str, str]:
        """`sign_headers()` with these keys: CPU only, botocore's `SigV4Auth` (through
        `_signer_class()`) on a request of the host alone, so host, the date and the token
        are signed: all AWS asks. About 40 us a signature (botocore's own path, through its
        `AWSRequest`, about 60)."""
        signer = self._signer
        if signer is None or self._signer_keys is not keys:
            signer = self._make_signer(keys)
        request = _Request(method, url, {"host": _host(url)}, body)
        signer.add_auth(request)
        headers = request.headers
        out = {"authorization": headers["Authorization"], "x-amz-date": headers["X-Amz-Date"]}
        if keys.token:
            out["x-amz-security-token"] = keys.token
        self._last = (out["authorization"].rpartition("=")[2],)
        return out

    def _make_signer(self, keys: AwsKeys) -> Any:
        credentials = require("botocore.credentials", extra=EXTRA, platform=PLATFORM)
        frozen = credentials.ReadOnlyCredentials(keys.access_key, keys.secret_key, keys.token)
        self._signer = _signer_class()(frozen, self.service, self.region)
        self._signer_keys = keys
        return self._signer

    def live_secrets(self) -> tuple[str, ...]:
        """The secrets in use: the secret key, the session token, the last signature."""
        keys = self.credential.fresh()
        held = (keys.secret_key, keys.token or "") if keys is not None else ()
        return tuple(s for s in (*held, *self._last) if s)

    def __repr__(self) -> str:
        profile = f" profile={self.profile!r}" if self.profile else ""
        return f"<AwsAuth region={self.region!r}{profile}>"


@functools.cache
def _host(url: str) -> str:
    """The Host a request to `url` carries: its host, lower-case, and its port unless the
    scheme's own (as botocore and HTTP clients send it)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


class _Request:
    """A request as botocore's signer reads it (method, url, headers, body, params,
    context): its `AWSRequest` prepares the whole request again each time the signer reads
    the body, which a signature needs only the bytes of."""

    __slots__ = ("body", "context", "headers", "method", "params", "url")

    def __init__(self, method: str, url: str, headers: dict[str, str], body: bytes) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.params: dict[str, str] = {}
        self.context: dict[str, Any] = {}


class _SignedHeaders(dict[str, str]):
    """The headers a signature covers, read the way botocore's signer reads them
    (`get_all`), without its `HTTPHeaders` (an `email.message`, a third of a signature's
    CPU when built twice a request)."""

    def get_all(self, name: str, failobj: Any = None) -> Any:
        value = self.get(name)
        return failobj if value is None else [value]


@functools.cache
def _signer_class() -> type:
    """botocore's `SigV4Auth` with two costs of each signature taken out, the algorithm
    untouched: the headers to sign in a plain dict, and the signing key (four HMACs of the
    secret, the day, the region and the service) kept for the day."""
    auth = require("botocore.auth", extra=EXTRA, platform=PLATFORM)
    skipped = frozenset(auth.SIGNED_HEADERS_BLACKLIST)

    class Signer(auth.SigV4Auth):  # type: ignore[misc, name-defined]
        _day = ""
        _key = b""

        def headers_to_sign(self, request: Any) -> _SignedHeaders:
            out = _SignedHeaders()
            for name, value in request.headers.items():
                lowered = name.lower()
                if lowered not in skipped:
                    out[lowered] = value
            return out

        def signature(self, string_to_sign: str, request: Any) -> str:
            day = request.context["timestamp"][0:8]
            if day != self._day:
                key = self._sign(f"AWS4{self.credentials.secret_key}".encode(), day)
                for part in (self._region_name, self._service_name, "aws4_request"):
                    key = self._sign(key, part)
                self._day, self._key = day, key
            return self._sign(self._key, string_to_sign, hex=True)

    return Signer


def check_installed() -> None:
    """A ConfigError naming the install command when botocore is missing."""
    require("botocore", extra=EXTRA, platform=PLATFORM)


def region_error(model: str) -> ConfigError:
    """The error for a Bedrock chat with no region."""
    return ConfigError(f"{PLATFORM} needs a region for {model}: {region_hint()}.")

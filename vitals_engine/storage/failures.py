"""A backend's error as one of ours: what failed, and what to do about it.

fsspec backends raise what they like: s3fs turns S3's codes into `FileNotFoundError`
(no such bucket), `PermissionError` (access denied) or a plain `OSError` naming the
code; aiohttp and botocore raise their own connection errors. The name of the class
and the text are what they share, so that is what is read.
"""

from __future__ import annotations

from .._errors import (
    StoreAccessDenied,
    StoreError,
    StoreNotFound,
    StoreThrottled,
    StoreUnreachable,
)

__all__ = ["retryable", "store_error"]

_THROTTLED = (
    "slowdown",
    "slow down",
    "reduce your request rate",
    "throttl",
    "toomanyrequests",
    "too many requests",
    "503",
)
_UNREACHABLE = (
    "connect",
    "timeout",
    "timed out",
    "name or service",
    "nodename",
    "unreachable",
    "refused",
    "reset by peer",
    "disconnected",
)
_DENIED = ("accessdenied", "access denied", "forbidden", "403", "invalidaccesskeyid")
_SIGNATURE = ("signaturedoesnotmatch", "expiredtoken", "invalidtoken")


def _text(exc: BaseException) -> str:
    parts = [type(exc).__name__, str(exc)]
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause is not exc:
        parts += [type(cause).__name__, str(cause)]
    return " ".join(parts).lower()


def _kind(exc: BaseException) -> type[StoreError]:
    text = _text(exc)
    if isinstance(exc, PermissionError) or any(w in text for w in _DENIED + _SIGNATURE):
        return StoreAccessDenied
    if any(w in text for w in _THROTTLED):
        return StoreThrottled
    if isinstance(exc, FileNotFoundError) or "nosuchbucket" in text:
        return StoreNotFound
    if isinstance(exc, ConnectionError | TimeoutError) or any(w in text for w in _UNREACHABLE):
        return StoreUnreachable
    return StoreError


_ADVICE = {
    StoreNotFound: "The bucket (or container) does not exist: create it, or fix the URL.",
    StoreAccessDenied: (
        "Access denied: check the credentials the store's backend finds (for S3: "
        "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance role) and "
        "that they may list, read, write and delete under this prefix."
    ),
    StoreUnreachable: (
        "The store did not answer: check the network, and the endpoint (for S3: "
        "AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, when set)."
    ),
    StoreThrottled: "The store asks to slow down (503 SlowDown) and kept asking after retries.",
    StoreError: "The store refused the request.",
}


def store_error(exc: BaseException, url: str, doing: str) -> StoreError:
    """`exc`, raised by the backend while `doing` ("writing", "reading" ...) at `url`, as
    the `StoreError` subclass it is, with what to do in its message.

    Example:
        >>> store_error(PermissionError("Access Denied"), "s3://b/p", "writing")
        StoreAccessDenied('s3://b/p: cannot write: Access Denied. Access denied: ...')
    """
    if isinstance(exc, StoreError):
        return exc
    kind = _kind(exc)
    reason = str(exc).strip().rstrip(".") or type(exc).__name__
    verb = _VERBS.get(doing, doing)
    return kind(f"{url}: cannot {verb}: {reason}. {_ADVICE[kind]}", url=url)


_VERBS = {
    "writing": "write",
    "reading": "read",
    "listing": "list",
    "removing": "remove",
    "opening": "open",
    "locking": "lock",
}


def retryable(exc: StoreError) -> bool:
    """Whether trying again later may succeed: a store that is down or busy, not one
    that is missing or refuses us."""
    return isinstance(exc, StoreUnreachable | StoreThrottled) or type(exc) is StoreError

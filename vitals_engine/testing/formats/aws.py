"""What the mock's AWS platform needs besides a wire format: event-stream frames, the
keys it knows (a fixed test pair, and those its container-credentials endpoint issued,
each with its expiry on the server's own clock) and a SigV4 check of each request.

A frame (AWS's `application/vnd.amazon.eventstream`) is a prelude (total length,
headers length, the CRC32 of those 8 bytes), the headers (name length, name, type 7 for
a string, value length, value), the payload, and the CRC32 of all before it.

The signature is recomputed with botocore's `SigV4Auth` from the request as it came (its
method, path and query as sent, the headers it says it signed, its body) and the secret
of the access key it names: an unknown key is `UnrecognizedClientException`, an issued
key past its expiry `ExpiredTokenException`, a signature that differs
`InvalidSignatureException` (403 each, in AWS's words).

Example:
    >>> keys = AwsKeyStore()
    >>> issued = keys.issue()            # {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}
    >>> keys.advance(3600)               # the issued key has expired on the server's clock
"""

from __future__ import annotations

import re
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

import msgspec

from . import Refused, StreamEvent

__all__ = [
    "TEST_ACCESS_KEY",
    "TEST_SECRET_KEY",
    "AwsKeyStore",
    "Frame",
    "encode_frame",
    "sigv4_signature",
]

#: The fixed key pair the mock takes (and its docs use).
TEST_ACCESS_KEY = "AKIDVITALSMOCK0000001"
TEST_SECRET_KEY = "vitalsMockSecretKey/0000000000000000000000"
_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,\s*"
    r"SignedHeaders=([a-z0-9;\-]+),\s*Signature=([0-9a-f]{64})$"
)
_STRING = 7


def encode_frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream frame of string `headers` and `payload`.

    Example:
        >>> frame = encode_frame({":event-type": "messageStop"}, b'{"stopReason":"end_turn"}')
    """
    head = b"".join(
        struct.pack(">B", len(name.encode()))
        + name.encode()
        + struct.pack(">BH", _STRING, len(value.encode()))
        + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


@dataclass(frozen=True, slots=True)
class Frame(StreamEvent):
    """A streamed event as an event-stream frame: an event (`:event-type` is `event`) or,
    with `exception` set, an exception frame of that `:exception-type`."""

    exception: str | None = None
    corrupt: bool = False

    def encode(self) -> bytes:
        payload = msgspec.json.encode(self.data)
        if self.exception is not None:
            headers = {":message-type": "exception", ":exception-type": self.exception}
        else:
            headers = {":message-type": "event", ":event-type": self.event or ""}
        frame = encode_frame({**headers, ":content-type": "application/json"}, payload)
        if self.corrupt:  # the payload changed after its CRC was made
            frame = frame[:-6] + bytes([frame[-6] ^ 0xFF]) + frame[-5:]
        return frame


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class AwsKeyStore:
    """The keys the mock knows: the test pair (never expires) and each key its container
    endpoint issued (`issue()`), valid `lifetime` seconds on the server's clock, which a
    test moves with `advance()`."""

    def __init__(self, lifetime: float = 3600.0) -> None:
        self.lifetime = lifetime
        self.offset = 0.0
        self._lock = threading.Lock()
        self._keys: dict[str, tuple[str, str | None, float | None]] = {
            TEST_ACCESS_KEY: (TEST_SECRET_KEY, None, None)
        }
        #: The access keys issued, oldest first.
        self.issued: list[str] = []

    def now(self) -> float:
        """The server's clock (epoch seconds)."""
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        """Move the server's clock forward."""
        self.offset += seconds

    def add(self, access_key: str, secret_key: str, token: str | None = None) -> None:
        """Know another key pair (the SigV4 test vectors' `AKIDEXAMPLE`, say)."""
        with self._lock:
            self._keys[access_key] = (secret_key, token, None)

    def issue(self) -> dict[str, str]:
        """A new temporary key pair, as the container credentials endpoint answers."""
        access = "ASIA" + uuid.uuid4().hex[:16].upper()
        secret = uuid.uuid4().hex + uuid.uuid4().hex[:8]
        token = "IQoJmock" + uuid.uuid4().hex * 4
        expires = self.now() + self.lifetime
        with self._lock:
            self._keys[access] = (secret, token, expires)
            self.issued.append(access)
        return {
            "AccessKeyId": access,
            "SecretAccessKey": secret,
            "Token": token,
            "Expiration": _stamp(expires),
        }

    def secret(self, access_key: str, token: str | None) -> str:
        """The secret of `access_key`, or the 403 AWS answers for a key it will not take."""
        with self._lock:
            found = self._keys.get(access_key)
        if found is None or (found[1] is not None and found[1] != token):
            raise Refused(
                "The security token included in the request is invalid.",
                status=403,
                kind="UnrecognizedClientException",
            )
        secret, _, expires = found
        if expires is not None and self.now() >= expires:
            raise Refused(
                "The security token included in the request is expired",
                status=403,
                kind="ExpiredTokenException",
            )
        return secret

    def check(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes, service: str
    ) -> str:
        """Check a request's signature; the access key it was signed with."""
        lowered = {k.lower(): v for k, v in headers.items()}
        match = _AUTH.match(lowered.get("authorization", "").strip())
        if match is None:
            raise Refused(
                "Missing Authentication Token",
                status=403,
                kind="MissingAuthenticationTokenException",
            )
        access, day, region, signed_service, signed, signature = match.groups()
        secret = self.secret(access, lowered.get("x-amz-security-token"))
        stamp = lowered.get("x-amz-date", "")
        if signed_service != service or not stamp.startswith(day):
            raise _mismatch()
        values = {name: lowered.get(name, "") for name in signed.split(";")}
        expected = sigv4_signature(
            method, target, values, body, access=access, secret=secret, region=region,
            service=service, timestamp=stamp,
        )  # fmt: skip
        if expected != signature:
            raise _mismatch()
        return access


def _mismatch() -> Refused:
    return Refused(
        "The request signature we calculated does not match the signature you provided. "
        "Check your AWS Secret Access Key and signing method. Consult the service "
        "documentation for details.",
        status=403,
        kind="InvalidSignatureException",
    )


def sigv4_signature(
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    access: str,
    secret: str,
    region: str,
    service: str,
    timestamp: str,
) -> str:
    """The SigV4 signature botocore makes of a request: `target` is its path and query as
    sent, `headers` the signed ones (lower-case names; `host` among them), `timestamp`
    its `X-Amz-Date`.

    Example:
        >>> sigv4_signature("GET", "/", {"host": "example.amazonaws.com",
        ...     "x-amz-date": "20150830T123600Z"}, b"", access="AKIDEXAMPLE",
        ...     secret="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", region="us-east-1",
        ...     service="service", timestamp="20150830T123600Z")[:12]
        '5fa00fa31553'
    """
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials

    host = headers.get("host", "localhost")
    path, _, query = target.partition("?")
    # The query as parameters, which botocore encodes itself: the canonical form whatever
    # encoding the request's line used.
    params = parse_qsl(query, keep_blank_values=True)
    request: Any = botocore.awsrequest.AWSRequest(
        method=method, url=f"http://{host}{path}", headers=dict(headers), data=body, params=params
    )
    request.context["timestamp"] = timestamp
    signer = botocore.auth.SigV4Auth(
        botocore.credentials.Credentials(access, secret), service, region
    )
    canonical = signer.canonical_request(request)
    return str(signer.signature(signer.string_to_sign(request, canonical), request))

"""A real S3 API on 127.0.0.1 for the tests of logs in object storage.

`s3_server`: moto's S3 server, started once per test session. `s3`: a fresh bucket on
it for one test, the AWS variables pointing at it (the credentials moto takes, its
endpoint as `AWS_ENDPOINT_URL_S3`), a staging directory in the test's tmp_path and a
short shipping interval. `FaultyS3` (`s3_faults`): a small reverse proxy in front of the
server that answers 503 SlowDown, 403 AccessDenied or drops the connection while told
to, and counts the bytes it served per object, so a test can tell a ranged read from a
whole one.

Example:
    >>> def test_something(s3):
    ...     task = ve.Task(data, solver, scorer, dir=s3.url)
"""

from __future__ import annotations

import http.client
import logging
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

#: The bytes of a 503 SlowDown and a 403 AccessDenied as S3 sends them.
SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
    b"<Message>Access Denied</Message></Error>"
)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1, once per session: its endpoint URL."""
    pytest.importorskip("s3fs")
    server_module = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@dataclass
class Bucket:
    """One test's bucket: `url` is its log directory, `client` a boto3 client on it."""

    name: str
    endpoint: str
    staging: Path
    client: Any
    url: str = ""

    def listed(self, prefix: str = "") -> list[str]:
        """The keys of the bucket under `prefix`, sorted."""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.name, Prefix=prefix
        )
        return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.name, Key=key)["Body"].read()


def _forget_clients() -> None:
    """s3fs keeps a filesystem per set of options, and the endpoint is not one of them."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


def point_at(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """The AWS variables of a test: moto's credentials, `endpoint`, no retries by botocore."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    _forget_clients()


@pytest.fixture
def s3(s3_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Bucket]:
    """A fresh bucket on the session's S3 server, and the environment to log there."""
    import boto3

    point_at(monkeypatch, s3_server)
    monkeypatch.setenv("VITALS_STAGING_DIR", str(tmp_path / "staging"))
    monkeypatch.setenv("VITALS_SHIP_INTERVAL", "0.1")
    name = f"evals-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_server,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=name)
    bucket = Bucket(name, s3_server, tmp_path / "staging", client, f"s3://{name}/qa")
    yield bucket
    _forget_clients()


# -- faults ---------------------------------------------------------------------------------


@dataclass
class FaultyS3:
    """A reverse proxy in front of the S3 server. `mode`: None passes requests on,
    "slowdown" answers 503 SlowDown, "denied" 403 AccessDenied, "down" drops the
    connection. `served` counts the body bytes of each GET by key; `refused` the
    requests it turned away."""

    upstream: str
    endpoint: str = ""
    mode: str | None = None
    #: Requests to turn away before passing them on again (None: while `mode` is set).
    budget: int | None = None
    served: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(proxy: FaultyS3) -> type[BaseHTTPRequestHandler]:
    up = urlsplit(proxy.upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                parts = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline().strip():  # trailers
                    pass
                return b"".join(parts)
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _refuse(self) -> bool:
            with proxy.lock:
                mode = proxy.mode
                if mode is None:
                    return False
                proxy.refused += 1
                if proxy.budget is not None:
                    proxy.budget -= 1
                    if proxy.budget <= 0:
                        proxy.mode = proxy.budget = None
            if mode == "down":
                self.close_connection = True
                self.connection.close()
                return True
            status, body = (503, SLOW_DOWN) if mode == "slowdown" else (403, DENIED)
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body) if self.command != "HEAD" else 0))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return True

        def _relay(self) -> None:
            body = self._body()
            if self._refuse():
                return
            conn = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
            dropped = ("host", "transfer-encoding", "content-length", "expect")
            headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
            headers["Host"] = self.headers.get("Host", up.netloc)
            headers["Content-Length"] = str(len(body))
            conn.request(self.command, self.path, body=body or None, headers=headers)
            reply = conn.getresponse()
            data = reply.read()
            self.send_response(reply.status)
            head = self.command == "HEAD"  # its Content-Length is the object's: keep it
            for key, value in reply.getheaders():
                if key.lower() in ("transfer-encoding", "connection"):
                    continue
                if key.lower() != "content-length" or head:
                    self.send_header(key, value)
            if not head:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
                if self.command == "GET":
                    key = unquote(urlsplit(self.path).path)
                    with proxy.lock:
                        proxy.served[key] = proxy.served.get(key, 0) + len(data)
            conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

    return Handler


@pytest.fixture
def s3_faults(s3: Bucket, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultyS3]:
    """The test's bucket reached through a `FaultyS3` proxy (s3fs retrying once only)."""
    import s3fs

    proxy = FaultyS3(s3.endpoint)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    proxy.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 1)
    point_at(monkeypatch, proxy.endpoint)
    yield proxy
    server.shutdown()
    server.server_close()

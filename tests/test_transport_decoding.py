"""What the transports share below them: the body decoder and its limit, response headers
lower-cased and joined, the default TLS context, and the words of their errors.

The transports themselves run these through `tests/test_transport_conformance.py`; here
each piece is taken alone, fed bytes directly.
"""

from __future__ import annotations

import gzip
import ssl
import zlib

import certifi
import httpx
import pytest
from multidict import CIMultiDict

from vitals_engine import ProviderTimeout
from vitals_engine.transport import http11, response, tls
from vitals_engine.transport.base import Timeouts, describe, lower_headers, timed_out
from vitals_engine.transport.decoding import (
    ACCEPT_ENCODING,
    MAX_BODY_BYTES,
    BodyError,
    Decoder,
    decoder_for,
    decompress,
    too_large,
)

TEXT = b'{"text": "' + b"decoded " * 2000 + b'"}'
RAW_DEFLATE = zlib.compress(TEXT, wbits=-15)


def fed(decoder: Decoder, data: bytes, size: int) -> bytes:
    """What `decoder` makes of `data` fed `size` bytes at a time, its end checked."""
    out = b"".join(decoder.feed(data[i : i + size]) for i in range(0, len(data), size))
    decoder.end()
    return out


# -- codings -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 7, 1000, len(TEXT) * 2])
@pytest.mark.parametrize(
    ("encoding", "data"),
    [
        ("gzip", gzip.compress(TEXT)),
        ("x-gzip", gzip.compress(TEXT)),
        ("GZip", gzip.compress(TEXT)),
        ("deflate", zlib.compress(TEXT)),
        ("deflate", RAW_DEFLATE),
    ],
    ids=["gzip", "x-gzip", "mixed-case", "wrapped-deflate", "raw-deflate"],
)
def test_gzip_and_deflate_are_decoded_however_the_bytes_arrive(encoding, data, size):
    """gzip (by either name, in any case) and deflate, zlib-wrapped or raw, decode to the
    body, fed whole or in pieces down to one byte (a deflate stream's wrapping is told by
    its first two bytes, whichever pieces they come in)."""
    assert fed(Decoder(encoding), data, size) == TEXT


def test_stacked_codings_are_undone_last_applied_first():
    """`deflate, gzip` was deflated, then gzipped: gzip is undone first, then deflate;
    identity among them changes nothing."""
    data = gzip.compress(zlib.compress(TEXT))
    assert fed(Decoder("deflate, gzip"), data, 100) == TEXT
    assert fed(Decoder("deflate , identity,gzip"), data, 100) == TEXT
    assert decompress(gzip.compress(gzip.compress(TEXT)), "gzip, gzip") == TEXT


@pytest.mark.parametrize("encoding", ["br", "br, gzip", "gzip, zstd", "compress"])
def test_a_coding_we_did_not_ask_for_hands_the_body_over_as_it_came(encoding):
    """A body with any coding but gzip and deflate is not decoded at all, not even the
    gzip layer over it: the bytes stay what its Content-Encoding says."""
    data = gzip.compress(TEXT)
    decoder = Decoder(encoding)
    assert decoder.layers == []
    assert fed(decoder, data, 100) == data
    assert decoder_for(encoding) is None
    assert decompress(data, encoding) == data


@pytest.mark.parametrize("encoding", [None, "", "identity", "Identity, identity"])
def test_identity_bodies_pass_through(encoding):
    """No coding, or identity: nothing to undo, the bytes are the body."""
    assert decoder_for(encoding) is None
    assert fed(Decoder(encoding), TEXT, 999) == TEXT
    assert decompress(TEXT, encoding) == TEXT


def test_what_follows_the_end_of_a_compressed_stream_is_dropped():
    """Bytes after the end of the gzip stream are not part of the body."""
    decoder = Decoder("gzip")
    assert decoder.feed(gzip.compress(TEXT)) == TEXT
    assert decoder.feed(b"trailing junk") == b""
    decoder.end()


def test_we_ask_for_what_the_decoder_undoes():
    """Accept-Encoding names gzip and deflate, the codings a Decoder undoes."""
    assert ACCEPT_ENCODING == "gzip, deflate"
    for coding in ACCEPT_ENCODING.split(", "):
        assert decoder_for(coding) is not None


# -- broken bodies -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoding", "data"),
    [
        ("gzip", gzip.compress(TEXT)[:-8]),
        ("gzip", gzip.compress(TEXT)[:5]),
        ("deflate", zlib.compress(TEXT)[:-20]),
        ("deflate", RAW_DEFLATE[:1]),
        ("deflate, gzip", gzip.compress(zlib.compress(TEXT)[:-4])),
    ],
    ids=["gzip-tail", "gzip-head", "deflate", "deflate-one-byte", "inner-deflate"],
)
def test_a_compressed_body_cut_short_is_an_error_at_its_end(encoding, data):
    """A compressed stream that began and did not end raises at the body's end, naming
    the coding that is truncated."""
    decoder = Decoder(encoding)
    decoder.feed(data)
    coding = encoding.split(",")[0]
    with pytest.raises(BodyError, match=f"the {coding} body is truncated"):
        decoder.end()
    with pytest.raises(BodyError, match="truncated"):
        decompress(data, encoding)


def test_an_empty_compressed_body_is_no_error():
    """A body with a coding but no bytes (a 204, say) never began a stream: nothing is cut."""
    decoder = Decoder("gzip")
    assert decoder.feed(b"") == b""
    decoder.end()


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_bytes_that_do_not_decompress_are_an_error(encoding):
    """Garbage under a coding raises, naming the coding."""
    with pytest.raises(BodyError, match=f"the {encoding} body does not decompress"):
        Decoder(encoding).feed(b"\x1f\x8b\x08\x00 certainly not deflate data" * 3)


# -- the limit ---------------------------------------------------------------------------------


def test_the_limit_holds_for_raw_bytes():
    """The raw bytes fed, counted over every piece, may reach the limit but not pass it."""
    decoder = Decoder(None, limit=1000)
    assert decoder.feed(b"x" * 600) == b"x" * 600
    assert decoder.feed(b"x" * 400) == b"x" * 400
    with pytest.raises(BodyError, match="larger than the 0 MiB limit"):
        decoder.feed(b"x")
    compressed = Decoder("gzip", limit=100)
    with pytest.raises(BodyError, match="larger than"):
        compressed.feed(gzip.compress(TEXT))  # too many bytes even before inflating
    with pytest.raises(BodyError, match="larger than"):
        decompress(b"x" * 1001, "identity", limit=1000)


@pytest.mark.parametrize("encoding", ["gzip", "deflate, gzip", "gzip, deflate"])
def test_a_bomb_is_refused_as_it_inflates(encoding):
    """A small body that decodes past the limit raises at once, before the rest is made:
    the decoder never holds much more than the limit (here 4 MiB of zeros against 64 KiB)."""
    bomb = b"\0" * (4 << 20)
    for coding in encoding.split(", "):  # in the order they were applied
        bomb = gzip.compress(bomb) if coding == "gzip" else zlib.compress(bomb)
    assert len(bomb) < 64 * 1024
    with pytest.raises(BodyError, match="larger than the 0 MiB limit"):
        Decoder(encoding, limit=64 * 1024).feed(bomb)


def test_a_body_decoding_to_exactly_the_limit_is_taken():
    """The limit is the most a body may take: decoding to exactly that many bytes is fine,
    one more is not."""
    data = gzip.compress(TEXT)
    assert decompress(data, "gzip", limit=len(TEXT)) == TEXT
    with pytest.raises(BodyError, match="larger than"):
        decompress(data, "gzip", limit=len(TEXT) - 1)
    pieces = Decoder("gzip", limit=len(TEXT) - 1)
    with pytest.raises(BodyError, match="larger than"):
        fed(pieces, data, 50)


def test_the_limit_is_256_mib_unless_told_and_named_in_the_message():
    """Every transport's limit is the decoder's; the message names it, and the declared
    size when there is one."""
    assert MAX_BODY_BYTES == 256 << 20 == http11.MAX_BODY_BYTES
    assert Decoder("gzip").limit == MAX_BODY_BYTES
    assert str(too_large(MAX_BODY_BYTES, 300 << 20)) == (
        f"the response body ({300 << 20} bytes) is larger than the 256 MiB limit"
    )
    assert str(too_large(MAX_BODY_BYTES)) == "the response body is larger than the 256 MiB limit"


# -- headers -----------------------------------------------------------------------------------

HEAD = (
    "HTTP/1.1 200 OK\r\nVary: a\r\nX-Note: one\r\nvary: b\r\nX-NOTE: two\r\n"
    "Content-Type: application/json\r\nVARY: c"
)
FIELDS = [(line.split(": ")[0], line.split(": ")[1]) for line in HEAD.split("\r\n")[1:]]


@pytest.mark.parametrize(
    "headers",
    [CIMultiDict(FIELDS), httpx.Headers(FIELDS), FIELDS],
    ids=["aiohttp", "httpx", "pairs"],
)
def test_lower_headers_joins_repeats_as_http11_does(headers):
    """Response headers from aiohttp (a multi-dict), httpx or any mapping come out as
    http11 reads the same head: lower-cased names, repeats joined with ", " in order."""
    if isinstance(headers, list):
        headers = _Pairs(headers)
    _, expected, _ = response.parse_head(HEAD)
    assert lower_headers(headers) == expected
    assert expected["vary"] == "a, b, c"
    assert expected["x-note"] == "one, two"


class _Pairs:
    """A header container whose items() repeats names, as a raw list would."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = pairs

    def items(self) -> list[tuple[str, str]]:
        return self._pairs


def test_lower_headers_of_a_plain_mapping_lower_cases_its_names():
    """Names without repeats are only lower-cased; values are kept as they are."""
    assert lower_headers({"Content-Type": "a", "X-ID": " 1"}) == {"content-type": "a", "x-id": " 1"}
    assert lower_headers({}) == {}


# -- TLS ---------------------------------------------------------------------------------------


def test_the_default_tls_context_is_made_once_per_certificate_setting(monkeypatch):
    """One context per (SSL_CERT_FILE, SSL_CERT_DIR), shared by every caller; another
    setting, another context, verifying servers either way."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    system = tls.default_tls()
    assert tls.default_tls() is system
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    chosen = tls.default_tls()
    assert chosen is not system
    assert tls.default_tls() is chosen
    assert chosen.cert_store_stats()["x509_ca"] > 0
    for context in (system, chosen):
        assert context.check_hostname
        assert context.verify_mode == ssl.CERT_REQUIRED


# -- errors ------------------------------------------------------------------------------------

LIMITS = Timeouts(connect=3, read=7.5, total=60)


def test_timeouts_are_named_with_the_limit_that_ran_out():
    """The same words on every transport: which limit, how long, and (if given) what the
    library said."""
    url = "http://h/v1"
    assert [str(timed_out(url, LIMITS, what)) for what in ("connect", "read")] == [
        "no connection to http://h/v1 in time (connect timeout of 3 s)",
        "no answer from http://h/v1 in time (read timeout of 7.5 s)",
    ]
    total = timed_out(url, LIMITS, "total")
    assert isinstance(total, ProviderTimeout)
    assert str(total) == (
        "no complete answer from http://h/v1 in time (total timeout of 60 s for the whole "
        "attempt): raise Timeouts.total for longer answers"
    )
    assert "(read timeout of 7.5 s: ReadTimeout)" in str(
        timed_out(url, LIMITS, "read", "ReadTimeout")
    )


def test_describe_says_what_a_wrapper_hides():
    """An exception that says nothing is described by its cause, or by the one it was
    raised while handling even when that was hidden; a cause the wrapper already names
    is not said twice."""

    class Wrapper(Exception):
        pass

    def hide() -> None:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except OSError:
            raise Wrapper() from None

    with pytest.raises(Wrapper) as hidden:
        hide()
    assert describe(hidden.value) == "ConnectionResetError: [Errno 104] Connection reset by peer"
    inner = OSError("no route to host")
    outer = Wrapper("connect failed")
    outer.__cause__ = inner
    assert describe(outer) == "Wrapper: connect failed (OSError: no route to host)"
    same = Wrapper("no route to host")
    same.__cause__ = inner
    assert describe(same) == "Wrapper: no route to host"

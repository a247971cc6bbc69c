"""Which servers have answered in this process: what a refused connection means.

A refused connection where a server answered before is that server restarting (a deploy,
a crash, a reload): transient, so it is retried like any dropped connection. Where nothing
has ever answered it is a typo in `base_url` or a server never started, which waiting will
not fix, so it fails at once.

`ANSWERED` holds origins (scheme, host and port): a refusal belongs to the listener, not
to a path, so a server that answered at `/v1` counts for `/v2` too. It lasts as long as
the process: a service that runs evals for days keeps retrying the model server it used
yesterday while that server restarts.

Example:
    >>> ANSWERED.add(origin("http://127.0.0.1:9/v1"))
    >>> origin("http://127.0.0.1:9/other") in ANSWERED
    True
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["ANSWERED", "origin"]

#: Origins where any server gave an HTTP answer (an error status too) in this process.
ANSWERED: set[str] = set()


def origin(url: str) -> str:
    """`scheme://host:port` of a URL, the port spelled out (80 or 443 when it has none).

    Example:
        >>> origin("https://API.example.com/v1")
        'https://api.example.com:443'
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:  # not a port: the request fails later, saying so
        return url
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"

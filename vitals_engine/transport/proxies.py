"""Which proxy a request goes through, read from the environment as httpx and curl read it.

- `http://` URLs use `HTTP_PROXY`, `https://` URLs `HTTPS_PROXY`; `ALL_PROXY`
  serves a scheme without its own. The lower-case forms win over the upper
  (an empty lower-case one turns the proxy off), and under CGI (when
  `REQUEST_METHOD` is set) the upper-case `HTTP_PROXY` is ignored, since a
  client's `Proxy:` header can set it.
- `NO_PROXY` (comma-separated) sends matching hosts direct: `*` for all; a
  name for itself and its subdomains (a leading dot optional, never a bare
  suffix: `openai.com` does not match `notopenai.com`); an IP address or a
  network (`10.0.0.0/8`); `host:port` for that port only.
- A proxy URL is `http://[user:password@]host[:port]` (a missing scheme
  means http, a missing port 80). Its credentials become a Basic
  `Proxy-Authorization`. Other schemes (SOCKS, a TLS connection to the
  proxy itself) are a `ConfigError` naming the variable.

Every transport resolves proxies here, so they agree on which requests go
through which proxy.
"""

from __future__ import annotations

import base64
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from .._errors import AuthenticationError, ConfigError, ProviderError, ProviderUnavailable

__all__ = ["Proxy", "proxy_for", "proxy_refused"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class Proxy:
    """An HTTP proxy: its address (without credentials) and its Basic authorization."""

    url: str
    host: str
    port: int
    authorization: str | None = None


def _variables(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """scheme ("http", "https", "all", "no") -> (the variable's name, its value)."""
    found: dict[str, tuple[str, str]] = {}
    for name, value in environ.items():
        if name.lower().endswith("_proxy") and value:
            found[name.lower()[:-6]] = (name, value)
    if "REQUEST_METHOD" in environ:
        found.pop("http", None)
    for name, value in environ.items():  # lower-case names last: they win
        if name.endswith("_proxy") and name == name.lower():
            if value:
                found[name[:-6]] = (name, value)
            else:
                found.pop(name[:-6], None)
    return found


def _bypassed(host: str, port: int, no_proxy: str) -> bool:
    host = host.lower().strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in no_proxy.split(","):
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        name, wanted = entry, None
        if entry.count(":") == 1 and not entry.startswith("["):
            name, _, given = entry.partition(":")
            if not given.isdecimal():
                continue
            wanted = int(given)
        if wanted is not None and wanted != port:
            continue
        name = name.strip("[]").lstrip(".")
        if address is not None:
            try:
                if address in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        if host == name or host.endswith("." + name):
            return True
    return False


def _parse(variable: str, value: str) -> Proxy:
    text = value.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if scheme != "http" or not host:
        shown = f"{scheme}://{parts.netloc.rpartition('@')[2]}"
        raise ConfigError(
            f"{variable} is {shown}, a proxy we cannot use: only http:// proxies are "
            "supported (CONNECT tunnels carry https). Unset it, or set NO_PROXY for these hosts."
        )
    port = port or _DEFAULT_PORTS[scheme]
    authorization = None
    if "@" in parts.netloc:
        user, password = unquote(parts.username or ""), unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        authorization = f"Basic {token}"
    shown_host = f"[{host}]" if ":" in host else host
    return Proxy(f"http://{shown_host}:{port}", host, port, authorization)


def proxy_for(url: str, environ: Mapping[str, str] | None = None) -> Proxy | None:
    """The proxy the environment names for `url`, or None to go direct.

    Example:
        >>> proxy_for("https://api.openai.com/v1", {"HTTPS_PROXY": "http://proxy:3128"})
        Proxy(url='http://proxy:3128', host='proxy', port=3128, authorization=None)
    """
    variables = _variables(os.environ if environ is None else environ)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    chosen = variables.get(scheme) or variables.get("all")
    if chosen is None or not parts.hostname:
        return None
    port = parts.port or _DEFAULT_PORTS.get(scheme, 80)
    no_proxy = variables.get("no")
    if no_proxy is not None and _bypassed(parts.hostname, port, no_proxy[1]):
        return None
    return _parse(*chosen)


def proxy_refused(proxy: Proxy, destination: str, status: int, reason: str) -> ProviderError:
    """The error for a proxy that would not carry a request to `destination`.

    A 407 is an `AuthenticationError` (retrying will not help: the credentials
    in the proxy variable are missing or wrong), a 5xx `ProviderUnavailable`
    (the proxy could not reach the server), anything else a `ProviderError`.

    Example:
        >>> proxy = Proxy("http://proxy:3128", "proxy", 3128)
        >>> type(proxy_refused(proxy, "api.openai.com:443", 502, "Bad Gateway")).__name__
        'ProviderUnavailable'
    """
    reason = "".join(c for c in reason[:80] if c.isprintable()).strip()
    refused = f"the proxy {proxy.url} refused to carry a request to {destination} ({status}"
    refused += f" {reason})" if reason else ")"
    if status == 407:
        hint = (
            "check the credentials in the proxy variable (HTTP_PROXY, HTTPS_PROXY or ALL_PROXY)"
            if proxy.authorization is not None
            else "the proxy wants credentials: give them in its URL, "
            "http://user:password@host:port, in HTTP_PROXY, HTTPS_PROXY or ALL_PROXY"
        )
        return AuthenticationError(f"{refused}: {hint}")
    if status >= 500:
        return ProviderUnavailable(f"{refused}: the proxy could not reach the server")
    return ProviderError(
        f"{refused}: check that the proxy lets this host through, or name the host in NO_PROXY"
    )

"""Which proxy a URL goes through, from HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY."""

from __future__ import annotations

import base64

import pytest

import vitals_engine as ve
from vitals_engine.transport.proxies import Proxy, proxy_for


def test_no_variables_no_proxy():
    """Without proxy variables every request goes direct."""
    assert proxy_for("https://api.openai.com/v1/chat/completions", {}) is None


def test_each_scheme_takes_its_own_variable():
    """http:// URLs use HTTP_PROXY, https:// URLs HTTPS_PROXY."""
    env = {"HTTP_PROXY": "http://plain:3128", "HTTPS_PROXY": "http://secure:3129"}
    assert proxy_for("http://h/v1", env) == Proxy("http://plain:3128", "plain", 3128, None)
    assert proxy_for("https://h/v1", env) == Proxy("http://secure:3129", "secure", 3129, None)


def test_all_proxy_is_the_fallback():
    """ALL_PROXY serves a scheme that has no variable of its own."""
    env = {"ALL_PROXY": "http://everything:8080", "HTTPS_PROXY": "http://secure:3129"}
    assert proxy_for("http://h/v1", env).host == "everything"
    assert proxy_for("https://h/v1", env).host == "secure"


def test_lower_case_wins_and_an_empty_one_unsets():
    """https_proxy beats HTTPS_PROXY; an empty lower-case variable turns the proxy off."""
    assert (
        proxy_for("https://h", {"HTTPS_PROXY": "http://a:1", "https_proxy": "http://b:2"}).host
        == "b"
    )
    assert proxy_for("https://h", {"HTTPS_PROXY": "http://a:1", "https_proxy": ""}) is None


def test_upper_case_http_proxy_is_ignored_in_a_cgi_request():
    """Under CGI, HTTP_PROXY may come from a client's Proxy: header (httpoxy): ignored."""
    env = {"REQUEST_METHOD": "POST", "HTTP_PROXY": "http://evil:1"}
    assert proxy_for("http://h", env) is None
    assert proxy_for("http://h", {**env, "http_proxy": "http://good:2"}).host == "good"


def test_a_proxy_without_scheme_or_port_gets_http_and_its_default_port():
    """`proxy.corp` means http://proxy.corp:80, as httpx and curl read it."""
    assert proxy_for("https://h", {"HTTPS_PROXY": "proxy.corp"}) == Proxy(
        "http://proxy.corp:80", "proxy.corp", 80, None
    )


def test_proxy_credentials_become_proxy_authorization():
    """User and password in the proxy URL (percent-decoded) go as Basic credentials, and
    stay out of the URL we show."""
    proxy = proxy_for("https://h", {"HTTPS_PROXY": "http://bob:p%40ss@proxy:3128"})
    assert proxy.authorization == "Basic " + base64.b64encode(b"bob:p@ss").decode()
    assert proxy.url == "http://proxy:3128"


@pytest.mark.parametrize(
    ("no_proxy", "host", "bypassed"),
    [
        ("*", "api.openai.com", True),
        ("openai.com", "api.openai.com", True),
        ("openai.com", "openai.com", True),
        (".openai.com", "api.openai.com", True),
        ("openai.com", "notopenai.com", False),
        ("localhost,127.0.0.1", "127.0.0.1", True),
        ("10.0.0.0/8", "10.1.2.3", True),
        ("10.0.0.0/8", "11.1.2.3", False),
        ("::1", "[::1]", True),
        ("api.openai.com:443", "api.openai.com", True),
        ("api.openai.com:8443", "api.openai.com", False),
        (" Example.COM , other ", "example.com", True),
    ],
)
def test_no_proxy(no_proxy, host, bypassed):
    """NO_PROXY: '*' for all; names match themselves and their subdomains (a leading dot is
    optional), never a mere suffix; IPs and networks; host:port entries match that port."""
    env = {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": no_proxy}
    assert (proxy_for(f"https://{host}/v1", env) is None) == bypassed


@pytest.mark.parametrize("url", ["socks5://proxy:1080", "ftp://proxy", "http://:3128"])
def test_a_proxy_we_cannot_use_is_a_config_error(url):
    """A proxy we cannot speak to (SOCKS, another scheme, no host) is a ConfigError naming
    the variable, not a silent direct connection."""
    with pytest.raises(ve.ConfigError, match="HTTPS_PROXY"):
        proxy_for("https://h", {"HTTPS_PROXY": url})

"""An answer that is not the provider's: a proxy's or gateway's HTML error page is said as
its status and the page's title, never shown raw."""

from __future__ import annotations

import pytest

import vitals_engine as ve
from tests.netservers import answer_each, raw_server, response

pytestmark = pytest.mark.anyio

NGINX_504 = b"""<html>
<head><title>504 Gateway Time-out</title></head>
<body>
<center><h1>504 Gateway Time-out</h1></center>
<hr><center>nginx/1.22.1</center>
</body>
</html>
"""
NGINX_413 = NGINX_504.replace(b"504 Gateway Time-out", b"413 Request Entity Too Large")


@pytest.mark.parametrize(
    ("page", "status", "error", "title"),
    [
        (NGINX_504, "504 Gateway Time-out", ve.ProviderUnavailable, "504 Gateway Time-out"),
        (
            NGINX_413,
            "413 Request Entity Too Large",
            ve.ProviderError,
            "413 Request Entity Too Large",
        ),
    ],
)
async def test_a_proxy_s_html_page_is_said_by_its_title(page, status, error, title):
    headers = "Server: nginx/1.22.1\r\nContent-Type: text/html\r\n"
    answer = response(page, status=status, headers=headers).replace(
        b"Content-Type: application/json\r\n", b"", 1
    )
    async with raw_server(answer_each(answer)) as raw:
        chat = ve.chat_openai(
            "gpt-test",
            base_url=f"http://127.0.0.1:{raw.port}/v1",
            api_key="k",
            retry=ve.Retry(max_attempts=1),
        )
        with pytest.raises(error) as caught:
            await chat.chat_async("Hi")
    message = str(caught.value)
    assert f"an HTML page titled '{title}'" in message
    assert "a proxy or gateway" in message
    assert "<html>" not in message
    assert caught.value.status == int(status[:3])

"""The documentation site in a real browser: Playwright driving Debian's chromium.

The site is built once for the session (`mkdocs build --strict`, as `make docs` builds it)
into a temporary directory and served over HTTP on 127.0.0.1 (Material's search runs in a
web worker that fetches its index, which file:// URLs do not allow). Every test also checks
that the page logged no console error and asked nothing of any host but 127.0.0.1: the
site works offline (`mkdocs.yml`: `theme.font: false`, nothing fetched from elsewhere).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest.importorskip("mkdocs")  # a dev dependency (`make setup`)
playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect
expect.set_options(timeout=15_000)  # generous for a loaded CI machine; passing waits are short

ROOT = Path(__file__).resolve().parents[1]
LOCAL_HOST = "127.0.0.1"


# -- the site, built and served once ---------------------------------------------------------


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory, browser) -> Path:
    """The site as `make docs` builds it (strict: any warning fails), in a temporary
    directory. It asks for `browser` so that nothing is built when the browser tests skip."""
    site = tmp_path_factory.mktemp("docs") / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed:\n{result.stdout}{result.stderr}")
    return site


class _QuietHandler(SimpleHTTPRequestHandler):
    """Serves files without printing a line per request."""

    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="session")
def site_url(built_site: Path) -> Iterator[str]:
    """The built site served by a static HTTP server on 127.0.0.1 (an ephemeral port)."""
    server = ThreadingHTTPServer((LOCAL_HOST, 0), partial(_QuietHandler, directory=built_site))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="docs-site", daemon=True)
    thread.start()
    try:
        yield f"http://{LOCAL_HOST}:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _is_local(url: str) -> bool:
    """Whether a request stays on this machine (inline data and blobs count as local)."""
    parts = urlsplit(url)
    return parts.scheme in ("data", "blob") or parts.hostname == LOCAL_HOST


@pytest.fixture
def docs(page, site_url: str):
    """The test's page, on which every request to another host is recorded in
    `page.foreign` and refused (so the site must work without them)."""
    foreign: list[str] = []

    def only_local(route, request):
        if _is_local(request.url):
            route.continue_()
        else:
            foreign.append(request.url)
            route.abort()

    page.context.route("**/*", only_local)
    page.foreign = foreign
    return page


def assert_clean(page) -> None:
    """The page asked nothing of another host, and nothing went wrong in it."""
    assert page.foreign == [], "the site must work offline"
    assert page.problems == []


def heading(page):
    """The page's H1, in the article (Material's header repeats the title elsewhere)."""
    return page.locator("article h1")


# -- pages -----------------------------------------------------------------------------------


def test_the_home_page_shows_the_quickstart_and_the_nav(docs, site_url: str) -> None:
    """The home page renders with its title, the quickstart heading and code, and the
    navigation: its sections, and links to pages of each (found by address, as titles in
    the nav may be reworded)."""
    docs.goto(site_url)
    expect(docs).to_have_title("vitals-engine")
    expect(docs.get_by_role("heading", name="Quickstart", level=2)).to_be_visible()
    expect(docs.locator("article pre code").first).to_contain_text("import vitals_engine as ve")
    nav = docs.locator("nav.md-nav--primary")
    expect(nav).to_contain_text("User guide")
    expect(nav).to_contain_text("API reference")
    for address in ("installing/", "guide/logs/", "guide/command-line/", "reference/"):
        expect(nav.locator(f"a[href^='{address}']").first).to_be_attached()
    assert_clean(docs)


def test_a_guide_page_renders(docs, site_url: str) -> None:
    """A guide page (Logs) opens at its own address with its H1, its title and code."""
    docs.goto(site_url + "guide/logs/")
    expect(heading(docs)).to_have_text(re.compile(r"^Logs"))
    expect(docs).to_have_title("Logs - vitals-engine")
    expect(docs.locator("article pre code").first).to_be_visible()
    assert_clean(docs)


def test_a_link_of_the_homes_tour_opens_its_guide(docs, site_url: str) -> None:
    """Clicking "Logs" in the home page's tour goes to the Logs guide: the address and the
    H1 change."""
    docs.goto(site_url)
    expect(heading(docs)).to_have_text(re.compile(r"^vitals-engine"))
    docs.locator("article").get_by_role("link", name="Logs", exact=True).click()
    expect(docs).to_have_url(site_url + "guide/logs/")
    expect(heading(docs)).to_have_text(re.compile(r"^Logs"))
    assert_clean(docs)


def test_search_finds_the_page_that_explains_a_word(docs, site_url: str) -> None:
    """Typing "rescore" in Material's search box lists the Grading guide (its re-scoring
    section) among the results, and the result opens that page."""
    docs.goto(site_url)
    box = docs.get_by_role("textbox", name="Search")
    box.click()
    box.press_sequentially("rescore")
    result = docs.locator(".md-search-result__list a[href*='guide/grading/']").first
    expect(result).to_be_visible()
    result.click()
    expect(docs).to_have_url(re.compile(re.escape(site_url + "guide/grading/")))
    expect(heading(docs)).to_have_text(re.compile(r"^Grading"))
    assert_clean(docs)

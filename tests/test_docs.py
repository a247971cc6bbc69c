"""Every Python block of README.md and of the documentation (docs/**/*.md) runs as
written, offline, and prints what it says.

pytest-examples finds the blocks and runs each one alone, as a reader pasting it
into a fresh file would (no block relies on another). A `print(...)` followed by
`#> ...` lines must print exactly that: the block fails otherwise. A block's test
id is its page and first line, e.g. `docs/guide/logs.md:144`. To refresh those
lines after a deliberate change (in whichever page holds them):

    pytest tests/test_docs.py --update-examples

Blocks that need a real provider (they say so in a comment) run against the
local mock server: the test sets OPENAI_BASE_URL, which `chat_openai()` reads as
the OpenAI SDK does, dummy API keys, and for Vertex AI a service-account file whose
token endpoint is the mock's and GOOGLE_VERTEX_BASE_URL, so the code is exactly what
a user would paste. Their replies would differ from a real model's, so such a block
opts out of the print check with ```` ```python {test="run"} ````; it must still
run to the end.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("pytest_examples")  # a dev dependency (`make setup`)

import pytest_examples.run_code
from pytest_examples import CodeExample, EvalExample, find_examples

ROOT = Path(__file__).resolve().parents[1]
#: The pages whose blocks run: the README (the front page) and every page of the site.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
EXAMPLES = list(find_examples(*PAGES))

#: What changes from one run to the next, and what the pages show in its place.
_VARYING = [
    # the run's time in a summary's first line
    (re.compile(r"(\d+ samples?, \d+ failed), [^\n]*"), r"\1, 0.01s"),
    # a log's timestamp and id in its name
    (
        re.compile(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d[+-]\d\d-\d\d_(.+?)_[A-Za-z0-9]{22}\."),
        r"2026-11-24T10-00-00+00-00_\1_F5RctJMgWWWhp1K8Heuzok.",
    ),
]


def _steady(text: str) -> str:
    """`text` with what changes from run to run written as the pages show it."""
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    return text


def _where(example: CodeExample) -> str:
    """The block's page (relative to the repository) and first line: its test id."""
    return f"{Path(example.path).resolve().relative_to(ROOT).as_posix()}:{example.start_line}"


@pytest.fixture(autouse=True)
def _python_tracebacks_before_312(monkeypatch):
    """A failing block's traceback as Python made it (in the block's temporary copy).

    pytest-examples 0.0.18 rewrites tracebacks to point into the page, but on Python
    3.11 it builds their code objects with the old line table (`co_lnotab`), and
    pytest's report then dies with an INTERNALERROR instead of showing the failure.
    """
    if sys.version_info < (3, 12):
        monkeypatch.setattr(
            pytest_examples.run_code, "create_example_traceback", lambda *args: None
        )


def test_the_pages_have_python_blocks():
    """The blocks are found, in the README and across the site (a change of fence style,
    or of where the pages live, would otherwise test nothing)."""
    where = [_where(example).split(":")[0] for example in EXAMPLES]
    assert "README.md" in where, "the README's quickstart block is not found"
    assert sum(page.startswith("docs/guide/") for page in where) >= 30, where
    assert len(EXAMPLES) >= 35, where


@pytest.fixture(scope="module")
def google_key() -> str:
    """A throwaway RSA key (PEM) for the Vertex blocks' service account."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return pem.decode()


def _google_credentials(monkeypatch, server, key: str, where: Path) -> None:
    """Vertex blocks: a service-account file whose token_uri is the mock's token endpoint,
    the mock as Vertex's host, and a project, as a user's shell would set them."""
    import json

    account = {
        "type": "service_account",
        "project_id": "my-project",
        "private_key_id": "docs",
        "private_key": key,
        "client_email": "evals@my-project.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": f"{server.base_url('vertex')}/google/token",
    }
    path = where / "service-account.json"
    path.write_text(json.dumps(account))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", server.base_url("vertex"))
    monkeypatch.delenv("GOOGLE_CLOUD_LOCATION", raising=False)


@pytest.mark.parametrize("example", EXAMPLES, ids=_where)
def test_block_runs(
    example: CodeExample,
    eval_example: EvalExample,
    server,
    tmp_path,
    tmp_path_factory,
    monkeypatch,
    google_key,
):
    """The block runs alone in an empty directory, offline, and prints what its `#>`
    lines say (unless it is marked `{test="run"}`)."""
    _google_credentials(monkeypatch, server, google_key, tmp_path_factory.mktemp("google"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VITALS_LOG_DIR", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
    # Bedrock's blocks: the mock's endpoint and test keys, as the AWS SDKs read them
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.base_url("bedrock"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDVITALSMOCK0000001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "vitalsMockSecretKey/0000000000000000000000")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    # pytest-examples runs a block as __main__; put the real one back afterwards
    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])
    eval_example.set_config(line_length=100)  # as ruff's, for the `#>` lines
    eval_example.print_callback = _steady
    if example.prefix_settings().get("test") == "run":
        eval_example.run(example)
    elif eval_example.update_examples:
        eval_example.run_print_update(example)
    else:
        eval_example.run_print_check(example)


def test_the_readme_is_a_front_page_that_links_every_guide():
    """The README stays short, and its tour links every page of the user guide (a new
    guide page shows up on the front page too)."""
    readme = (ROOT / "README.md").read_text()
    assert readme.count("\n") < 250
    guides = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "guide").glob("*.md"))
    linked = set(re.findall(r"\]\((docs/guide/[\w-]+\.md)\)", readme))
    assert [g for g in guides if g not in linked] == []

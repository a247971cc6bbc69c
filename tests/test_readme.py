"""Every Python block of README.md runs as written, offline, and prints what it says.

pytest-examples finds the blocks and runs each one alone, as a reader pasting it
into a fresh file would (no block relies on another). A `print(...)` followed by
`#> ...` lines must print exactly that: the block fails otherwise. To refresh
those lines after a deliberate change:

    pytest tests/test_readme.py --update-examples

Blocks that need a real provider (they say so in a comment) run against the
local mock server: the test sets OPENAI_BASE_URL, which `chat_openai()` reads as
the OpenAI SDK does, and dummy API keys, so the code is exactly what a user
would paste. Their replies would differ from a real model's, so such a block
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

README = Path(__file__).parent.parent / "README.md"
EXAMPLES = list(find_examples(README))

#: What changes from one run to the next, and what the README shows in its place.
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
    """`text` with what changes from run to run written as the README shows it."""
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    return text


@pytest.fixture(autouse=True)
def _python_tracebacks_before_312(monkeypatch):
    """A failing block's traceback as Python made it (in the block's temporary copy).

    pytest-examples 0.0.18 rewrites tracebacks to point into README.md, but on Python
    3.11 it builds their code objects with the old line table (`co_lnotab`), and
    pytest's report then dies with an INTERNALERROR instead of showing the failure.
    """
    if sys.version_info < (3, 12):
        monkeypatch.setattr(
            pytest_examples.run_code, "create_example_traceback", lambda *args: None
        )


def test_the_readme_has_python_blocks():
    """The blocks are found (a change of fence style would otherwise test nothing)."""
    assert len(EXAMPLES) >= 15


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: f"README.md:{e.start_line}")
def test_readme_block_runs(
    example: CodeExample, eval_example: EvalExample, server, tmp_path, monkeypatch
):
    """The block runs alone in an empty directory, offline, and prints what its `#>`
    lines say (unless it is marked `{test="run"}`)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VITALS_LOG_DIR", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
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

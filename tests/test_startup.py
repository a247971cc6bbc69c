"""Start-up: `import vitals_engine` and `vitals --help` leave the heavy dependencies unloaded.

polars, the aiohttp and httpx adapters, structlog, jsonschema and the CLI's
command modules are imported by the paths that need them. Each check runs in a fresh
interpreter, since this test process has long imported everything. How fast
start-up is lives in `bench/startup.py`; these tests only check what is loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Modules that `import vitals_engine` must not load.
HEAVY = [
    "polars",
    "aiohttp",
    "httpx",
    "structlog",
    "jsonschema",
    "rich",
    "vitals_engine.transport.aiohttp_client",
    "vitals_engine.transport.httpx_client",
    "vitals_engine.viewer.server",
    "vitals_engine.viewer.catalog",
    "vitals_engine.cli.eval",
    "vitals_engine.cli.ls",
    "vitals_engine.cli.view",
    "vitals_engine.cli.bundle",
    "vitals_engine.task.task",
    "vitals_engine.analysis",
    "vitals_engine.chats.chat",
]


def _run(code: str, tmp_path: Path) -> dict[str, object]:
    """Run `code` in a fresh interpreter on this tree; it prints one JSON object."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VITALS_LOG_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _loaded(names: list[str]) -> str:
    return f"[m for m in {names!r} if m in sys.modules]"


def test_import_leaves_the_heavy_modules_unloaded(tmp_path):
    """`import vitals_engine` loads none of polars, aiohttp, httpx, structlog, jsonschema or the
    commands."""
    out = _run(
        "import json, sys\nimport vitals_engine\n"
        f"print(json.dumps({{'loaded': {_loaded(HEAVY)}}}))",
        tmp_path,
    )
    assert out["loaded"] == []


def test_every_public_name_imports(tmp_path):
    """`from vitals_engine import X` works for every name of `__all__` in a fresh process."""
    out = _run(
        "import json, vitals_engine\n"
        "missing = []\n"
        "for name in vitals_engine.__all__:\n"
        "    try:\n"
        "        exec(f'from vitals_engine import {name}')\n"
        "    except ImportError:\n"
        "        missing.append(name)\n"
        "print(json.dumps({'missing': missing}))",
        tmp_path,
    )
    assert out["missing"] == []


def test_help_loads_no_command(tmp_path):
    """`vitals --help` builds the parser without importing any command's module or polars."""
    out = _run(
        "import contextlib, io, json, sys\n"
        "from vitals_engine.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['--help'])\n"
        f"print(json.dumps({{'code': code, 'loaded': {_loaded(HEAVY)}}}))",
        tmp_path,
    )
    assert out == {"code": 0, "loaded": []}


def test_a_mock_eval_imports_polars_when_it_needs_it(tmp_path):
    """An eval on chat_mock runs, and `get_samples()` is still a polars DataFrame."""
    out = _run(
        "import json, sys\n"
        "import vitals_engine as ve\n"
        "task = ve.Task(\n"
        "    dataset=[{'input': \"What's 2+2?\", 'target': '4'}],\n"
        "    solver=ve.generate(ve.chat_mock()),\n"
        "    scorer=ve.detect_includes(),\n"
        ")\n"
        "before = 'polars' in sys.modules\n"
        "metrics = task.eval().metrics\n"
        "samples = task.get_samples()\n"
        "kind = type(samples).__module__.split('.')[0] + '.' + type(samples).__name__\n"
        "print(json.dumps({'before': before, 'metrics': metrics, 'kind': kind,\n"
        "                  'rows': samples.height, 'score': samples['score'][0]}))",
        tmp_path,
    )
    assert out == {
        "before": False,
        "metrics": {"accuracy": 1.0},
        "kind": "polars.DataFrame",
        "rows": 1,
        "score": "C",
    }


def test_jsonschema_waits_for_the_first_schema_dict(tmp_path):
    """Structured output of a msgspec Struct never imports jsonschema; the first JSON-schema
    dict given does (it checks that schema)."""
    out = _run(
        "import json, sys\n"
        "import msgspec\n"
        "import vitals_engine as ve\n"
        "class Answer(msgspec.Struct):\n"
        "    n: int\n"
        "value = ve.chat_mock().extract_data('6*7?', type=Answer)\n"
        "before = 'jsonschema' in sys.modules\n"
        "ve.generate_structured(ve.chat_mock(), type={'type': 'integer'})\n"
        "print(json.dumps({'n': value.n, 'before': before, 'after': 'jsonschema' in sys.modules}))",
        tmp_path,
    )
    assert out == {"n": 1, "before": False, "after": True}


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="not running in a virtual environment")
def test_the_console_script_is_installed(tmp_path):
    """`make demo` / `make test` install the `vitals` command into the venv, and it runs."""
    script = Path(sys.executable).with_name("vitals.exe" if os.name == "nt" else "vitals")
    assert script.exists(), f"{script} is missing: `uv sync` installs it"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [str(script), "--help"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "usage: vitals" in done.stdout

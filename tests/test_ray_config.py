"""`ve.Ray(...)` is checked like `ve.RateLimits(...)`, and without Ray installed a Ray backend is a
ConfigError saying how to install it (these need no Ray)."""

import sys

import pytest

import vitals_engine as ve


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"workers": 0}, "workers"),
        ({"workers": 2.5}, "workers"),
        ({"workers": True}, "workers"),
        ({"max_concurrency": -1}, "max_concurrency"),
        ({"address": ""}, "address"),
        ({"address": 5}, "address"),
        ({"keep_alive": -1}, "keep_alive"),
        ({"keep_alive": "5m"}, "keep_alive"),
        ({"keep_alive": float("nan")}, "keep_alive"),
    ],
)
def test_ray_options_are_checked(kwargs, field):
    with pytest.raises(ve.ConfigError, match=rf"Ray\({field}="):
        ve.Ray(**kwargs)


def test_backend_must_be_a_ray():
    task = ve.Task([{"input": "a", "target": "a"}], solver=ve.generate(ve.chat_mock()))
    with pytest.raises(ve.ConfigError, match="`backend` must be None"):
        task.eval(backend="ray")


def test_without_ray_a_ray_backend_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    task = ve.Task(
        [{"input": "a", "target": "a"}],
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    with pytest.raises(ve.ConfigError, match=r"pip install 'vitals-engine\[ray\]'"):
        task.eval(backend=ve.Ray())
    assert not list(tmp_path.rglob("*.json"))


def test_workers_without_ray_is_a_usage_error(tmp_path, capsys):
    """`--workers` counts Ray workers: without `--ray` the command says so (exit 2)."""
    from pathlib import Path

    from vitals_engine.cli import main

    example = Path(__file__).resolve().parents[1] / "examples" / "cli_task.py"
    assert main(["eval", str(example), "--log-dir", str(tmp_path), "--workers", "2"]) == 2
    assert "give --ray with it" in capsys.readouterr().err

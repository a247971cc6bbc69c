"""Errors that say what to do (#14): keys checked when used, refused connections, unknown
keywords, factories passed uncalled, and what a solver may return."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import vitals_engine as ve
from tests.addresses import refusing_port
from tests.netservers import OPENAI_COMPLETION, answer_each, raw_server, response

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.anyio

SUMS = [{"input": "What's 1+1?", "target": "2"}, {"input": "What's 2+2?", "target": "4"}]


# -- API keys: checked at the first request and before a run, not when a chat is built ----------


async def test_a_run_without_the_judges_key_stops_before_any_sample(monkeypatch, tmp_path):
    """A judge on chat_openai() without OPENAI_API_KEY: eval() raises AuthenticationError
    naming the variable before the solver sees a single sample; swapping the judge runs."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    seen = []

    def solver(input):
        seen.append(input)
        return input

    judge = ve.model_graded_qa(scorer_chat=ve.chat_openai())
    task = ve.Task(SUMS, solver=solver, scorer=judge, dir=tmp_path)
    with pytest.raises(ve.AuthenticationError, match="OPENAI_API_KEY"):
        await task.eval_async()
    assert seen == []
    assert task.log_path is None

    await task.eval_async(scorer_chat=ve.chat_mock())
    assert len(seen) == 2


# -- a refused connection ------------------------------------------------------------------------


async def test_a_refused_first_connection_fails_at_once_saying_nothing_listens(tmp_path):
    """Nothing ever answered at base_url: the refusal is not retried (the sample records no
    retry) and the error says nothing listens there and what to check."""
    with refusing_port() as port:
        base_url = f"http://127.0.0.1:{port}/v1"
        chat = ve.chat_openai("gpt-test", base_url=base_url, api_key="sk-test")
        task = ve.Task(
            SUMS[:1], solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path
        )
        await task.eval_async(retry=ve.Retry(max_attempts=4, backoff=0), fail_on_error=False)
        samples = task.get_samples()
        assert "retries" not in samples.columns  # the column appears once any sample retried
        (error,) = samples["error"].to_list()
        assert error.startswith("ProviderUnavailable")
        assert f"nothing is listening at {base_url}" in error
        assert "typo in the host or port" in error

        with pytest.raises(ve.ProviderUnavailable) as info:
            await chat.chat_async("hi")
    assert info.value.refused
    assert not info.value.retryable


async def test_ollama_not_running_says_to_start_it():
    """chat_ollama() at a port where nothing runs says to start Ollama."""
    with refusing_port() as port:
        chat = ve.chat_ollama("llama3.2", base_url=f"http://localhost:{port}/v1")
        with pytest.raises(ve.ProviderUnavailable, match=r"nothing is listening.*ollama serve"):
            await chat.chat_async("hi")


async def test_a_refusal_where_the_server_answered_before_is_retried_and_said_once(caplog):
    """Once the address answered, a refusal is transient (a restart): it is retried, and the
    retries are announced by one warning for the endpoint, not one per call."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    model = f"gpt-answered-{uuid.uuid4().hex[:8]}"  # announcements outside a run are per process
    async with raw_server(answer_each(response(json.dumps(OPENAI_COMPLETION).encode()))) as raw:
        base_url = f"http://127.0.0.1:{raw.port}/v1"
        chat = ve.chat_openai(
            model,
            base_url=base_url,
            api_key="sk-test",
            retry=ve.Retry(max_attempts=2, backoff=0),
        )
        assert await chat.chat_async("What's 2+2?") == "4"
    for _ in range(2):
        with pytest.raises(ve.ProviderUnavailable, match="cannot connect") as info:
            await chat.chat_async("What's 2+2?")
        assert info.value.refused
        assert info.value.retryable
    said = [r for r in caplog.records if "are being retried" in r.getMessage()]
    assert len(said) == 1
    assert said[0].levelno == logging.WARNING
    assert f"openai/{model}" in said[0].getMessage()


async def test_a_refusal_at_a_port_where_an_earlier_server_answered_is_retried():
    """Ports are handed out again: where a server answered earlier in the process (and has
    stopped), a refusal is a restart to wait for, for any chat and any path at that host and
    port, not "nothing is listening"."""
    async with raw_server(answer_each(response(json.dumps(OPENAI_COMPLETION).encode()))) as raw:
        first = ve.chat_openai("gpt-first", base_url=f"http://127.0.0.1:{raw.port}/v1", api_key="k")
        assert await first.chat_async("What's 2+2?") == "4"
    later = ve.chat_openai(
        "gpt-later",
        base_url=f"http://127.0.0.1:{raw.port}/api/v1",
        api_key="k",
        retry=ve.Retry(max_attempts=2, backoff=0),
    )
    with pytest.raises(ve.ProviderUnavailable, match="cannot connect") as info:
        await later.chat_async("What's 2+2?")
    assert info.value.refused
    assert info.value.retryable
    assert "nothing is listening" not in str(info.value)


async def test_retries_are_announced_once_per_endpoint_per_run(server, tmp_path, caplog):
    """Three samples each retried after a 503: one warning for the run's endpoint."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    server.fail("503", times=3)
    chat = ve.chat_openai("gpt-flaky", base_url=server.base_url(), api_key="sk-test")
    sums = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(3)]
    task = ve.Task(sums, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async(retry=ve.Retry(backoff=0), max_concurrency=1)
    assert sum(task.get_samples()["retries"].to_list()) == 3
    said = [r.getMessage() for r in caplog.records if "are being retried" in r.getMessage()]
    assert len(said) == 1
    assert "HTTP 503" in said[0]


RETRIED_WITHOUT_LOGGING = """
import vitals_engine as ve
from vitals_engine.testing import MockServer

with MockServer() as server:
    server.fail("503", times=2)
    chat = ve.chat_openai(
        "gpt-flaky", base_url=server.base_url(), api_key="k", retry=ve.Retry(backoff=0)
    )
    print(chat.chat("What's 2+2?"))
    print(chat.chat("What's 3+3?"))
"""


def test_retries_show_on_stderr_when_the_application_set_up_no_logging():
    """A script that never configures logging sees the retry warning on stderr, once."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", RETRIED_WITHOUT_LOGGING],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    assert done.stdout.splitlines() == ["2 + 2 = 4", "3 + 3 = 6"]
    assert done.stderr.count("are being retried") == 1
    assert "openai/gpt-flaky" in done.stderr
    assert "HTTP 503" in done.stderr


# -- unknown keywords: "did you mean", and params= for request parameters -------------------------


def test_a_misspelt_eval_option_gets_a_did_you_mean(tmp_path):
    """eval(max_concurency=5) names the option meant; a misspelt solver parameter too."""
    task = ve.Task(SUMS, solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes())
    with pytest.raises(ve.ConfigError, match="Did you mean `max_concurrency`"):
        task.eval(max_concurency=5)
    with pytest.raises(ve.ConfigError, match="Did you mean `solver_chat`"):
        task.eval(solver_chta=ve.chat_mock())
    with pytest.raises(ve.ConfigError, match="Did you mean `epochs`"):
        task.solve(epoch=2)
    assert task.log_path is None


def test_a_request_parameter_is_sent_to_params_on_the_chat():
    """temperature= on a chat constructor, or on eval(), says to use params= on the chat."""
    with pytest.raises(ve.ConfigError, match=r'params=\{"temperature": \.\.\.\}'):
        ve.chat_openai(temperature=0.2, api_key="k")  # type: ignore[call-arg]
    task = ve.Task(SUMS, solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes())
    with pytest.raises(ve.ConfigError, match=r"`temperature` is a request parameter.*params="):
        task.eval(temperature=0)


# -- factories and chats where a solver or scorer goes -------------------------------------------


def test_an_uncalled_solver_factory_says_what_to_write():
    with pytest.raises(ve.ConfigError, match=r"solver=ve\.generate\(ve\.chat_mock\(\)\)"):
        ve.Task(SUMS, solver=ve.generate, scorer=ve.detect_includes())


def test_a_chat_as_the_solver_says_to_wrap_it_in_generate():
    with pytest.raises(ve.ConfigError, match=r"solver=ve\.generate\(chat\)"):
        ve.Task(SUMS, solver=ve.chat_mock(), scorer=ve.detect_includes())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("scorer", "fix"),
    [
        (ve.model_graded_qa, r"scorer=ve\.model_graded_qa\(\)"),
        (ve.detect_includes, r"scorer=ve\.detect_includes\(\)"),
    ],
)
def test_an_uncalled_scorer_factory_says_what_to_write(scorer, fix):
    task = ve.Task(SUMS, solver=ve.generate(ve.chat_mock()))
    with pytest.raises(ve.ConfigError, match=fix):
        ve.Task(SUMS, solver=ve.generate(ve.chat_mock()), scorer=scorer)
    with pytest.raises(ve.ConfigError, match=fix):
        task.set_scorer(scorer)


def test_a_chat_as_the_scorer_says_to_make_it_a_judge():
    with pytest.raises(ve.ConfigError, match=r"scorer=ve\.model_graded_qa\(scorer_chat=chat\)"):
        ve.Task(SUMS, solver=ve.generate(ve.chat_mock()), scorer=ve.chat_mock())  # type: ignore[arg-type]


# -- what a solver returns: a number is taken as its text, and the message says so ---------------


async def test_the_solver_error_says_a_number_is_taken_as_text(tmp_path):
    """A number is kept as its text; a wrong shape's SolverError lists numbers as allowed."""
    task = ve.Task(SUMS, solver=lambda input: 2, scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async(fail_on_error=False)
    assert task.get_samples()["result"].to_list() == ["2", "2"]

    wrong = ve.Task(SUMS, solver=lambda input: [2], scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.SolverError, match=r"a number is taken as its text, str\(value\)"):
        await wrong.eval_async()

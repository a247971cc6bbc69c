"""The mock server's batch APIs (OpenAI, Anthropic, Gemini) over real HTTP: submit, poll,
results that parse like live replies, failures inside a batch, expiry, cancelling, counters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import httpx
import msgspec
import pytest

from vitals_engine.testing import MockServer

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client():
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


async def poll(client: httpx.AsyncClient, url: str, ended: Callable[[dict], bool]) -> dict:
    """GET `url` until `ended(body)`, failing the test if it takes more than 5 s."""
    with anyio.fail_after(5):
        while True:
            response = await client.get(url)
            assert response.status_code == 200, response.text
            body = response.json()
            if ended(body):
                return body
            await anyio.sleep(0.005)


def jsonl(data: bytes) -> list[dict[str, Any]]:
    return [msgspec.json.decode(line) for line in data.splitlines() if line.strip()]


# -- OpenAI ---------------------------------------------------------------------------------------


def chat(prompt: str, model: str = "gpt-x") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": prompt}]}


def openai_line(custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


async def openai_submit(
    client: httpx.AsyncClient, server: MockServer, lines: list[dict[str, Any]]
) -> httpx.Response:
    """Upload `lines` as a batch input file and create a batch of it."""
    base = server.base_url("openai")
    content = b"".join(msgspec.json.encode(line) + b"\n" for line in lines)
    upload = await client.post(
        base + "/files",
        data={"purpose": "batch"},
        files={"file": ("requests.jsonl", content, "application/jsonl")},
    )
    assert upload.status_code == 200, upload.text
    described = upload.json()
    assert described["object"] == "file"
    assert described["purpose"] == "batch"
    assert described["bytes"] == len(content)
    assert described["id"].startswith("file-")
    return await client.post(
        base + "/batches",
        json={
            "input_file_id": described["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "metadata": {"run": "r1"},
        },
    )


async def openai_run(
    client: httpx.AsyncClient, server: MockServer, lines: list[dict[str, Any]]
) -> tuple[dict, dict[str, dict], dict[str, dict]]:
    """Submit `lines`, poll until the batch ends: (batch, output lines, error lines) by id."""
    created = await openai_submit(client, server, lines)
    assert created.status_code == 200, created.text
    url = f"{server.base_url('openai')}/batches/{created.json()['id']}"
    terminal = {"completed", "failed", "expired", "cancelled"}
    batch = await poll(client, url, lambda b: b["status"] in terminal)
    return batch, *[
        await openai_file(client, server, batch[key]) for key in ("output_file_id", "error_file_id")
    ]


async def openai_file(client: httpx.AsyncClient, server: MockServer, file_id: str | None) -> dict:
    if file_id is None:
        return {}
    response = await client.get(f"{server.base_url('openai')}/files/{file_id}/content")
    assert response.status_code == 200
    return {line["custom_id"]: line for line in jsonl(response.content)}


async def test_openai_batch_answers_like_live_requests(client, server):
    """A batch is validating when created, completed after polling, and each output line
    carries the very chat.completion a live request gets, usage included."""
    server.batch_delay = 0.05
    created = await openai_submit(
        client,
        server,
        [openai_line("a", chat("What's 2+2?")), openai_line("b", chat("What's 3+4?"))],
    )
    assert created.status_code == 200
    fresh = created.json()
    assert fresh["id"].startswith("batch_")
    assert fresh["object"] == "batch"
    assert fresh["status"] == "validating"
    assert fresh["endpoint"] == "/v1/chat/completions"
    assert fresh["completion_window"] == "24h"
    assert fresh["metadata"] == {"run": "r1"}
    assert fresh["output_file_id"] is None
    assert fresh["request_counts"] == {"total": 2, "completed": 0, "failed": 0}
    assert fresh["expires_at"] == fresh["created_at"] + 24 * 3600

    url = f"{server.base_url('openai')}/batches/{fresh['id']}"
    batch = await poll(client, url, lambda b: b["status"] == "completed")
    assert batch["request_counts"] == {"total": 2, "completed": 2, "failed": 0}
    assert batch["error_file_id"] is None
    assert batch["completed_at"] is not None
    assert batch["in_progress_at"] is not None
    output = await openai_file(client, server, batch["output_file_id"])
    assert set(output) == {"a", "b"}
    line = output["a"]
    assert line["id"].startswith("batch_req_")
    assert line["error"] is None
    assert line["response"]["status_code"] == 200
    assert line["response"]["request_id"].startswith("req_")
    batched = line["response"]["body"]

    live = (
        await client.post(server.base_url() + "/chat/completions", json=chat("What's 2+2?"))
    ).json()
    assert batched["object"] == live["object"] == "chat.completion"
    assert batched["choices"] == live["choices"]
    assert batched["usage"] == live["usage"]
    assert batched["choices"][0]["message"]["content"] == "2 + 2 = 4"
    assert output["b"]["response"]["body"]["choices"][0]["message"]["content"] == "3 + 4 = 7"

    described = await client.get(f"{server.base_url('openai')}/files/{batch['output_file_id']}")
    assert described.json()["purpose"] == "batch_output"


async def test_openai_requests_are_logged_and_counted(client, server):
    """Each batched request is in the log (with its batch and custom id) and in the counters."""
    server.batch_delay = 0
    batch, _, _ = await openai_run(
        client, server, [openai_line("a", chat("hi", "m1")), openai_line("b", chat("yo", "m1"))]
    )
    assert server.requests == 2
    assert server.requests_by_model == {"m1": 2}
    assert [(r.batch, r.custom_id, r.outcome, r.format) for r in server.log] == [
        (batch["id"], "a", "ok", "openai"),
        (batch["id"], "b", "ok", "openai"),
    ]
    assert server.batch_submissions == {"a": 1, "b": 1}
    assert server.batch_polls[batch["id"]] >= 1
    mock = server.batches[batch["id"]]
    assert (mock.state, mock.outcome, mock.custom_ids) == ("ended", "completed", ["a", "b"])
    assert mock.counts.succeeded == 2


async def test_openai_failures_inside_a_batch_go_to_the_error_file(client, server):
    """400, 429 and 500 come back as non-200 responses with OpenAI's error body; an expired
    request as `response: null` and `error.code` batch_expired. The batch still completes."""
    server.batch_delay = 0
    for kind in ("400", "429", "500", "expired"):
        server.fail_in_batch(kind)
    lines = [openai_line(f"r{i}", chat(f"prompt {i}")) for i in range(5)]
    batch, output, errors = await openai_run(client, server, lines)
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 5, "completed": 1, "failed": 4}
    assert set(output) == {"r4"}
    assert [errors[f"r{i}"]["response"]["status_code"] for i in range(3)] == [400, 429, 500]
    assert errors["r1"]["response"]["body"]["error"]["code"] == "rate_limit_exceeded"
    assert all(errors[f"r{i}"]["error"] is None for i in range(3))
    assert errors["r3"]["response"] is None
    assert errors["r3"]["error"]["code"] == "batch_expired"
    assert [r.outcome for r in server.log] == ["400", "429", "500", "expired", "ok"]


async def test_openai_a_request_the_api_refuses_is_a_400_line(client, server):
    """A line whose body the chat endpoint would refuse fails alone, with a 400."""
    server.batch_delay = 0
    bad = {"model": "gpt-x"}  # no messages
    batch, output, errors = await openai_run(
        client, server, [openai_line("ok", chat("hi")), openai_line("bad", bad)]
    )
    assert batch["status"] == "completed"
    assert set(output) == {"ok"}
    assert errors["bad"]["response"]["status_code"] == 400
    assert "messages" in errors["bad"]["response"]["body"]["error"]["message"]


async def test_openai_a_file_the_api_refuses_fails_the_batch(client, server):
    """A duplicate custom_id fails validation: status failed, errors by line, nothing run."""
    server.batch_delay = 0
    created = await openai_submit(
        client, server, [openai_line("a", chat("x")), openai_line("a", chat("y"))]
    )
    assert created.json()["status"] == "validating"
    url = f"{server.base_url('openai')}/batches/{created.json()['id']}"
    batch = await poll(client, url, lambda b: b["status"] == "failed")
    assert batch["errors"]["object"] == "list"
    assert [(e["code"], e["line"]) for e in batch["errors"]["data"]] == [("duplicate_custom_id", 2)]
    assert batch["failed_at"] is not None
    assert batch["output_file_id"] is None
    assert server.requests == 0
    assert not server.batch_submissions


async def test_openai_batch_expires_with_some_requests_finished(client, server):
    """expire_batches(finished=1): one answer in the output file, the rest batch_expired."""
    server.batch_delay = 0
    server.expire_batches(finished=1)
    batch, output, errors = await openai_run(
        client, server, [openai_line(f"r{i}", chat("hi")) for i in range(3)]
    )
    assert batch["status"] == "expired"
    assert batch["expired_at"] is not None
    assert batch["request_counts"] == {"total": 3, "completed": 1, "failed": 2}
    assert set(output) == {"r0"}
    assert {errors[c]["error"]["code"] for c in ("r1", "r2")} == {"batch_expired"}
    assert server.requests == 1
    # the next batch does not expire
    assert (await openai_run(client, server, [openai_line("z", chat("hi"))]))[0][
        "status"
    ] == "completed"


async def test_openai_cancel(client, server):
    """Cancelling an unfinished batch: cancelling, then cancelled, its requests batch_cancelled."""
    server.batch_delay = 30
    created = (
        await openai_submit(client, server, [openai_line(f"r{i}", chat("hi")) for i in range(2)])
    ).json()
    url = f"{server.base_url('openai')}/batches/{created['id']}"
    assert (await client.get(url)).json()["status"] == "in_progress"
    cancelling = await client.post(url + "/cancel")
    assert cancelling.status_code == 200
    assert cancelling.json()["status"] == "cancelling"
    assert cancelling.json()["cancelling_at"] is not None
    batch = await poll(client, url, lambda b: b["status"] == "cancelled")
    assert batch["cancelled_at"] is not None
    assert batch["request_counts"] == {"total": 2, "completed": 0, "failed": 2}
    assert batch["output_file_id"] is None
    errors = await openai_file(client, server, batch["error_file_id"])
    assert {line["error"]["code"] for line in errors.values()} == {"batch_cancelled"}
    assert server.requests == 0
    again = await client.post(url + "/cancel")
    assert again.json()["status"] == "cancelled"


async def test_openai_without_batches_and_over_the_cap(client, server):
    """batches_enabled=False: the batch and file routes answer 404 (OpenAI's error body),
    live requests still answer; max_batch_requests refuses a bigger batch with 400."""
    base = server.base_url("openai")
    server.batches_enabled = False
    response = await client.post(base + "/batches", json={"input_file_id": "file-x"})
    assert response.status_code == 404
    assert "message" in response.json()["error"]
    upload = await client.post(
        base + "/files", data={"purpose": "batch"}, files={"file": ("a.jsonl", b"{}\n")}
    )
    assert upload.status_code == 404
    assert (await client.post(base + "/chat/completions", json=chat("hi"))).status_code == 200

    server.batches_enabled = True
    server.max_batch_requests = 1
    refused = await openai_submit(
        client, server, [openai_line("a", chat("x")), openai_line("b", chat("y"))]
    )
    assert refused.status_code == 400
    assert "at most 1" in refused.json()["error"]["message"]
    assert not server.batches
    missing = await client.get(base + "/batches/batch_nope")
    assert missing.status_code == 404


# -- Anthropic ------------------------------------------------------------------------------------


def params(prompt: str, model: str = "claude-x", **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": prompt}],
        **extra,
    }


async def anthropic_submit(
    client: httpx.AsyncClient, server: MockServer, requests: list[tuple[str, dict]]
) -> httpx.Response:
    body = {"requests": [{"custom_id": cid, "params": p} for cid, p in requests]}
    return await client.post(server.base_url("anthropic") + "/messages/batches", json=body)


async def anthropic_run(client, server, requests) -> tuple[dict, dict[str, dict]]:
    """Submit, poll until ended, fetch the results: (batch, result by custom id)."""
    created = await anthropic_submit(client, server, requests)
    assert created.status_code == 200, created.text
    url = f"{server.base_url('anthropic')}/messages/batches/{created.json()['id']}"
    batch = await poll(client, url, lambda b: b["processing_status"] == "ended")
    results = await client.get(batch["results_url"])
    assert results.status_code == 200
    return batch, {line["custom_id"]: line["result"] for line in jsonl(results.content)}


async def test_anthropic_batch_answers_like_live_requests(client, server):
    """in_progress when created, ended after polling with a results_url; each succeeded
    result carries the message a live request gets, usage included."""
    server.batch_delay = 0.05
    created = await anthropic_submit(
        client, server, [("a", params("What's 2+2?")), ("b", params("What's 3+4?"))]
    )
    fresh = created.json()
    assert fresh["id"].startswith("msgbatch_")
    assert fresh["type"] == "message_batch"
    assert fresh["processing_status"] == "in_progress"
    assert fresh["request_counts"] == {
        "processing": 2,
        "succeeded": 0,
        "errored": 0,
        "canceled": 0,
        "expired": 0,
    }
    assert fresh["results_url"] is None
    assert fresh["ended_at"] is None
    assert fresh["created_at"].endswith("Z")
    assert fresh["expires_at"] > fresh["created_at"]
    assert fresh["cancel_initiated_at"] is None

    url = f"{server.base_url('anthropic')}/messages/batches/{fresh['id']}"
    batch = await poll(client, url, lambda b: b["processing_status"] == "ended")
    assert batch["request_counts"]["succeeded"] == 2
    assert batch["results_url"] == f"{url}/results"
    assert batch["ended_at"] is not None
    results = {
        line["custom_id"]: line["result"]
        for line in jsonl((await client.get(batch["results_url"])).content)
    }
    assert results["a"]["type"] == "succeeded"
    message = results["a"]["message"]
    live = (
        await client.post(server.base_url("anthropic") + "/messages", json=params("What's 2+2?"))
    ).json()
    assert message["type"] == live["type"] == "message"
    for key in ("role", "model", "content", "stop_reason", "usage"):
        assert message[key] == live[key], key
    assert message["content"] == [{"type": "text", "text": "2 + 2 = 4"}]
    assert results["b"]["message"]["content"][0]["text"] == "3 + 4 = 7"
    assert server.batch_submissions == {"a": 1, "b": 1}
    assert [(r.custom_id, r.batch) for r in server.log[:2]] == [
        ("a", fresh["id"]),
        ("b", fresh["id"]),
    ]


async def test_anthropic_failures_inside_a_batch(client, server):
    """Failed requests are `errored` with Anthropic's error (invalid_request_error,
    rate_limit_error, api_error), an expired one `expired`; invalid params error alone."""
    server.batch_delay = 0
    for kind in ("400", "429", "500", "expired"):
        server.fail_in_batch(kind, model="claude-x")
    requests = [(f"r{i}", params(f"p{i}")) for i in range(4)]
    requests += [
        ("other", params("What's 2+2?", model="claude-y")),
        ("bad", {"model": "claude-y", "messages": []}),
    ]
    batch, results = await anthropic_run(client, server, requests)
    assert batch["request_counts"] == {
        "processing": 0,
        "succeeded": 1,
        "errored": 4,
        "canceled": 0,
        "expired": 1,
    }
    errors = [results[f"r{i}"]["error"] for i in range(3)]
    assert all(e["type"] == "error" for e in errors)
    assert [e["error"]["type"] for e in errors] == [
        "invalid_request_error",
        "rate_limit_error",
        "api_error",
    ]
    assert results["r3"] == {"type": "expired"}
    assert results["other"]["type"] == "succeeded"
    assert results["bad"]["type"] == "errored"
    assert results["bad"]["error"]["error"]["type"] == "invalid_request_error"


async def test_anthropic_batch_expires_with_some_finished(client, server):
    """expire_batches(finished=2): two succeeded, the rest expired, the batch ended."""
    server.batch_delay = 0
    server.expire_batches(finished=2)
    batch, results = await anthropic_run(
        client, server, [(f"r{i}", params("hi")) for i in range(4)]
    )
    assert batch["request_counts"]["succeeded"] == 2
    assert batch["request_counts"]["expired"] == 2
    assert [results[f"r{i}"]["type"] for i in range(4)] == [
        "succeeded",
        "succeeded",
        "expired",
        "expired",
    ]
    assert server.batches[batch["id"]].outcome == "expired"


async def test_anthropic_cancel(client, server):
    """Cancel: canceling (with cancel_initiated_at), then ended, its requests canceled."""
    server.batch_delay = 30
    created = (
        await anthropic_submit(client, server, [("a", params("hi")), ("b", params("yo"))])
    ).json()
    url = f"{server.base_url('anthropic')}/messages/batches/{created['id']}"
    early = await client.get(url + "/results")
    assert early.status_code == 400
    assert early.json()["error"]["type"] == "invalid_request_error"
    canceling = (await client.post(url + "/cancel")).json()
    assert canceling["processing_status"] == "canceling"
    assert canceling["cancel_initiated_at"] is not None
    batch = await poll(client, url, lambda b: b["processing_status"] == "ended")
    assert batch["request_counts"]["canceled"] == 2
    results = jsonl((await client.get(batch["results_url"])).content)
    assert [line["result"] for line in results] == [{"type": "canceled"}] * 2
    assert server.requests == 0


async def test_anthropic_refusals(client, server):
    """Off: 404 in Anthropic's error shape; duplicate custom ids and too many requests: 400;
    an unknown batch: 404. The live /v1/messages route is untouched."""
    base = server.base_url("anthropic")
    server.batches_enabled = False
    off = await anthropic_submit(client, server, [("a", params("hi"))])
    assert off.status_code == 404
    assert off.json()["type"] == "error"
    assert off.json()["error"]["type"] == "not_found_error"
    assert (await client.post(base + "/messages", json=params("hi"))).status_code == 200
    server.batches_enabled = True
    duplicate = await anthropic_submit(client, server, [("a", params("hi")), ("a", params("yo"))])
    assert duplicate.status_code == 400
    assert duplicate.json()["error"]["type"] == "invalid_request_error"
    server.max_batch_requests = 1
    assert (
        await anthropic_submit(client, server, [("a", params("hi")), ("b", params("yo"))])
    ).status_code == 400
    assert (await client.get(base + "/messages/batches/msgbatch_nope")).status_code == 404
    assert not server.batch_submissions


# -- Gemini ---------------------------------------------------------------------------------------


def content(prompt: str) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}


async def gemini_submit(
    client, server, requests: list[tuple[str, dict]], model: str = "gemini-x"
) -> httpx.Response:
    body = {
        "batch": {
            "display_name": "evals",
            "input_config": {
                "requests": {
                    "requests": [{"request": r, "metadata": {"key": key}} for key, r in requests]
                }
            },
        }
    }
    return await client.post(
        f"{server.base_url('google')}/models/{model}:batchGenerateContent", json=body
    )


async def gemini_run(
    client, server, requests, model: str = "gemini-x"
) -> tuple[dict, dict[str, dict]]:
    """Submit, poll until done: (operation, inlined response by metadata key)."""
    created = await gemini_submit(client, server, requests, model)
    assert created.status_code == 200, created.text
    url = f"{server.base_url('google')}/{created.json()['name']}"
    operation = await poll(client, url, lambda op: op.get("done", False))
    inlined = operation["response"]["inlinedResponses"]["inlinedResponses"]
    return operation, {entry["metadata"]["key"]: entry for entry in inlined}


async def test_gemini_batch_answers_like_live_requests(client, server):
    """The operation is PENDING when created, then done and SUCCEEDED with the responses in
    `response` and `metadata.output`, each the very response generateContent gives."""
    server.batch_delay = 0.05
    created = await gemini_submit(
        client, server, [("a", content("What's 2+2?")), ("b", content("What's 3+4?"))]
    )
    fresh = created.json()
    assert fresh["name"].startswith("batches/")
    assert "done" not in fresh
    meta = fresh["metadata"]
    assert meta["@type"].endswith("GenerateContentBatch")
    assert meta["state"] == "BATCH_STATE_PENDING"
    assert meta["model"] == "models/gemini-x"
    assert meta["displayName"] == "evals"
    assert meta["name"] == fresh["name"]
    assert meta["batchStats"] == {"requestCount": "2", "pendingRequestCount": "2"}
    assert meta["createTime"].endswith("Z")

    url = f"{server.base_url('google')}/{fresh['name']}"
    operation = await poll(client, url, lambda op: op.get("done", False))
    meta = operation["metadata"]
    assert meta["state"] == "BATCH_STATE_SUCCEEDED"
    assert meta["batchStats"] == {"requestCount": "2", "successfulRequestCount": "2"}
    assert "endTime" in meta
    assert operation["response"]["@type"].endswith("GenerateContentBatchOutput")
    inlined = operation["response"]["inlinedResponses"]["inlinedResponses"]
    assert meta["output"] == {"inlinedResponses": {"inlinedResponses": inlined}}
    assert [entry["metadata"] for entry in inlined] == [{"key": "a"}, {"key": "b"}]
    live = await client.post(
        f"{server.base_url('google')}/models/gemini-x:generateContent", json=content("What's 2+2?")
    )
    assert inlined[0]["response"] == live.json()
    assert inlined[0]["response"]["candidates"][0]["content"]["parts"] == [{"text": "2 + 2 = 4"}]
    assert server.batch_submissions == {"a": 1, "b": 1}
    assert server.requests_by_model == {"gemini-x": 3}


async def test_gemini_camel_case_submission(client, server):
    """The batch may be sent in camelCase, as proto JSON allows."""
    server.batch_delay = 0
    body = {
        "batch": {
            "displayName": "camel",
            "inputConfig": {"requests": {"requests": [{"request": content("What's 2+2?")}]}},
        }
    }
    created = await client.post(
        f"{server.base_url('google')}/models/g:batchGenerateContent", json=body
    )
    assert created.status_code == 200, created.text
    operation = await poll(
        client,
        f"{server.base_url('google')}/{created.json()['name']}",
        lambda op: op.get("done", False),
    )
    (entry,) = operation["response"]["inlinedResponses"]["inlinedResponses"]
    assert "metadata" not in entry
    assert entry["response"]["candidates"][0]["content"]["parts"][0]["text"] == "2 + 2 = 4"
    assert list(server.batch_submissions) == [f"{created.json()['name']}#0"]


async def test_gemini_failures_inside_a_batch(client, server):
    """Failed requests are inlined `error`s (google.rpc.Status: gRPC code and message)."""
    server.batch_delay = 0
    for kind in ("400", "429", "500", "expired"):
        server.fail_in_batch(kind)
    requests = [(f"r{i}", content(f"p{i}")) for i in range(5)] + [("bad", {"contents": []})]
    operation, results = await gemini_run(client, server, requests)
    assert operation["metadata"]["state"] == "BATCH_STATE_SUCCEEDED"
    assert operation["metadata"]["batchStats"] == {
        "requestCount": "6",
        "successfulRequestCount": "1",
        "failedRequestCount": "5",
    }
    assert [results[f"r{i}"]["error"]["code"] for i in range(4)] == [3, 8, 13, 4]
    assert all(results[f"r{i}"]["error"]["message"] for i in range(4))
    assert "response" in results["r4"]
    assert results["bad"]["error"]["code"] == 3
    assert "contents" in results["bad"]["error"]["message"]


async def test_gemini_batch_expires_with_some_finished(client, server):
    server.batch_delay = 0
    server.expire_batches(finished=1)
    operation, results = await gemini_run(
        client, server, [("a", content("hi")), ("b", content("yo"))]
    )
    assert operation["metadata"]["state"] == "BATCH_STATE_EXPIRED"
    assert "response" in results["a"]
    assert results["b"]["error"]["code"] == 4


async def test_gemini_cancel(client, server):
    """`:cancel` answers {} and the batch is CANCELLED at once, its requests errored CANCELLED."""
    server.batch_delay = 30
    created = (
        await gemini_submit(client, server, [("a", content("hi")), ("b", content("yo"))])
    ).json()
    url = f"{server.base_url('google')}/{created['name']}"
    running = (await client.get(url)).json()
    assert running["metadata"]["state"] == "BATCH_STATE_RUNNING"
    assert "done" not in running
    cancelled = await client.post(url + ":cancel")
    assert cancelled.status_code == 200
    assert cancelled.json() == {}
    operation = (await client.get(url)).json()
    assert operation["done"] is True
    assert operation["metadata"]["state"] == "BATCH_STATE_CANCELLED"
    inlined = operation["response"]["inlinedResponses"]["inlinedResponses"]
    assert [entry["error"]["code"] for entry in inlined] == [1, 1]
    assert server.requests == 0


async def test_gemini_refusals_and_routes(client, server):
    """Off: 404 in Gemini's error shape, generateContent still served; a batch without a
    display name or requests, or over the cap: 400; an unknown batch: 404."""
    base = server.base_url("google")
    server.batches_enabled = False
    off = await gemini_submit(client, server, [("a", content("hi"))])
    assert off.status_code == 404
    assert off.json()["error"]["status"] == "NOT_FOUND"
    assert (
        await client.post(f"{base}/models/g:generateContent", json=content("hi"))
    ).status_code == 200
    server.batches_enabled = True
    nameless = await client.post(
        f"{base}/models/g:batchGenerateContent", json={"batch": {"input_config": {}}}
    )
    assert nameless.status_code == 400
    assert nameless.json()["error"]["status"] == "INVALID_ARGUMENT"
    server.max_batch_requests = 1
    assert (
        await gemini_submit(client, server, [("a", content("x")), ("b", content("y"))])
    ).status_code == 400
    assert (await client.get(f"{base}/batches/nope")).status_code == 404


# -- across formats -------------------------------------------------------------------------------


async def test_polls_counters_and_reset(client, server):
    """batch_polls counts status requests by batch; a batch of another format is not found;
    reset() forgets batches, counters, plans and knobs."""
    server.batch_delay = 30
    created = (await anthropic_submit(client, server, [("a", params("hi"))])).json()
    url = f"{server.base_url('anthropic')}/messages/batches/{created['id']}"
    for _ in range(3):
        assert (await client.get(url)).json()["processing_status"] == "in_progress"
    assert server.batch_polls == {created["id"]: 3}
    assert (
        await client.get(f"{server.base_url('openai')}/batches/{created['id']}")
    ).status_code == 404
    assert server.batches[created["id"]].counts.processing == 1

    server.fail_in_batch("500", times=None)
    server.expire_batches(times=3)
    server.batches_enabled = False
    server.max_batch_requests = 5
    server.reset()
    assert not server.batches
    assert not server.batch_polls
    assert not server.batch_submissions
    assert server.batch_delay == MockServer().batch_delay
    assert server.batches_enabled
    assert server.max_batch_requests is None
    server.batch_delay = 0
    _, results = await anthropic_run(client, server, [("a", params("hi"))])
    assert results["a"]["type"] == "succeeded"


def test_unknown_batch_failure_kind(server):
    with pytest.raises(ValueError, match="unknown batch failure kind"):
        server.fail_in_batch("503")


async def test_a_batch_progresses_over_its_delay(client, server):
    """Requests finish one by one over batch_delay: polls see the counts grow, never shrink."""
    server.batch_delay = 0.4
    created = (
        await anthropic_submit(client, server, [(f"r{i}", params("hi")) for i in range(4)])
    ).json()
    url = f"{server.base_url('anthropic')}/messages/batches/{created['id']}"
    seen: list[int] = []

    def ended(batch: dict) -> bool:
        seen.append(batch["request_counts"]["succeeded"])
        return batch["processing_status"] == "ended"

    await poll(client, url, ended)
    assert seen == sorted(seen)
    assert set(seen) - {0, 4}, seen  # some poll saw the batch part done
    assert seen[-1] == 4
    assert server.batch_submissions == {f"r{i}": 1 for i in range(4)}


# -- spoiled results ------------------------------------------------------------------------------


async def raw_results(client, server, fmt: str, count: int) -> tuple[dict, bytes | list]:
    """A batch of `count` requests in `fmt`, run to its end: (its description, the raw
    results: the bytes of OpenAI's output file and Anthropic's results, Gemini's list)."""
    if fmt == "openai":
        lines = [openai_line(f"r{i}", chat(f"q{i}")) for i in range(count)]
        created = (await openai_submit(client, server, lines)).json()
        url = f"{server.base_url('openai')}/batches/{created['id']}"
        batch = await poll(client, url, lambda b: b["status"] == "completed")
        file_url = f"{server.base_url('openai')}/files/{batch['output_file_id']}/content"
        return batch, (await client.get(file_url)).content
    if fmt == "anthropic":
        requests = [(f"r{i}", params(f"q{i}")) for i in range(count)]
        created = (await anthropic_submit(client, server, requests)).json()
        url = f"{server.base_url('anthropic')}/messages/batches/{created['id']}"
        batch = await poll(client, url, lambda b: b["processing_status"] == "ended")
        return batch, (await client.get(batch["results_url"])).content
    created = (
        await gemini_submit(client, server, [(f"r{i}", content(f"q{i}")) for i in range(count)])
    ).json()
    url = f"{server.base_url('google')}/{created['name']}"
    operation = await poll(client, url, lambda op: op.get("done", False))
    inlined = operation["response"]["inlinedResponses"]["inlinedResponses"]
    assert operation["metadata"]["output"]["inlinedResponses"]["inlinedResponses"] == inlined
    return operation, inlined


def ids_of(fmt: str, results: bytes | list) -> list[Any]:
    """The id each line of `results` names (or why it has none)."""
    if fmt == "google":
        assert isinstance(results, list)
        return [
            (item.get("metadata") or {}).get("key", "no key") if isinstance(item, dict) else "junk"
            for item in results
        ]
    assert isinstance(results, bytes)
    found: list[Any] = []
    for line in results.split(b"\n"):
        if not line:
            continue
        try:
            found.append(msgspec.json.decode(line).get("custom_id", "no key"))
        except msgspec.DecodeError:
            found.append("truncated" if line.startswith(b"{") else "junk")
    return found


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "google"])
async def test_results_can_be_served_with_bad_lines(client, server, fmt):
    """Each flaw spoils its own line: ids taken out, null, a number; a second line for r3
    with r4's answer; a line that is no result; the last line cut short. The batch's
    counts are untouched."""
    server.batch_delay = 0
    flaws = ("no-id", "null-id", "numeric-id", "duplicate", "junk", "truncated")
    server.spoil_batch_results(*flaws)
    batch, results = await raw_results(client, server, fmt, 6)
    ids = ids_of(fmt, results)
    cut = "truncated" if fmt != "google" else "r5"  # Gemini's cut line keeps its metadata
    assert ids == ["no key", None, 12345, "r3", "r4", "r3", "junk", cut]
    if fmt == "google":
        assert results[-1] == {"metadata": {"key": "r5"}}  # its response cut off
        assert results[3]["response"] != results[5]["response"]  # the duplicate's is r4's
    else:
        assert isinstance(results, bytes)
        assert not results.endswith(b"\n")
    counts = {
        "openai": lambda: batch["request_counts"]["completed"],
        "anthropic": lambda: batch["request_counts"]["succeeded"],
        "google": lambda: int(batch["metadata"]["batchStats"]["successfulRequestCount"]),
    }[fmt]()
    assert counts == 6


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "google"])
async def test_results_can_lack_requests_the_counts_say_completed(client, server, fmt):
    """`lost=2` leaves two requests that succeeded out of the results, which the batch
    still counts completed; with `reads=1` only the first read lacks them."""
    server.batch_delay = 0
    server.spoil_batch_results(lost=2, reads=1)
    batch, first = await raw_results(client, server, fmt, 4)
    assert ids_of(fmt, first) == ["r2", "r3"]
    if fmt == "openai":
        assert batch["request_counts"] == {"total": 4, "completed": 4, "failed": 0}
        again = await client.get(
            f"{server.base_url('openai')}/files/{batch['output_file_id']}/content"
        )
        assert ids_of(fmt, again.content) == ["r0", "r1", "r2", "r3"]
    elif fmt == "anthropic":
        assert batch["request_counts"]["succeeded"] == 4
        again = await client.get(batch["results_url"])
        assert ids_of(fmt, again.content) == ["r0", "r1", "r2", "r3"]
    else:
        assert batch["metadata"]["batchStats"]["successfulRequestCount"] == "4"
        again = (await client.get(f"{server.base_url('google')}/{batch['name']}")).json()
        inlined = again["response"]["inlinedResponses"]["inlinedResponses"]
        assert ids_of(fmt, inlined) == ["r0", "r1", "r2", "r3"]


async def test_spoiled_results_are_planned_per_batch_and_reset(client, server):
    """The plan spoils the next batch only (times=1); an unknown flaw is refused; reset()
    forgets plans not yet used."""
    server.batch_delay = 0
    with pytest.raises(ValueError, match="unknown result flaws"):
        server.spoil_batch_results("garbled")
    server.spoil_batch_results("junk")
    _, spoiled = await raw_results(client, server, "anthropic", 2)
    _, whole = await raw_results(client, server, "anthropic", 2)
    assert ids_of("anthropic", spoiled) == ["r0", "r1", "junk"]
    assert ids_of("anthropic", whole) == ["r0", "r1"]
    server.spoil_batch_results("junk")
    server.reset()
    server.batch_delay = 0
    _, after = await raw_results(client, server, "anthropic", 2)
    assert ids_of("anthropic", after) == ["r0", "r1"]

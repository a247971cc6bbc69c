"""A lone surrogate anywhere in a sample (its input, target, metadata, the chat's texts)
is written to the log as its escape: the run goes on and the log reads back."""

from __future__ import annotations

import json
import zipfile

import pytest

import vitals_engine as ve
from vitals_engine.log import schema as s
from vitals_engine.log.journal_format import encode_header, encode_sample, encode_start
from vitals_engine.log.live import LiveDocument, LiveFile, LiveSample, read_live
from vitals_engine.vocab.text import WritableEncoder, writable, writable_text

pytestmark = pytest.mark.anyio

BAD = "bad\udcff"  # what errors="surrogateescape" leaves of the byte 0xff
ESCAPED = "bad\\udcff"  # its escape: a backslash and five letters


def _data(where: str) -> list[dict]:
    row: dict = {"input": "What's 2+2?", "target": "4"}
    if where == "input":
        row["input"] = f"What's 2+2? {BAD}"
    elif where == "target":
        row["target"] = BAD
    elif where == "metadata":
        row["note"], row["more"] = BAD, {BAD: [BAD, 1]}
    return [row, {"input": "What's 2+3?", "target": "5"}]


def _log_text(path) -> str:
    """Everything the final log holds, as text (every member of an `.eval`)."""
    if path.suffix == ".eval":
        with zipfile.ZipFile(path) as zf:
            return "\n".join(zf.read(name).decode("utf-8") for name in zf.namelist())
    return path.read_bytes().decode("utf-8")


@pytest.mark.parametrize("log_format", ["json", "eval"])
@pytest.mark.parametrize("where", ["input", "target", "metadata", "assistant"])
async def test_a_lone_surrogate_in_a_sample_is_logged_escaped(tmp_path, where, log_format):
    """The run succeeds, the log is UTF-8 JSON that our reader (and Inspect's, by the
    autouse check in conftest) reads back, and it holds the escape where the text was."""
    reply = (lambda prompt: f"4 {BAD}") if where == "assistant" else None

    async def solver(input):
        chat = ve.chat_mock(reply)
        text = await chat.chat_async(input)
        return ve.Solution(text, chat)

    task = ve.Task(
        _data(where),
        solver=solver,
        scorer=ve.detect_includes(),
        dir=tmp_path,
        log_format=log_format,
    )
    await task.eval_async(fail_on_error=False)
    assert task.log_path is not None
    path = tmp_path / task.log_path.name
    assert path.exists()
    assert not list(tmp_path.glob("*.journal"))  # the final log was composed
    frame = task.get_samples()  # polars holds UTF-8 only: the frame has the escape too
    assert frame.height == 2
    if where in ("input", "target"):
        assert ESCAPED in str(frame[where].to_list()[0])

    text = _log_text(path)
    assert json.dumps(ESCAPED)[1:-1] in text  # the escape, JSON-quoted: bad\\udcff
    logged = ve.read_log(path)
    assert logged.header.status == "success"
    assert logged.get_samples().height == 2
    first = logged.samples[0]
    if where == "input":
        assert first.input == f"What's 2+2? {ESCAPED}"
        assert json.dumps(ESCAPED)[1:-1].encode() in s.encoder.encode(first.messages)
    elif where == "target":
        assert first.target == ESCAPED
    elif where == "metadata":
        assert first.metadata == {"note": ESCAPED, "more": {ESCAPED: [ESCAPED, 1]}}
    else:
        assert first.output.completion == f"4 {ESCAPED}"


def test_the_escape_agrees_with_writable_text():
    """The encoder escapes as the results' `writable_text` does, only when it must."""
    assert writable_text(BAD) == ESCAPED
    assert writable({"k": (BAD, 1), BAD: None}) == {"k": (ESCAPED, 1), ESCAPED: None}
    plain = {"k": ["fine", "é"]}
    assert writable(plain) is plain  # nothing to change: not copied
    encoder = WritableEncoder()
    assert encoder.encode({"x": BAD}) == b'{"x":"bad\\\\udcff"}'
    assert encoder.encode({"x": "é"}) == '{"x":"é"}'.encode()


def test_journal_records_escape_lone_surrogates():
    """The journal's start, sample and header records hold a surrogate as its escape."""
    header = s.EvalLog(
        version=2,
        status="started",
        eval=s.EvalSpec(
            created="2026-01-01T00:00:00+00:00",
            task=BAD,
            dataset=s.EvalDataset(),
            model="mock-model",
            config=s.EvalConfig(),
            task_attribs={"who": BAD},
        ),
    )
    for line in (encode_start(header, "x.json"), encode_header(header)):
        assert json.loads(line)["header"]["eval"]["task"] == ESCAPED
    sample = s.EvalSample(id=1, epoch=1, input=BAD, target=[BAD], metadata={BAD: BAD})
    record = json.loads(encode_sample(sample))["sample"]
    assert (record["input"], record["target"], record["metadata"]) == (
        ESCAPED,
        [ESCAPED],
        {ESCAPED: ESCAPED},
    )


def test_the_live_sidecar_escapes_lone_surrogates(tmp_path):
    """Streamed text with a lone surrogate does not stop the sidecar's writes."""
    path = tmp_path / "run.live"
    sample = LiveSample(id=1, epoch=1, role="solver", input=BAD, text=BAD, chars=3, updated=0.0)
    live = LiveFile(path, "run.json", lambda: [sample])
    live._write(LiveDocument(log="run.json", updated=0.0, samples=live.snapshot()))
    document = read_live(path)
    assert document is not None
    assert (document.samples[0].input, document.samples[0].text) == (ESCAPED, ESCAPED)

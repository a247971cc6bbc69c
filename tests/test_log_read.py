"""Reading logs back: ours, journals, vitals' (R) and Inspect's `.json` and `.eval`."""

from __future__ import annotations

import json
import shutil
import struct
import zipfile
from pathlib import Path

import msgspec
import polars as pl
import pytest

import vitals_engine as ve
from vitals_engine._errors import ConfigError, LogFormatError
from vitals_engine.log import eval_reader, json_reader, schema
from vitals_engine.log.decoding import NotALogError
from vitals_engine.log.journal_format import (
    encode_header,
    encode_sample,
    encode_start,
    journal_path,
    read_journal,
    read_journal_header,
)
from vitals_engine.log.logged_eval import LoggedEval
from vitals_engine.log.logged_sample import normalize_model
from vitals_engine.log.reader import read_log
from vitals_engine.providers.replay import ReplayProvider, split_model_id
from vitals_engine.vocab.turns import ContentToolRequest, ContentToolResult, Turn

FIXTURES = Path(__file__).resolve().parent / "fixtures"
VITALS = FIXTURES / "vitals"
INSPECT = FIXTURES / "inspect"

SIMPLE_ADDITION = VITALS / "2026-01-14T16-19-11-06-00_simple-addition_add3e3e94f8e2faf092a58.json"
R_EVAL = VITALS / "2025-04-29T14-36-27-05-00_An-R-Eval_e4763d5da8fe03a6cf4a90.json"
DETECT_INCLUDES = VITALS / "2025-04-15T01-13-00+00-00_simpleaddition_4be39e48547460f824ccd8.json"
TINY_JSON = INSPECT / "2026-11-22T01-34-10-00-00_tiny_Qm9omgo5Hto8Xb3xpTfaBV.json"
TINY_EVAL = INSPECT / "2026-11-22T01-34-07-00-00_tiny_PtBns7u5sgd4CDAiTHbmg8.eval"
DEMO = INSPECT / "2025-01-01T00-00-00+00-00_demo-task_T1.json"
BARE = INSPECT / "2025-01-01T00-00-00+00-00_mytask_B1.json"
PARTIAL = INSPECT / "partial_running.eval"
RETRY = INSPECT / "retry_original.eval"
FAKE_SERVER = INSPECT / "openai_compat_fake_server.eval"

# file, status, sample count, score values in file order (None: unscored)
EXPECTED = [
    (SIMPLE_ADDITION, "success", 2, ["C", "C"]),
    (R_EVAL, "success", 26, list("ICICICIPCPCICCICPCPCPCCICI")),
    (DETECT_INCLUDES, "success", 2, ["C", "C"]),
    (TINY_JSON, "success", 6, ["I", "C", "C", "I", "C", "C"]),
    (TINY_EVAL, "success", 6, ["C", "C", "I", "C", "C", "I"]),
    (DEMO, "success", 2, ["C", "I"]),
    (BARE, "success", 1, None),
    (PARTIAL, "started", 4, ["C", "C", "C", "C"]),
    (RETRY, "success", 4, ["C", None, None, "C"]),
    (FAKE_SERVER, "success", 3, ["C", "C", "C"]),
]

ADDITION = [
    {"input": "What's 2+2?", "target": "4", "level": "easy"},
    {"input": "What's 2+3?", "target": "5", "level": "easy"},
    {"input": "What's 7+8?", "target": "16", "level": "hard"},
]


def _scores(frame: pl.DataFrame) -> list[str | None] | None:
    if "score" not in frame.columns:
        return None
    return frame["score"].cast(pl.String).to_list()


# -- fixtures written by other tools -------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status", "count", "scores"), EXPECTED, ids=[e[0].name[:40] for e in EXPECTED]
)
def test_every_fixture_reads_full_and_header_only(path, status, count, scores):
    """Each fixture log reads in full (samples, scores) and header-only (no samples)."""
    full = read_log(path)
    assert full.status == status
    assert len(full.samples) == count
    frame = full.get_samples()
    assert frame.height == count
    assert _scores(frame) == scores
    header = read_log(path, header_only=True)
    assert header.status == status
    assert header.samples == []
    assert header.header_only
    assert header.task == full.task
    assert header.metrics == full.metrics
    assert header.header.stats == full.header.stats


def test_vitals_simple_addition_with_grader_chats():
    """The vitals log: 2 samples scored C, C, its grader chats and a normalized model."""
    logged = read_log(SIMPLE_ADDITION)
    assert logged.model == "anthropic/claude-sonnet-4-5-20250929"
    assert logged.task == "simple-addition"
    assert logged.metrics == {"accuracy": 100}
    frame = logged.get_samples()
    assert frame["score"].to_list() == ["C", "C"]
    assert frame["scorer"][0] == "model_graded_qa() (claude-sonnet-4-5-20250929)"
    assert frame["result"].to_list() == ["2+2 = 4", "2 + 3 = 5"]
    judge = frame["scorer_chat"][0]
    assert [t.role for t in judge.turns] == ["user", "assistant"]
    assert judge.turns[1].text.endswith("GRADE: C")
    solver = frame["solver_chat"][0]
    assert solver.provider.name == "Anthropic"
    assert solver.turns[-1].tokens == ve.TokenUsage(input=14, output=11)


def test_vitals_r_eval_partial_credit_and_string_ids():
    """The 26-sample R eval: string ids and partial credit C/P/I."""
    frame = read_log(R_EVAL).get_samples()
    assert frame.height == 26
    assert frame["id"].dtype == pl.String
    assert frame["id"][0] == "after-stat-bar-heights"
    counts = dict(frame["score"].cast(pl.String).value_counts().iter_rows())
    assert counts == {"C": 13, "P": 5, "I": 8}
    assert frame["scorer"][0] == "model_graded_qa(partial_credit = TRUE)"


def test_vitals_detect_includes_has_no_grader_chat():
    """Scores without a grader chat give no scorer_chat column."""
    frame = read_log(DETECT_INCLUDES).get_samples()
    assert "scorer_chat" not in frame.columns
    assert frame["answer"].to_list() == ["2+2=4", "2 + 3 = 5"]


def test_vitals_usage_keys_and_bare_model_in_cost(tmp_path):
    """vitals' cache_read_input_tokens count as cached input; a bare model gets its provider."""
    data = json.loads(DETECT_INCLUDES.read_text())
    usage = data["stats"]["model_usage"]["claude-3-7-sonnet-latest"]
    usage["cache_read_input_tokens"] = 7
    path = tmp_path / DETECT_INCLUDES.name
    path.write_text(json.dumps(data))
    cost = read_log(path).get_cost()
    assert cost.to_dicts() == [
        {
            "role": "solver",
            "provider": "Anthropic",
            "model": "claude-3-7-sonnet-latest",
            "batch": False,
            "cached": False,
            "requests": 2,
            "timed_out": 0,
            "input_tokens": 28,
            "cached_input_tokens": 7,
            "cache_write_tokens": 0,
            "output_tokens": 22,
            "reasoning_tokens": 0,
            "cost": None,
        }
    ]


def test_inspect_tiny_run_json_and_eval_agree():
    """Inspect's tiny run: 3 samples x 2 epochs, the same in .json and .eval."""
    from_json = read_log(TINY_JSON).get_samples()
    from_eval = read_log(TINY_EVAL).get_samples()
    keys = ["id", "epoch", "score", "result"]
    assert (
        from_json.select(keys)
        .sort("id", "epoch")
        .equals(from_eval.select(keys).sort("id", "epoch"))
    )
    assert sorted(from_json["epoch"].to_list()) == [1, 1, 1, 2, 2, 2]
    assert set(from_json["id"].to_list()) == {"s1", "s2", "3"}
    assert read_log(TINY_EVAL).metrics == pytest.approx({"accuracy": 2 / 3, "stderr": 1 / 3})


def test_partial_eval_without_header_is_started():
    """A .eval copied mid-run (journal only) reads as status "started" with its 4 samples."""
    logged = read_log(PARTIAL)
    assert logged.status == "started"
    assert logged.metrics is None
    assert logged.header.stats.started_at == ""
    assert [x.id for x in logged.samples] == [1, 2, 3, 4]


def test_retry_original_keeps_errored_samples():
    """The two errored samples of a run keep their errors and have no score."""
    frame = read_log(RETRY).get_samples()
    errored = frame.filter(pl.col("error").is_not_null())
    assert errored["id"].to_list() == [2, 3]
    assert errored["error"][0].startswith("RuntimeError('boom on 2')")
    assert errored["score"].to_list() == [None, None]


def test_events_stay_raw_and_unknown_event_types_read(tmp_path):
    """Events are kept as raw JSON, and an event type no one knows does not break reading."""
    logged = read_log(FAKE_SERVER)
    events = msgspec.json.decode(logged.samples[0].events)
    assert any(e["event"] == "model" for e in events)
    data = json.loads(DEMO.read_text())
    data["samples"][0]["events"] = [{"event": "from_the_future", "timestamp": "x", "z": [1]}]
    path = tmp_path / DEMO.name
    path.write_text(json.dumps(data))
    (sample, _) = read_log(path).samples
    assert msgspec.json.decode(sample.events)[0]["event"] == "from_the_future"


def test_bare_nan_and_infinity_tokens_read_as_null(tmp_path):
    """Inspect's bare NaN / Infinity become null, and the same text inside strings stays."""
    text = TINY_JSON.read_text()
    text = text.replace('"value": 0.33333333333333337', '"value": NaN', 1)
    text = text.replace('"Unknowable?"', '"NaN or Infinity?"')
    text = text.replace('"total_time": ', '"total_time": -Infinity, "x_time": ', 1)
    path = tmp_path / TINY_JSON.name
    path.write_text(text)
    for header_only in (True, False):
        logged = read_log(path, header_only=header_only)
        assert logged.metrics is not None
        assert logged.metrics["stderr"] is None
    frame = read_log(path).get_samples()
    assert "NaN or Infinity?" in frame["input"].to_list()


@pytest.mark.parametrize("indent", [None, 2])
def test_header_read_passes_nested_samples_keys_in_one_decode(tmp_path, monkeypatch, indent):
    """A header holding thousands of nested `"samples"` keys (in metadata) is read with one
    decode of the bytes before the top-level key, not one decode per nested key."""
    data = json.loads(TINY_JSON.read_text())
    data["eval"]["metadata"] = {
        "runs": [{"note": ', "samples": [', "samples": [i]} for i in range(3000)]
    }
    path = tmp_path / TINY_JSON.name
    path.write_text(json.dumps(data, indent=indent))
    tries = []
    real = json_reader._try_prefix
    monkeypatch.setattr(json_reader, "_try_prefix", lambda *a: tries.append(1) or real(*a))
    header = read_log(path, header_only=True)
    assert len(tries) == 1
    assert header.header_only
    assert len(header.header.eval.metadata["runs"]) == 3000
    assert read_log(path).header.status == header.header.status


def bomb_eval(path: Path, declared: int | None = None) -> Path:
    """An .eval whose header.json is 50 MB of spaces deflated to ~50 KB; `declared`: the
    inflated size its zip entries claim instead of the truth."""
    body = b'{"version": 2, "status": "success"' + b" " * 50_000_000 + b"}"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", body)
    if declared is not None:
        raw = bytearray(path.read_bytes())
        size = struct.pack("<I", len(body))
        for at in (i for i in range(len(raw) - 3) if raw[i : i + 4] == size):
            raw[at : at + 4] = struct.pack("<I", declared)
        path.write_bytes(bytes(raw))
    return path


@pytest.mark.no_inspect_check
def test_an_eval_member_declaring_too_much_is_refused_before_inflating(tmp_path, monkeypatch):
    """A header member may inflate to MAX_HEADER_BYTES at most: a small file cannot make a
    header-only read fill the memory."""
    monkeypatch.setattr(eval_reader, "MAX_HEADER_BYTES", 10_000_000)
    path = bomb_eval(tmp_path / "bomb.eval")
    with pytest.raises(LogFormatError, match=r"header\.json.*more than the 9 MiB"):
        read_log(path, header_only=True)


@pytest.mark.no_inspect_check
def test_an_eval_member_inflating_past_its_declared_size_is_refused(tmp_path):
    """A member that lies about its size stops inflating at the size it declared."""
    path = bomb_eval(tmp_path / "liar.eval", declared=1000)
    with pytest.raises(LogFormatError, match="inflates past its declared 1000 bytes"):
        read_log(path, header_only=True)


# -- errors -----------------------------------------------------------------------------------


def test_missing_file_does_not_exist(tmp_path):
    """A missing path is a LogFormatError saying so."""
    with pytest.raises(LogFormatError, match="does not exist"):
        read_log(tmp_path / "nope.json")


def test_directory_and_unknown_suffix_are_refused(tmp_path):
    """A directory or a file of another kind is not a log."""
    with pytest.raises(LogFormatError, match="is a directory"):
        read_log(tmp_path)
    other = tmp_path / "notes.txt"
    other.write_text("hi")
    with pytest.raises(LogFormatError, match=r"expected a \.json, \.eval or \.journal"):
        read_log(other)


def test_truncated_json_names_the_file_and_position(tmp_path):
    """A truncated .json log fails naming the file and the byte where it stops."""
    data = TINY_JSON.read_bytes()
    path = tmp_path / "truncated.json"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(LogFormatError, match=rf"truncated\.json.*byte {len(data) // 2}"):
        read_log(path)
    path.write_bytes(data[:300])  # cut inside the header: header-only fails too
    with pytest.raises(LogFormatError, match=r"truncated\.json.*byte 300"):
        read_log(path, header_only=True)


def test_corrupt_json_names_the_byte(tmp_path):
    """Garbage inside a .json log is reported with its byte offset."""
    data = bytearray(DEMO.read_bytes())
    at = data.rindex(b'"What is 2+2?"')
    data[at : at + 3] = b"@@@"
    path = tmp_path / "corrupt.json"
    path.write_bytes(bytes(data))
    with pytest.raises(LogFormatError, match=r"corrupt\.json.*\(byte \d+\)"):
        read_log(path)


def test_mistyped_json_names_the_field(tmp_path):
    """A log whose sample has a wrong field type names the JSON path."""
    data = json.loads(DEMO.read_text())
    data["samples"][1]["epoch"] = "one"
    path = tmp_path / "mistyped.json"
    path.write_text(json.dumps(data))
    with pytest.raises(LogFormatError, match=r"mistyped\.json.*samples\[1\]\.epoch"):
        read_log(path)


def test_json_that_is_not_a_log(tmp_path):
    """A viewer manifest is valid JSON but not a log: NotALogError (a LogFormatError)."""
    with pytest.raises(NotALogError, match=r"listing\.json: not an eval log"):
        read_log(VITALS / "listing.json")
    with pytest.raises(LogFormatError, match="not an eval log"):
        read_log(VITALS / "logs.json", header_only=True)


@pytest.mark.no_inspect_check  # a truncated zip on purpose
def test_truncated_eval_names_the_file(tmp_path):
    """A truncated .eval zip (no central directory) fails naming the file and its size."""
    data = TINY_EVAL.read_bytes()
    path = tmp_path / "cut.eval"
    path.write_bytes(data[:5000])
    with pytest.raises(LogFormatError, match=r"cut\.eval.*5000 bytes"):
        read_log(path)


@pytest.mark.no_inspect_check  # a damaged zip on purpose
def test_damaged_eval_member_is_named(tmp_path):
    """A damaged member of a .eval is reported by name."""
    data = bytearray(RETRY.read_bytes())
    at = data.index(b"samples/2_epoch_1.json") + len("samples/2_epoch_1.json") + 40
    data[at : at + 8] = b"\x00" * 8
    path = tmp_path / "damaged.eval"
    path.write_bytes(bytes(data))
    with pytest.raises(LogFormatError, match=r"damaged\.eval \(member samples/2_epoch_1\.json\)"):
        read_log(path)
    assert read_log(path, header_only=True).status == "success"


# -- header-only reads -------------------------------------------------------------------------


class _Exploding:
    def decode(self, data):
        raise AssertionError("a header-only read decoded samples")


@pytest.mark.parametrize("path", [SIMPLE_ADDITION, R_EVAL, TINY_JSON, TINY_EVAL, PARTIAL])
def test_header_only_never_decodes_samples(monkeypatch, path):
    """Header-only reads use neither the full-log nor the sample decoder."""
    monkeypatch.setattr(json_reader, "_log_decoder", _Exploding())
    monkeypatch.setattr(eval_reader, "_sample_decoder", _Exploding())
    logged = read_log(path, header_only=True)
    assert logged.samples == []
    assert logged.task


def test_header_only_skips_a_nested_samples_key(tmp_path):
    """A `"samples"` key inside the header (dataset.samples) is not taken for the top-level one."""
    data = json.loads(DEMO.read_text())
    data["eval"]["dataset"] = {"name": "d", "samples": 2, "sample_ids": [1, 2]}
    data["eval"]["metadata"] = {"note": ', "samples": [', "nested": {"samples": [1]}}
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(data, indent=2))
    header = read_log(path, header_only=True)
    assert header.header.eval.dataset.samples == 2
    assert header.metrics == {"accuracy": 0.5}


def test_header_only_with_samples_before_the_header(tmp_path):
    """Samples written before the header keys still give the header (by a full parse)."""
    data = json.loads(DEMO.read_text())
    reordered = {"samples": data.pop("samples"), **data}
    path = tmp_path / "reordered.json"
    path.write_text(json.dumps(reordered))
    header = read_log(path, header_only=True)
    assert header.metrics == {"accuracy": 0.5}
    assert header.samples == []


def test_header_only_of_a_mistyped_header_names_the_field(tmp_path):
    """A header with a wrongly typed field fails header-only too, naming the JSON path."""
    data = json.loads(DEMO.read_text())
    data["eval"]["task"] = 7
    path = tmp_path / "badheader.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        LogFormatError, match=r"badheader\.json: not a valid eval log.*\$\.eval\.task"
    ):
        read_log(path, header_only=True)


def test_header_only_then_get_samples_loads_them():
    """get_samples() on a header-only result reads the samples then."""
    logged = read_log(TINY_EVAL, header_only=True)
    assert logged.get_samples().height == 6
    assert not logged.header_only
    assert len(logged.samples) == 6


# -- journals -----------------------------------------------------------------------------------


def _journal_parts(path=TINY_JSON):
    full = read_log(path)
    started = msgspec.structs.replace(full.header, status="started", results=msgspec.UNSET)
    return full, started


def test_journal_round_trip_and_replacement(tmp_path):
    """Start, samples and a final header read back; a later line replaces an earlier sample."""
    full, started = _journal_parts()
    path = tmp_path / "run.journal"
    first = msgspec.structs.replace(full.samples[0], scores=None)
    with path.open("wb") as fh:
        fh.write(encode_start(started, "run.json"))
        fh.write(encode_sample(first))
        for sample in full.samples:
            fh.write(encode_sample(sample))
    contents = read_journal(path)
    header, samples, damage = contents.header, contents.samples, contents.damage
    assert damage is None
    assert header.status == "started"
    assert [(x.id, x.epoch) for x in samples] == [(x.id, x.epoch) for x in full.samples]
    assert samples[0].scores == full.samples[0].scores
    assert read_log(path).status == "started"
    with path.open("ab") as fh:
        fh.write(encode_header(full.header))
    logged = read_log(path)
    assert logged.status == "success"
    assert logged.metrics == full.metrics
    assert read_log(path, header_only=True).status == "success"
    assert read_journal_header(path).status == "success"


def test_journal_start_line_layout():
    """Line 1 starts with the format version, then the kind and the final log's name."""
    _, started = _journal_parts()
    line = encode_start(started, "x.json")
    assert line.startswith(b'{"journal":1,"kind":"start","log":"x.json","header":{')
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert journal_path("/logs/2026_task_abc.json") == Path("/logs/2026_task_abc.journal")


def test_journal_truncated_mid_line_reports_damage(tmp_path):
    """A journal cut mid-line yields every complete sample and says where it broke."""
    full, started = _journal_parts()
    lines = [encode_start(started, "run.json")] + [encode_sample(x) for x in full.samples]
    cut = len(lines[-1]) // 2
    path = tmp_path / "run.journal"
    path.write_bytes(b"".join(lines)[: sum(map(len, lines)) - cut])
    contents = read_journal(path)
    samples, damage, skipped = contents.samples, contents.damage, contents.skipped
    assert skipped == ()
    assert len(samples) == len(full.samples) - 1
    assert damage is not None
    assert damage.line == len(lines)
    assert damage.offset == sum(map(len, lines[:-1]))
    assert "incomplete" in damage.reason
    logged = read_log(path)
    assert logged.damage == damage
    assert logged.get_samples().height == len(full.samples) - 1


def test_a_damaged_line_mid_journal_is_skipped_with_a_warning(tmp_path, caplog):
    """A line that is not a record, with good lines after it, is skipped with a warning
    that says where: the records after it still count, and nothing is reported cut."""
    full, started = _journal_parts()
    path = tmp_path / "run.journal"
    start, first = encode_start(started, "run.json"), encode_sample(full.samples[0])
    path.write_bytes(
        start
        + first
        + b"not json\n"
        + encode_start(started, "run.json")
        + encode_sample(full.samples[1])
    )
    with caplog.at_level("WARNING", logger="vitals_engine"):
        contents = read_journal(path)
    assert [(x.id, x.epoch) for x in contents.samples] == [
        (x.id, x.epoch) for x in full.samples[:2]
    ]
    assert contents.damage is None
    assert [(d.line, d.offset) for d in contents.skipped] == [
        (3, len(start) + len(first)),
        (4, len(start) + len(first) + len(b"not json\n")),
    ]
    assert "a second start record" in contents.skipped[1].reason
    warned = [r.getMessage() for r in caplog.records if "skipped a damaged" in r.getMessage()]
    assert len(warned) == 2
    assert "line 3 (byte " in warned[0]
    assert read_log(path).get_samples().height == 2


def test_a_damaged_last_line_is_the_damage(tmp_path):
    """A complete but unreadable last line is what a crash left: reported as `damage`."""
    full, started = _journal_parts()
    path = tmp_path / "run.journal"
    path.write_bytes(encode_start(started, "run.json") + encode_sample(full.samples[0]) + b"{x\n")
    contents = read_journal(path)
    assert len(contents.samples) == 1
    assert contents.damage is not None
    assert contents.damage.line == 3
    assert contents.skipped == ()


def test_journal_without_start_record_names_the_file(tmp_path):
    """A file whose first line is not a start record is refused, naming the file."""
    full, _ = _journal_parts()
    path = tmp_path / "bad.journal"
    path.write_bytes(encode_sample(full.samples[0]))
    with pytest.raises(LogFormatError, match=r"bad\.journal: not a journal: line 1"):
        read_journal(path)
    with pytest.raises(LogFormatError, match=r"bad\.journal: not a journal"):
        read_log(path, header_only=True)
    path.write_bytes(b"")
    with pytest.raises(LogFormatError, match=r"bad\.journal: not a journal"):
        read_log(path)
    with pytest.raises(LogFormatError, match="does not exist"):
        read_journal(tmp_path / "missing.journal")


def test_journal_of_a_newer_version_is_refused(tmp_path):
    """A journal format version above 1 is not guessed at."""
    _, started = _journal_parts()
    line = encode_start(started, "run.json").replace(b'"journal":1', b'"journal":2', 1)
    path = tmp_path / "new.journal"
    path.write_bytes(line)
    with pytest.raises(LogFormatError, match="version 2 is not supported"):
        read_journal(path)


# -- round trips of our own runs -------------------------------------------------------------------

COMPARED = ["id", "epoch", "input", "target", "level", "result", "score", "scorer", "explanation"]


def _turn_facts(chat):
    return [(t.role, t.text, t.tokens) for t in chat.turns]


@pytest.mark.anyio
async def test_round_trip_of_an_eval(tmp_path):
    """read_log(task.log_path) gives back the task's samples, chats, tokens and cost."""
    task = ve.Task(
        ADDITION, solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(epochs=2)
    assert task.log_path is not None
    logged = read_log(task.log_path)
    assert logged.status == "success"
    assert logged.metrics == task.metrics
    ours, theirs = task.get_samples(), logged.get_samples()
    assert theirs.columns == ours.columns
    assert theirs.select(COMPARED).equals(ours.select(COMPARED))
    for mine, back in zip(ours["solver_chat"], theirs["solver_chat"], strict=True):
        assert _turn_facts(back) == _turn_facts(mine)
        assert back.provider.model_id == mine.provider.model_id
    assert logged.get_cost().equals(task.get_cost())
    written = schema.log_decoder.decode(task.log_path.read_bytes())
    assert logged.header.stats == written.stats
    assert logged.header.eval == written.eval


@pytest.mark.anyio
async def test_round_trip_of_a_model_graded_eval(tmp_path):
    """Grader chats come back with their turns and tokens, and the cost by role matches."""
    task = ve.Task(
        ADDITION,
        solver=ve.generate(ve.chat_mock(system_prompt="Be terse.")),
        scorer=ve.model_graded_qa(scorer_chat=ve.chat_mock()),
        dir=tmp_path,
    )
    await task.eval_async()
    logged = read_log(task.log_path)
    ours, theirs = task.get_samples(), logged.get_samples()
    assert theirs.select(COMPARED).equals(ours.select(COMPARED))
    for mine, back in zip(ours["scorer_chat"], theirs["scorer_chat"], strict=True):
        assert _turn_facts(back) == _turn_facts(mine)
    assert theirs["solver_chat"][0].system_prompt == "Be terse."
    assert logged.get_cost().equals(task.get_cost())


@pytest.mark.anyio
async def test_round_trip_of_tool_calls(tmp_path):
    """A tool call and its result come back as a tool request and a user turn of results."""

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    chat = ve.chat_mock(
        [Turn("assistant", [ContentToolRequest("c1", "add", {"a": 1, "b": 2})]), "It is 3."]
    )
    chat.register_tool(add)
    task = ve.Task(
        [{"input": "What's 1 plus 2?", "target": "3"}],
        solver=ve.generate(chat),
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async()
    back = read_log(task.log_path).get_samples()["solver_chat"][0]
    mine = task.get_samples()["solver_chat"][0]
    assert [t.role for t in back.turns] == ["user", "assistant", "user", "assistant"]
    assert back.turns[1].tool_requests == mine.turns[1].tool_requests
    (result,) = back.turns[2].contents
    assert isinstance(result, ContentToolResult)
    assert (result.id, result.name, result.text) == ("c1", "add", "3")
    assert back.turns[3].text == "It is 3."


@pytest.mark.anyio
async def test_round_trip_through_a_journal(tmp_path):
    """A journal of the run's records reads back like the final log."""
    task = ve.Task(
        ADDITION, solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async()
    final = read_log(task.log_path)
    started = msgspec.structs.replace(final.header, status="started")
    path = journal_path(task.log_path)
    path.write_bytes(
        encode_start(started, task.log_path.name)
        + b"".join(encode_sample(x) for x in final.samples)
        + encode_header(final.header)
    )
    journaled = read_log(path)
    assert journaled.status == "success"
    assert journaled.get_samples().select(COMPARED).equals(final.get_samples().select(COMPARED))


@pytest.mark.anyio
async def test_logged_chat_cannot_call_its_model(tmp_path):
    """A chat read from a log says how to continue it on a live model."""
    task = ve.Task(
        ADDITION[:1], solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async()
    chat = read_log(task.log_path).get_samples()["solver_chat"][0]
    assert isinstance(chat.provider, ReplayProvider)
    with pytest.raises(ConfigError, match=r"read from a log of mock/mock-model.*set_turns"):
        await chat.chat_async("And 3+3?")


def test_split_model_ids():
    """Model ids split at the first slash; bare vitals models get their provider guessed."""
    assert split_model_id("openai/gpt-4.1") == ("openai", "gpt-4.1")
    assert split_model_id("openrouter/meta/llama") == ("openrouter", "meta/llama")
    assert split_model_id("claude-3-7-sonnet-latest") == ("anthropic", "claude-3-7-sonnet-latest")
    assert split_model_id("mystery") == ("unknown", "mystery")
    assert normalize_model("generate(chat_claude()) (claude-x)") == "anthropic/claude-x"


def test_no_grade_marker_reads_as_unscored(tmp_path):
    """Our no-grade marker ("N", reason grader_failed) is a null score; a plain "N" is kept."""
    data = json.loads(DEMO.read_text())
    data["samples"][0]["scores"]["match"] = {"value": "N", "reason": "grader_failed"}
    path = tmp_path / DEMO.name
    path.write_text(json.dumps(data))
    assert read_log(path).get_samples()["score"].to_list() == [None, "I"]
    data["samples"][0]["scores"]["match"] = {"value": "N"}
    path.write_text(json.dumps(data))
    assert read_log(path).get_samples()["score"].to_list() == ["N", "I"]


def test_logged_eval_repr(tmp_path):
    """A LoggedEval shows its task, model, status, sample count and metrics."""
    copy = tmp_path / SIMPLE_ADDITION.name
    shutil.copy(SIMPLE_ADDITION, copy)
    logged = read_log(copy)
    assert isinstance(logged, LoggedEval)
    assert repr(logged) == (
        "<LoggedEval simple-addition (anthropic/claude-sonnet-4-5-20250929): success, "
        f"2 samples, accuracy=100 from {copy.name}>"
    )


@pytest.mark.anyio
async def test_logged_chats_are_independent_and_editable(tmp_path):
    """A chat read from a log is a full Chat: a clone has its own turns, and a system
    prompt or turns set before the conversation was first looked at are kept."""
    task = ve.Task(
        ADDITION[:2],
        solver=ve.generate(ve.chat_mock(system_prompt="Be terse.")),
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async()
    first, second = read_log(task.log_path).get_samples()["solver_chat"]
    twin = first.clone()
    twin.set_turns(twin.turns[:1])
    assert len(first.turns) == 2
    assert len(twin.turns) == 1
    assert twin.system_prompt == first.system_prompt == "Be terse."
    second.system_prompt = "Be kind."
    assert second.system_prompt == "Be kind."
    assert second.turns[0].text == "What's 2+3?"
    assert second.get_tokens()["output"].sum() > 0

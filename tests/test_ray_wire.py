"""What crosses between a Ray run's driver and its workers (`distributed.wire`): a parcel
going out and a finished record coming back carry everything a record holds."""

import pytest

pytest.importorskip("ray")

from vitals_engine.distributed.wire import (
    FIELDS,
    finished_in,
    finished_out,
    live_in,
    live_out,
    parcel_in,
    parcel_out,
)
from vitals_engine.engine.live_texts import LiveTexts
from vitals_engine.samples import Sample, SampleError, SampleRecord, Score
from vitals_engine.vocab.usage import UsageLedger


def samples():
    return [
        Sample(1, 1, "What's 1+1?", "2"),
        Sample("b", 2, [{"role": "user", "content": "hi"}], ["x", "y"], {"level": 3}),
    ]


def test_a_parcel_of_new_records_goes_out_as_its_samples():
    records = [SampleRecord(sample) for sample in samples()]
    back = parcel_in(parcel_out(records, fresh=True))
    assert [r.sample for r in back] == samples()
    assert all(r.result is None and r.score is None for r in back)


def test_a_parcel_to_score_goes_out_with_its_solutions():
    records = [SampleRecord(sample, result="2", solve_completed=5.0) for sample in samples()]
    back = parcel_in(parcel_out(records, fresh=False))
    assert [(r.sample, r.result, r.solve_completed) for r in back] == [
        (s, "2", 5.0) for s in samples()
    ]


def test_a_finished_record_comes_back_whole_but_for_its_sample():
    done = SampleRecord(
        samples()[1],
        result="x",
        score=Score("C", answer="x"),
        error=SampleError(stage="score", type="ValueError", message="no"),
        solve_started=1.0,
        solve_completed=2.0,
        usage=UsageLedger(),
        solver_metadata={"k": 1},
    )
    wire = finished_out(done, b"line\n")
    assert samples()[1] not in wire  # the driver has the sample
    into = SampleRecord(samples()[1])
    assert finished_in(into, wire) == b"line\n"
    assert set(FIELDS) | {"sample"} == set(SampleRecord.__dataclass_fields__)
    assert all(getattr(into, name) is getattr(done, name) for name in FIELDS)


def test_a_workers_live_text_replaces_what_it_showed_before():
    """A snapshot shows the samples still at work there, with their text; what the
    previous snapshot showed and this one does not is no longer shown."""
    on_worker = LiveTexts()
    one, two = samples()
    on_worker.sink(one, "solver")(object(), "Thinking")
    on_worker.sink(two, "scorer")(object(), "GRADE")
    at_work = {(s.id, s.epoch): SampleRecord(s) for s in samples()}
    changes = []
    texts = LiveTexts(on_change=lambda: changes.append(1))
    shown = live_in(texts, live_out(on_worker), at_work, set())
    assert shown == {(1, 1), ("b", 2)}
    assert texts.entries[(1, 1)].text == "Thinking"
    assert texts.entries[("b", 2)].role == "scorer"
    assert texts.entries[(1, 1)].sample is at_work[(1, 1)].sample  # the driver's own
    del at_work[("b", 2)]  # finished on the worker meanwhile
    on_worker.drop((1, 1))
    assert live_in(texts, live_out(on_worker), at_work, shown) == set()
    assert texts.entries == {}
    assert len(changes) == 2

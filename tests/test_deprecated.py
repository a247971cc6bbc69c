"""Renamed public names keep working for one release, each use warning with the new name."""

from __future__ import annotations

import pytest

import vitals_engine as ve


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("batch_solver", "vectorized_solver"),
        ("batch_scorer", "vectorized_scorer"),
        ("BatchFunction", "VectorizedFunction"),
    ],
)
def test_an_old_name_warns_and_is_the_new_one(old, new):
    """`ve.<old>` is `ve.<new>`, with a DeprecationWarning that names `ve.<new>`."""
    with pytest.warns(DeprecationWarning, match=rf"ve\.{old} is deprecated.*use ve\.{new}"):
        value = getattr(ve, old)
    assert value is getattr(ve, new)
    assert old not in ve.__all__


def test_a_vectorized_solver_declared_by_its_old_name_still_runs(tmp_path):
    """A solver declared with `@ve.batch_solver` runs as a vectorized one."""
    with pytest.warns(DeprecationWarning, match="vectorized_solver"):
        declare = ve.batch_solver

    @declare
    def shout(inputs: list[str]) -> list[str]:
        return [text.upper() for text in inputs]

    task = ve.Task([{"input": "hi", "target": "HI"}], shout, ve.detect_exact(), dir=tmp_path)
    assert task.solve().get_samples()["result"].to_list() == ["HI"]


def test_an_unknown_name_is_still_an_attribute_error():
    """A name that never was one is an AttributeError, not a warning."""
    with pytest.raises(AttributeError, match="no attribute 'batch_anything'"):
        _ = ve.batch_anything

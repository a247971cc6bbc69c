"""The public face of the package."""

import vitals_engine as ve


def test_all_is_sorted_and_complete():
    """__all__ lists every public name once, sorted, and each one exists."""
    assert ve.__all__ == sorted(set(ve.__all__))
    for name in ve.__all__:
        assert hasattr(ve, name), name
    public = {n for n in dir(ve) if not n.startswith("_")} - set(ve.__all__)
    modules = {n for n in public if type(getattr(ve, n)).__name__ == "module"}
    assert public == modules


def test_every_error_is_a_vitals_error():
    """All exported exceptions share the root VitalsError."""
    errors = [
        getattr(ve, n)
        for n in ve.__all__
        if n.endswith(("Error", "Unavailable", "Timeout", "Response"))
    ]
    assert len(errors) >= 14
    for error in errors:
        assert issubclass(error, ve.VitalsError), error
    assert issubclass(ve.RateLimitError, ve.ProviderError)
    assert ve.RateLimitError("slow down", retry_after=2.5).retry_after == 2.5


def test_package_is_typed():
    """The package ships py.typed so type checkers read its annotations."""
    from importlib.resources import files

    assert files("vitals_engine").joinpath("py.typed").is_file()

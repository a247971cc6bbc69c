import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


@pytest.fixture
def no_retries(monkeypatch):
    """Model calls outside a run make one attempt: for tests of how a failure is classified."""
    import importlib

    import vitals_engine as ve

    calls = importlib.import_module("vitals_engine.chat.calls")
    monkeypatch.setattr(calls, "DEFAULT_RETRY", ve.Retry(max_attempts=1))


@pytest.fixture(scope="module")
def _module_server():
    from vitals_engine.testing import MockServer

    with MockServer() as running:
        yield running


@pytest.fixture
def server(_module_server):
    """The local mock model server, one per test module, reset before each test."""
    _module_server.reset()
    yield _module_server
    _module_server.reset()  # release anything a test left hanging

# Two commands on a fresh machine with python3 (3.11+) and make:
#   make demo   set up, then run the quickstart eval offline
#   make test   set up, then run the whole test suite
PYTHON ?= python3
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
export UV_PROJECT_ENVIRONMENT := $(VENV)
# The viewer's browser tests drive Debian's chromium (Playwright never downloads its own).
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup demo test lint bench clean

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet "uv>=0.5"

$(VENV)/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --locked --all-extras --quiet
	@touch $@

$(CHROMIUM):
	@if command -v apt-get >/dev/null; then \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; \
	else \
		echo "No apt-get: install chromium at $(CHROMIUM) for the viewer's browser tests (they skip without it)."; \
	fi

setup: $(VENV)/.synced $(CHROMIUM)

demo: setup
	$(VENV)/bin/python examples/quickstart.py

test: setup
	$(VENV)/bin/python -m pytest -q

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pyright
	$(VENV)/bin/lint-imports --no-cache --no-logo

bench: setup
	$(VENV)/bin/python bench/throughput.py

clean:
	rm -rf $(TOOLS) $(VENV) .pytest_cache

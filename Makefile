# Two commands on a fresh machine with python3 (3.11+) and make:
#   make demo   set up the runtime dependencies alone, then run the quickstart eval offline
#   make test   set up everything (dev tools, extras, a browser and the sandboxes' system
#               packages if it can), build the docs (as `make docs`), then run the suite
# `make options` writes the run options' types from their table after it changes.
# Also: `make docs` builds the documentation site into site/ (strict: a broken link or any
# warning fails it); `make docs-serve` serves it at http://127.0.0.1:8000/ while you edit.
PYTHON ?= python3
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
export UV_PROJECT_ENVIRONMENT := $(VENV)
# The viewer's browser tests drive Debian's chromium (Playwright never downloads its own).
CHROMIUM := /usr/bin/chromium
APT_CHROMIUM := env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium

.PHONY: setup demo test lint docs docs-serve bench browser sandboxes agents clean options

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet "uv>=0.5"

# Two stamps, one per kind of environment. The runtime sync is --inexact: after
# `make test` it keeps the dev tools (nothing to remove), and `make test` after
# `make demo` finds no dev stamp and adds them.
$(VENV)/.synced-runtime: $(UV) pyproject.toml uv.lock
	$(UV) sync --locked --no-dev --inexact --quiet
	@touch $@

$(VENV)/.synced-dev: $(UV) pyproject.toml uv.lock
	$(UV) sync --locked --all-extras --quiet
	@touch $@

# Best effort, never an error: the browser tests skip without chromium.
browser:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif ! command -v apt-get >/dev/null; then \
		echo "No apt-get: install chromium at $(CHROMIUM) to run the viewer's browser tests (they skip without it)."; \
	elif [ "$$(id -u)" = 0 ]; then \
		{ apt-get update -qq && $(APT_CHROMIUM); } || echo "Could not install chromium: the viewer's browser tests skip."; \
	elif sudo -n true 2>/dev/null; then \
		{ sudo -n apt-get update -qq && sudo -n $(APT_CHROMIUM); } || echo "Could not install chromium: the viewer's browser tests skip."; \
	else \
		echo "chromium is missing and installing it needs root: the viewer's browser tests skip (sudo apt-get install chromium)."; \
	fi

# Best effort, never an error: bubblewrap and docker.io (Debian's), a running dockerd (its
# log: /tmp/vitals-dockerd.log) and the test images vitals-sandbox-test:1 and, for the coding
# agents, vitals-agent-test:1, made offline (.ci/sandboxes says what they hold). Quick once
# done; the sandbox tests skip without them.
sandboxes:
	@bash .ci/sandboxes

# The coding-agent solvers' CLIs (Claude Code, Codex), pinned, from npm into the project's tool
# cache, once (best effort: their tests skip, saying why, without node and npm).
export VITALS_AGENT_CACHE := $(abspath $(TOOLS))/agent-clis
agents: $(VENV)/.synced-dev
	@if command -v npm >/dev/null; then \
		$(VENV)/bin/vitals install-agent claude-code codex >/dev/null \
		|| echo "Could not install the agent CLIs: the coding-agent tests skip."; \
	else echo "No npm: the coding-agent tests skip (install Node.js and npm)."; fi

setup: $(VENV)/.synced-dev browser sandboxes agents

demo: $(VENV)/.synced-runtime
	$(VENV)/bin/python examples/quickstart.py

test: setup docs
	$(VENV)/bin/python -m pytest -q

lint: $(VENV)/.synced-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pyright
	$(VENV)/bin/lint-imports --no-cache --no-logo

# The site, offline (mkdocs.yml: no fonts or scripts from elsewhere) and strict: a broken
# link, a missing API reference or any warning fails the build.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs
DOCS_ADDR ?= 127.0.0.1:8000

docs: $(VENV)/.synced-dev
	$(MKDOCS) build --strict

docs-serve: $(VENV)/.synced-dev
	@echo "Serving the docs at http://$(DOCS_ADDR)/ (rebuilt on each change; Ctrl-C stops)"
	$(MKDOCS) serve --dev-addr $(DOCS_ADDR)

# The run options' typed keywords and fields, written from their table
# (vitals_engine/engine/option_table.py): run after editing the table.
options: $(VENV)/.synced-dev
	$(VENV)/bin/python -m vitals_engine.engine.option_render
	$(VENV)/bin/ruff format --quiet vitals_engine/engine/option_types.py

bench: $(VENV)/.synced-dev
	$(VENV)/bin/python bench/throughput.py

clean:
	rm -rf $(TOOLS) $(VENV) site

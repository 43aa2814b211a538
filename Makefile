# One entry point for the chores. `make test` is the README's test command and what .ci/run runs.
PY ?= .venv/bin/python
.PHONY: test lint format typecheck tiers bench

test: lint typecheck tiers

lint:
	$(PY) -m ruff check agentd tests
	$(PY) -m ruff format --check agentd tests

format:
	$(PY) -m ruff format agentd tests
	$(PY) -m ruff check --fix agentd tests

typecheck:
	$(PY) -m mypy agentd

tiers:
	bash .ci/tiers

bench:
	$(PY) -m tests.benchmarks all --write docs/benchmarks.md

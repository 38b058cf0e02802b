# Two commands on a fresh machine: `make run` starts the local Runtime, `make test` runs every test.
# Both create .venv and install what they need.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
# AWS SAM CLI in its own venv (it pins its own boto3/pydantic): `make build`, `make validate` and `make test` use it.
SAM_VENV    := .venv-sam
SAM         := $(SAM_VENV)/bin/sam
SAM_VERSION := 1.170.0
SAM_STAMP   := $(SAM_VENV)/.installed-$(SAM_VERSION)
BUILD_DIR   := .aws-sam/build
# The SnapStart variant of template.yaml (scripts/snapstart_template.py; docs/deploy.md "SnapStart"): generated,
# never committed. `make build SNAPSTART=1` builds from it; plain `make build` from template.yaml.
SNAPSTART_TEMPLATE := template-snapstart.yaml
BUILD_TEMPLATE     := $(if $(SNAPSTART),$(SNAPSTART_TEMPLATE),template.yaml)
export SAM_CLI_TELEMETRY := 0

.PHONY: run test unit reliability bench build validate lint typecheck clean screenshots docs docs-serve snapstart-template

# pytest-xdist: one worker per core (at most 4), each with its own local Runtime (tests/conftest.py). A test file
# runs whole on one worker (loadfile), so its module fixtures run once: the agents it adds to its worker's
# Runtime, and test_a2a_js.py's `npm ci` into tests/e2e/js (two at once in one folder would race). Files are
# handed out in collection order, the longest first (tests/conftest.py LONGEST_FIRST), not by test count.
XDIST := -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[local,dev]'
	touch $(STAMP)

run: $(STAMP)  ## Start the local Runtime on http://127.0.0.1:8080 (moto stands in for AWS)
	$(VENV)/bin/nylorun serve $(ARGS)

# The awslabs serverless rules (cfn-lint-serverless) on top of cfn-lint's own. Findings kept on purpose are
# suppressed per resource in template.yaml (Metadata cfn-lint ignore_checks, with the reason beside it).
CFN_LINT_SERVERLESS = $(VENV)/bin/cfn-lint -t template.yaml -a cfn_lint_serverless.rules

test: $(STAMP) $(SAM_STAMP)  ## Static checks (sam validate --lint, cfn-lint + serverless rules, ruff, mypy, the import ladder), the docs site (strict), then every test
	$(SAM) validate --lint --template template.yaml --region us-east-1
	$(CFN_LINT_SERVERLESS)
	$(VENV)/bin/ruff check layers local client examples functions tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

docs: $(STAMP)  ## Build the documentation site into site/ (strict: a broken link or a missing page fails)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Where `make docs-serve` listens (tests/e2e/test_doc_commands.py serves it on a free port).
DOCS_ADDR ?= 127.0.0.1:8000

docs-serve: $(STAMP)  ## Serve the documentation site on http://127.0.0.1:8000, rebuilt as you edit
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr $(DOCS_ADDR)

unit: $(STAMP)  ## The unit tier alone: in-memory adapters and plain objects, no moto, no HTTP (seconds)
	$(PY) -m pytest tests/unit -q

reliability: $(STAMP)  ## Fuzzing, crash injection, isolation, push faults, duplicate deliveries (also in `make test`)
	$(PY) -m pytest tests/reliability $(XDIST) $(PYTEST_ARGS)

bench: $(BENCH_STAMP)  ## Benchmarks (2 cores, under 10 min): prints a table, writes bench/results/latest.json
	@command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; } >/dev/null 2>&1 \
		|| echo "wrk could not be installed: the bench uses its Python load generator instead"
	$(PY) -m bench $(BENCH_ARGS)

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[local,dev,bench]'
	touch $(BENCH_STAMP)

# ---------------------------------------------------------------- AWS SAM: install, build, validate
$(SAM_STAMP):
	test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet --upgrade pip
	$(SAM_VENV)/bin/pip install --quiet aws-sam-cli==$(SAM_VERSION)
	touch $(SAM_STAMP)

# sam build runs the functions' runtime, python3.12, to install the layers (arm64 wheels, no containers);
# scripts/with-python3.12 finds it (a pyenv 3.12 too) or says how to get it.
build: $(SAM_STAMP) $(if $(SNAPSTART),$(SNAPSTART_TEMPLATE))  ## sam build (no containers), then precompiled bytecode in the artifacts (~0.8 s less cold start); SNAPSTART=1: the SnapStart variant
	@scripts/with-python3.12 sh -ec '$(SAM) build --template $(BUILD_TEMPLATE); \
	for dir in $(BUILD_DIR)/*/; do python3.12 -m compileall -q -f --invalidation-mode unchecked-hash "$$dir"; done; \
	echo "make build: $$(find $(BUILD_DIR) -name \*.pyc | wc -l) .pyc files for $$(find $(BUILD_DIR) -name \*.py | wc -l) .py files in $(BUILD_DIR)"'

validate: $(SAM_STAMP) $(SNAPSTART_TEMPLATE)  ## sam validate --lint (also in `make test`), and least privilege on the template as SAM transforms it; both templates
	$(SAM) validate --lint --template template.yaml --region us-east-1
	$(SAM_VENV)/bin/python tests/static/sam_iam_check.py template.yaml
	$(SAM) validate --lint --template $(SNAPSTART_TEMPLATE) --region us-east-1
	$(SAM_VENV)/bin/python tests/static/sam_iam_check.py $(SNAPSTART_TEMPLATE) ApiVersionStamp=validate

# A stdlib-only script: SAM CLI's venv runs it, as `make build` and `make validate` need that venv anyway.
$(SNAPSTART_TEMPLATE): template.yaml scripts/snapstart_template.py $(SAM_STAMP)
	$(SAM_VENV)/bin/python scripts/snapstart_template.py template.yaml $@

snapstart-template: $(SNAPSTART_TEMPLATE)  ## Write template-snapstart.yaml: template.yaml with SnapStart on the api function (docs/deploy.md)

lint: $(STAMP)  ## ruff, mypy and the import ladder (lint-imports), as `make test` runs them
	$(VENV)/bin/ruff check layers local client examples functions tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

screenshots: $(STAMP)  ## Drive the console (nylorun serve's /console) in headless Chromium: docs/images/console-*.png
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }
	$(PY) scripts/screenshots.py

typecheck: $(STAMP)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) $(SAM_VENV) .pytest_cache .aws-sam $(SNAPSTART_TEMPLATE)

# Two commands on a fresh machine: `make run` starts the local Runtime, `make test` runs every test.
# Both create .venv and install what they need.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[local,dev]'
	touch $(STAMP)

run: $(STAMP)  ## Start the local Runtime on http://127.0.0.1:8080 (moto stands in for AWS)
	$(VENV)/bin/nylorun serve $(ARGS)

test: $(STAMP)  ## Static checks of the template and state machines, then every test
	$(VENV)/bin/cfn-lint template.yaml
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check layers functions tests

typecheck: $(STAMP)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .aws-sam

# Every target bootstraps what it needs: a fresh machine runs `make demo` or
# `make test` and nothing else.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON_BOOT ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TF_CLI_CONFIG := .tfcli/terraformrc

.PHONY: help venv package package-check lint fmt-check tf-config test test-python test-terraform clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

$(STAMP): requirements-dev.txt lambda/pyproject.toml
	$(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e lambda
	touch $(STAMP)

venv: $(STAMP) ## create .venv with the pinned dependencies

package: $(STAMP) ## rebuild the reproducible Lambda zip and layer zip in package/
	$(PY) scripts/build_package.py

package-check: $(STAMP) ## fail when a committed zip (function, layer) differs from a fresh build
	$(PY) scripts/build_package.py --check

lint: $(STAMP) ## ruff and mypy --strict on lambda/
	$(VENV)/bin/ruff check lambda tests scripts demo benchmarks
	$(VENV)/bin/ruff format --check lambda tests scripts demo benchmarks
	cd lambda && ../$(VENV)/bin/mypy --strict dynamodb_outbox

fmt-check: ## terraform fmt -check -recursive
	terraform fmt -check -recursive

tf-config: $(STAMP) ## write a Terraform CLI config that uses the local provider mirror
	$(PY) scripts/tf_cli_config.py $(TF_CLI_CONFIG)

test-python: $(STAMP) ## unit and functional tests (moto in-process)
	$(PY) -m pytest tests/unit tests/functional

test-terraform: $(STAMP) ## validate, terraform test (mock provider) and an apply on a moto server
	$(PY) -m pytest tests/terraform

test: package-check lint fmt-check $(STAMP) ## the whole suite (what CI runs)
	$(PY) -m pytest

clean: ## remove the venv and Terraform working files
	rm -rf $(VENV) .tfcli .pytest_cache .mypy_cache .ruff_cache
	find . -name .terraform -type d -prune -exec rm -rf {} +

.PHONY: demo
demo: $(STAMP) ## examples/local on an in-process moto server, ORDERS orders (default 200) with faults, a report
	$(PY) -m demo.run_demo --orders $(or $(ORDERS),200)

.PHONY: bench
bench: $(STAMP) ## calls/event, CPU, sweeper reads, cold start, zip, WCU vs a baseline; writes benchmarks/results.json, docs/calls-per-event.png
	$(PY) -m benchmarks.run

.PHONY: soak
soak: $(STAMP) ## long fault-injection campaign, SOAK_EXAMPLES schedules (default 500); prints events, faults, losses
	HYPOTHESIS_PROFILE=soak SOAK_EXAMPLES=$(or $(SOAK_EXAMPLES),500) $(PY) -m pytest tests/reliability -q

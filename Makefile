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

.PHONY: help release venv checkov-venv clean-venv package package-check lint fmt-check validate tf-config test test-python test-terraform test-slow e2e clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

$(STAMP): requirements-dev.txt lambda/pyproject.toml
	$(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e lambda
	touch $(STAMP)

venv: $(STAMP) ## create .venv with the pinned dependencies

# No venv needed: scripts/release.py is standard library only.
release: ## tag vVERSION after checking a clean tree and that every version statement and CHANGELOG agree (make release VERSION=x.y.z)
	@test -n "$(VERSION)" || { echo "make release: set VERSION=x.y.z" >&2; exit 2; }
	$(PYTHON_BOOT) scripts/release.py "$(VERSION)"

# checkov pins boto3/botocore/networkx/packaging below requirements-dev.txt's,
# so it gets a venv of its own; tests/security/test_checkov.py runs it.
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

$(CHECKOV_STAMP): requirements-checkov.txt
	$(PYTHON_BOOT) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.txt
	touch $(CHECKOV_STAMP)

checkov-venv: $(CHECKOV_STAMP) ## create .venv-checkov with the pinned checkov (tests/security)

# The venv holding only dynamodb-outbox[testing], where docs/testing.md's testing
# section runs verbatim (tests/support/clean_venv.py; rebuilt only when its key
# changes). Built before the suite, like the other venvs, not inside its time.
clean-venv: $(STAMP) ## create .cache/clean-venv: the package and its testing extra, nothing else
	$(PY) -c "from tests.support.clean_venv import clean_venv_python; clean_venv_python()"

package: $(STAMP) ## rebuild the reproducible Lambda zip and layer zip in package/
	$(PY) scripts/build_package.py

package-check: $(STAMP) ## fail when a committed zip (function, layer) differs from a fresh build
	$(PY) scripts/build_package.py --check

lint: $(STAMP) ## ruff and mypy --strict on lambda/
	$(VENV)/bin/ruff check lambda tests scripts demo benchmarks examples
	$(VENV)/bin/ruff format --check lambda tests scripts demo benchmarks examples
	cd lambda && ../$(VENV)/bin/mypy --strict dynamodb_outbox

fmt-check: ## terraform fmt -check -recursive
	terraform fmt -check -recursive

validate: $(STAMP) ## terraform init + validate of the module, every examples/* and tests/e2e/stack (offline mirror)
	$(PY) -m pytest -q tests/terraform/test_terraform_static.py -k "validates or every_example"

tf-config: $(STAMP) ## write a Terraform CLI config that uses the local provider mirror
	$(PY) scripts/tf_cli_config.py $(TF_CLI_CONFIG)

test-python: $(STAMP) ## unit and functional tests (moto in-process)
	$(PY) -m pytest tests/unit tests/functional

test-terraform: $(STAMP) ## validate, terraform test (mock provider) and an apply on a moto server
	$(PY) -m pytest tests/terraform

test-slow: $(STAMP) $(CHECKOV_STAMP) ## the runs marked slow, outside make test's 5-minute budget (the transport switch with events flowing, examples/complete and examples/sns_fifo applied, checkov); .ci/run runs them after make test
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -m slow -n 4 --dist loadscope -v

e2e: $(STAMP) ## REAL AWS (billable): apply tests/e2e/stack, an order and a poison message through it, destroy; needs OUTBOX_E2E=1 and credentials
	$(PY) -m pytest tests/e2e -m e2e -v

# Workers for pytest-xdist. More than the 2 cores the suite is budgeted for:
# the emulator applies and the demo spend most of their time waiting (the AWS
# provider polls SQS for 25 s per queue), which other workers fill.
PYTEST_WORKERS ?= 6
# pytest runs with bytecode writes on even where the shell turns them off
# (PYTHONDONTWRITEBYTECODE): every worker collects the whole suite, and the
# rewritten test modules are then compiled once, not once per worker and run.

test: $(STAMP) $(CHECKOV_STAMP) clean-venv ## the whole suite (what CI runs), with the time of each stage
	@$(PY) scripts/timed_stages.py \
		"package-check=$(PY) scripts/build_package.py --check" \
		"lint=$(MAKE) --no-print-directory lint" \
		"fmt-check=terraform fmt -check -recursive" \
		"pytest=env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadscope"

clean: ## remove the venv and Terraform working files
	rm -rf $(VENV) $(CHECKOV_VENV) .tfcli .pytest_cache .mypy_cache .ruff_cache
	find . -name .terraform -type d -prune -exec rm -rf {} +

.PHONY: demo
demo: $(STAMP) ## examples/local on an in-process moto server, ORDERS orders (default 200) with faults, a report; ORDERING=fifo for the ordered path; REGIONS=2 for two regions of a global table, one lost and adopted
	$(PY) -m demo.run_demo --orders $(or $(ORDERS),200) $(if $(ORDERING),--ordering $(ORDERING)) $(if $(REGIONS),--regions $(REGIONS))

# The cold start is also timed on python3.13 (the module's default runtime): a
# small venv with the pinned boto3 and Powertools, built once (from pip's cache
# when offline). PYTHON313 is the interpreter it is made from.
PYTHON313 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python) $(shell command -v python3.13))
BENCH_PY313_DIR := benchmarks/.cache/python3.13
BENCH_PY313_STAMP := $(BENCH_PY313_DIR)/.installed

$(BENCH_PY313_STAMP): requirements-dev.txt
	@test -n "$(PYTHON313)" || { echo "make bench: no python3.13 found (set PYTHON313=/path/to/python3.13)" >&2; exit 1; }
	rm -rf $(BENCH_PY313_DIR)
	$(PYTHON313) -m venv $(BENCH_PY313_DIR)
	$(BENCH_PY313_DIR)/bin/python -m pip install --quiet --disable-pip-version-check -c requirements-dev.txt boto3 aws_lambda_powertools
	touch $@

.PHONY: bench
bench: $(STAMP) $(BENCH_PY313_STAMP) ## calls/event, CPU, sweeper reads, cold start (3.11, 3.13), zip, WCU vs the seed's publisher; writes benchmarks/results.json, docs/calls-per-event.png
	$(PY) -m benchmarks.run --write --cold-python $(BENCH_PY313_DIR)/bin/python

.PHONY: soak
soak: $(STAMP) ## long campaigns: fault injection (SOAK_EXAMPLES schedules, default 500) and >= 100,000 generated bad inputs; prints the figures
	HYPOTHESIS_PROFILE=soak SOAK_EXAMPLES=$(or $(SOAK_EXAMPLES),500) $(PY) -m pytest tests/reliability -q

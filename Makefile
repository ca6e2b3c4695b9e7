# squall: developer entry points.
#
#   make venv        create .venv (Python >= 3.11): exact versions from requirements.lock, then squall
#   make lock        refresh requirements.lock from pyproject.toml (uv pip compile; commit the result)
#   make lint        ruff check, ruff format --check and mypy over squall/, agents/, topology/
#   make test        unit + integration tests against a real broker (scripts/test.sh)
#   make kafka-up    start a local broker (Maven jars, KRaft) at kafka.bootstrap.servers (SECURE=1: TLS, SCRAM, ACLs)
#   make kafka-down  stop it
#   make demo        crawl a local test site end to end (SITE=... to pick one)
#   make bench       the whole-crawl benchmark's short profile: squall (WARC on, off) and Scrapy, one farm
#
# BOOTSTRAP=host:port overrides the broker address of kafka-up/kafka-down;
# PYTEST_ARGS are passed to pytest by `make test`.

SHELL := /bin/bash
.DEFAULT_GOAL := test

VENV := .venv
VENV_PY := $(VENV)/bin/python
STAMP := $(VENV)/.squall-installed
# The first python >= 3.11 on PATH (override: make venv PYTHON=/path/to/python3.12).
PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { command -v $$p; break; }; done)
BOOTSTRAP ?=
PYTEST_ARGS ?=
KAFKA_ARGS = $(if $(BOOTSTRAP),--bootstrap $(BOOTSTRAP),)

.PHONY: venv lock lint test kafka-up kafka-down kafka-status demo bench

venv: $(STAMP)

# Re-installs when pyproject.toml or the lock file is newer than the stamp.
$(STAMP): pyproject.toml requirements.lock
	@if [ ! -x "$(VENV_PY)" ]; then \
		if [ -z "$(PYTHON)" ]; then echo "make: need Python >= 3.11 on PATH (or PYTHON=...)" >&2; exit 1; fi; \
		echo "make: creating $(VENV) with $(PYTHON)"; \
		"$(PYTHON)" -m venv $(VENV); \
	fi
	$(VENV_PY) -m pip install -q --disable-pip-version-check -r requirements.lock
	$(VENV_PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	@touch $@

# The lock file: every dependency (with the test and dev extras) at an exact version, for any
# Python >= 3.11 (markers). Refresh it on purpose, run `make test`, commit it.
lock: venv
	$(VENV_PY) -m pip install -q --disable-pip-version-check uv
	$(VENV)/bin/uv pip compile pyproject.toml --extra test --extra dev --universal --python-version 3.11 \
		--custom-compile-command "make lock" --quiet -o requirements.lock

lint: venv
	scripts/lint.sh

# Lint first, then the tests whatever lint said; fails if either failed.
test: venv
	@scripts/lint.sh; lint=$$?; scripts/test.sh $(PYTEST_ARGS); tests=$$?; \
	if [ $$lint -ne 0 ]; then echo "make test: lint failed (scripts/lint.sh)" >&2; fi; \
	exit $$(( tests != 0 ? tests : lint ))

kafka-up: venv
	$(VENV)/bin/squall kafka up $(KAFKA_ARGS) $(if $(SECURE),--secure,)

kafka-down: venv
	$(VENV)/bin/squall kafka down $(KAFKA_ARGS)

kafka-status: venv
	$(VENV)/bin/squall kafka status $(KAFKA_ARGS)

# ------------------------------------------------------------------ demo
# demo: squall/tools/demo.py. Brings up the local broker if none answers at
# kafka.bootstrap.servers ($KAFKA_BOOTSTRAP_SERVERS overrides), serves a
# multi-host loopback site (SITE=DIR: a directory of HTML instead), crawls
# it with one worker, prints the summary, checks and WARC path, and stops
# what it started. DEMO_ARGS are passed on (e.g. DEMO_ARGS='--hosts 2 --delay 0.5').
# ------------------------------------------------------------------
DEMO_ARGS ?=
demo: venv
	$(VENV_PY) -m squall.tools.demo $(if $(SITE),--site $(SITE),) $(if $(BOOTSTRAP),--bootstrap $(BOOTSTRAP),) $(DEMO_ARGS)

# ------------------------------------------------------------------ bench
# bench: benchmarks/crawl.py's short profile, about two minutes on 2 shared
# cores: one farm of 100 hosts x 10 pages (3 same-host links and one
# cross-host link a page), delay 1 s (bound: 100 pages/s), one squall worker;
# one run (--runs 1) of squall with its WARC archive on, of squall with it
# off (--warc both: needs squall's warc.enabled key, else that row is left
# out and the report says so) and of Scrapy (installed once in
# ~/.cache/squall/bench-scrapy). Prints the table and the squall / Scrapy
# ratios. Starts its own broker on 127.0.0.1:$(BENCH_PORT) (not the tests'
# 19092, not 9092) and stops it, unless BOOTSTRAP=host:port names one.
# BENCH_ARGS are passed on, e.g. BENCH_ARGS='--json bench.json --history benchmarks/history.csv'.
# ------------------------------------------------------------------
BENCH_PORT ?= 19982
BENCH_ARGS ?=
bench: venv
	$(VENV_PY) benchmarks/crawl.py --name short --hosts 100 --pages 10 --delay 1 --workers 1 --runs 1 \
		--peer scrapy --warc both $(if $(BOOTSTRAP),--bootstrap $(BOOTSTRAP),--broker-port $(BENCH_PORT)) $(BENCH_ARGS)

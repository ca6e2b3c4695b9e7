# squall: developer entry points.
#
#   make venv        create .venv (Python >= 3.11) and install squall with test extras
#   make test        unit + integration tests against a real broker (scripts/test.sh)
#   make kafka-up    start a local broker (Maven jars, KRaft) at kafka.bootstrap.servers
#   make kafka-down  stop it
#   make demo        crawl a local test site end to end (SITE=... to pick one)
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

.PHONY: venv test kafka-up kafka-down kafka-status demo

venv: $(STAMP)

# Re-installs when pyproject.toml is newer than the stamp.
$(STAMP): pyproject.toml
	@if [ ! -x "$(VENV_PY)" ]; then \
		if [ -z "$(PYTHON)" ]; then echo "make: need Python >= 3.11 on PATH (or PYTHON=...)" >&2; exit 1; fi; \
		echo "make: creating $(VENV) with $(PYTHON)"; \
		"$(PYTHON)" -m venv $(VENV); \
	fi
	$(VENV_PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $@

test: venv
	scripts/test.sh $(PYTEST_ARGS)

kafka-up: venv
	$(VENV)/bin/squall kafka up $(KAFKA_ARGS)

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
	$(VENV_PY) -m squall.tools.demo $(if $(SITE),--site $(SITE),) $(DEMO_ARGS)

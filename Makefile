# Two commands: `make run` (set up and serve) and `make test` (set up and check everything).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml clients/python/pyproject.toml | sha256sum | cut -c1-12)
SERVE_STAMP := $(VENV)/.serves-$(shell sha256sum pyproject.toml | cut -c1-12)
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15
# pytest-xdist processes for the suite: most of its time is spent waiting on the served stacks,
# sandboxes and browsers it starts, so more than the cores. Each has its own Redis database
# (TEST_REDIS_URL's for the first, one lower for each further one) and var directory
# (tests/workers.py).
TEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder  # tests/conftest.py

.PHONY: run test lint typecheck bench docs-screenshots install system-deps clean

# Serving needs the service's own dependencies only; the development extras (pytest, Playwright,
# mypy, moto, ...) and the agent client come with `make test`.
$(SERVE_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	rm -f $(VENV)/.serves-*
	touch $(SERVE_STAMP)

$(STAMP): $(SERVE_STAMP) clients/python/pyproject.toml
	$(PY) -m pip install --quiet -e '.[dev]' -e clients/python
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

# bubblewrap runs the verifier sandbox; the tests also need chromium (browser tests),
# busybox-static (a tiny root filesystem for the sandbox's image mode), python3-pytest (real
# pytest inside the sandbox, for the report profiles' tests), nginx-light (the reverse proxy
# of docs/deployment.md, run by its test) and prometheus (the server that scrapes the served
# stack in tests/integration/test_metrics.py). Installed when missing.
system-deps:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	if [ "$(FOR_TESTS)" = 1 ]; then \
	  command -v chromium >/dev/null || missing="$$missing chromium"; \
	  test -x /usr/sbin/nginx || missing="$$missing nginx-light"; \
	  command -v systemd-analyze >/dev/null || missing="$$missing systemd"; \
	  command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	  test -x /bin/busybox || missing="$$missing busybox-static"; \
	  /usr/bin/python3 -c 'import pytest' 2>/dev/null || missing="$$missing python3-pytest"; \
	fi; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing:$$missing — install them with your package manager (e.g. apt-get install$$missing)"; exit 1; \
	  fi; \
	fi

run: $(SERVE_STAMP) system-deps
	$(PY) manage.py migrate --no-input -v 0
	$(PY) manage.py collectstatic --no-input -v 0
	$(PY) manage.py governor_bootstrap
	$(PY) manage.py governor_serve

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy governor reviews verification clients/python/src

test: install
	$(MAKE) --no-print-directory system-deps FOR_TESTS=1
	$(MAKE) --no-print-directory lint
	bash tests/harness_e2e/install.sh >/dev/null  # the pinned DeepSeek Harness, cached in ~/.cache
	GOVERNOR_TEST_REDIS_URL=$(TEST_REDIS_URL) $(PY) -m pytest $(PYTEST_PARALLEL) -q -m "not postgres"
	@echo "--- on PostgreSQL: the tests that need it, and what the two databases do differently ---"
	DATABASE_URL=$(TEST_DATABASE_URL) GOVERNOR_TEST_REDIS_URL=$(TEST_REDIS_URL) \
	  $(PY) -m pytest $(PYTEST_PARALLEL) -q -m "postgres or both_databases"

bench: install system-deps
	$(PY) -m bench

# The screenshots docs/reviewing.md shows, of the real pages (never written by `make test`).
docs-screenshots: install
	$(MAKE) --no-print-directory system-deps FOR_TESTS=1
	GOVERNOR_DOCS_IMG=docs/img GOVERNOR_TEST_REDIS_URL=$(TEST_REDIS_URL) \
	  $(PY) -m pytest -q tests/browser/test_docs_screenshots.py

clean:
	rm -rf $(VENV) var

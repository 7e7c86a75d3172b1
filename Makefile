# Two commands on a fresh machine with Python 3.11+:
#   make run   -> virtualenv, install, embedded PostgreSQL (unless DATABASE_URL is set), migrate,
#                 demo credentials, then the web server and the django-q2 cluster in the foreground
#   make test  -> the same set-up, then the whole test suite
#   make test-fast -> the same, without the slow end-to-end, browser and chaos tests (the inner loop)
#   make test-deep -> the whole suite with every property test's full count of examples
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
# The suite runs on TEST_WORKERS pytest-xdist workers, each with a database of its own; the tests
# that start processes or drive the browser keep to one worker per group (tests/conftest.py,
# docs/operations.md "Tests"). `make test` and `make test-fast` run the `ci` Hypothesis profile
# (a quarter of each property test's examples); `make test-deep` the full counts.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadgroup

.PHONY: run test test-fast test-deep lint setup migrate check clean-db bench screenshots evaluate model

$(VENV)/bin/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required (found %s); set PYTHON=python3.11" % sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Stamps make the install step a no-op until a requirements file changes.
$(VENV)/.runtime-installed: requirements.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@touch $@ $(VENV)/.runtime-installed

setup: $(VENV)/.runtime-installed

migrate: setup
	$(PY) manage.py migrate --no-input

# `make run` serves as production does, with DEBUG off (no debug page lists the URL patterns),
# plus what plain http on this machine needs; a secret key made once, kept in var/ (git ignores
# it). bootstrap_demo, for local runs only, runs before it with the default DEBUG on.
# tests/e2e/conftest.py starts the platform with RUN_ENV, read from here.
RUN_ENV := DEBUG=0 ALLOWED_HOSTS=127.0.0.1,localhost SECURE_SSL_REDIRECT=0 SESSION_COOKIE_SECURE=0 CSRF_COOKIE_SECURE=0 LOG_FORMAT=text

var/secret-key:
	@mkdir -p var && umask 077 && $(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(64))' > $@

run: migrate var/secret-key
	PORT=$(PORT) $(PY) manage.py bootstrap_demo
	$(RUN_ENV) SECRET_KEY="$$(cat var/secret-key)" PORT=$(PORT) $(PY) manage.py run_platform --host $(HOST) --port $(PORT)

check: setup
	$(PY) manage.py check

# Static checks: style, Django's system checks, missing migrations, and the import layers
# (.importlinter: an import that runs upward fails here).
lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) manage.py check --fail-level WARNING
	$(PY) manage.py makemigrations --check --dry-run

test: lint
	$(PY) -m pytest $(XDIST) --hypothesis-profile=ci $(PYTEST_ARGS)

test-fast: lint
	$(PY) -m pytest $(XDIST) --hypothesis-profile=ci -m "not e2e and not browser and not chaos" $(PYTEST_ARGS)

test-deep: lint
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# Every screenshot of the README and docs/ (docs/screenshots/), made again by the browser tests
# that take them (marked `screenshots`: tests/browser/conftest.py), in a few minutes. They drive
# Debian's Chromium: without it they would be skipped and the old pictures kept, so this fails.
screenshots: $(VENV)/.dev-installed
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ echo "no Chromium installed: apt-get install chromium"; exit 1; }
	UPDATE_SCREENSHOTS=1 $(PY) -m pytest -m screenshots tests/browser $(PYTEST_ARGS)

# The benchmarks (bench/, docs/benchmarks.md): figures printed, nothing asserted. They use
# databases of their own, named after BENCH_DATABASE (default moderation_bench), on the
# DATABASE_URL server (the embedded one if unset), and Redis at BENCH_REDIS_URL (default db 15).
# bench.shipped prints issue 51's figures: the platform as make run starts it (docs/benchmarks.md).
# bench.report prints issue 17's table: the code before it (the tag bench-now, exported to a temp
# directory) and this checkout, measured in the same run; it installs wrk (apt-get) if missing.
# Growth and the workplace run at two sizes here to keep `make bench` near 25 minutes;
# BENCH_SIZES=10000,1000000 measures the issue's 10k -> 1M (seeding 1M takes minutes each).
BENCH_SIZES ?= 10000,100000
BENCH_REPORT_ARGS ?=
bench: $(VENV)/.dev-installed
	$(PY) -m bench.shipped
	$(PY) -m bench.report $(BENCH_REPORT_ARGS)
	$(PY) -m bench.growth --sizes $(BENCH_SIZES) --rounds 3
	$(PY) -m bench.workplace --sizes $(BENCH_SIZES) --rounds 2

# The default model (docs/model-card.md): trained, calibrated and measured from the data committed
# in training/ (fixed seeds: the same data gives the same moderation/data/local_model.npz), its
# held-out split written to training/heldout/ for `make evaluate`, its figures to training/last-run.txt.
# About a minute on one core.
model: $(VENV)/.dev-installed
	@$(PY) -m training.train > training/last-run.txt 2>&1; status=$$?; cat training/last-run.txt; exit $$status

# The active policy measured with the local model on each held-out labelled set (docs/operations.md,
# "Measuring a policy"): every .csv and .jsonl in training/heldout/, or the files in EVALUATE_DATA.
# Each one's figures go to var/evaluation/<file>.json.
EVALUATE_DATA ?= $(sort $(wildcard training/heldout/*.csv training/heldout/*.jsonl))
evaluate: migrate
	@test -n "$(strip $(EVALUATE_DATA))" || { echo "make evaluate: no labelled sets (training/heldout/*.csv or *.jsonl; or EVALUATE_DATA=FILE...)"; exit 2; }
	@mkdir -p var/evaluation
	@for data in $(EVALUATE_DATA); do \
		echo "== $$data"; \
		$(PY) manage.py evaluate_policy --data "$$data" --provider local --json "var/evaluation/$$(basename "$$data").json" || exit 1; \
	done

# Stops the embedded PostgreSQL started for a run without DATABASE_URL (its data stays in ./var).
clean-db: setup
	$(PY) -m config.embedded_db stop

# One command to run the portal, one to test it (see README.md).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-deps bench lint install migrate worker clean

$(BIN)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

install: $(BIN)/.installed

migrate: install
	$(BIN)/python manage.py migrate --noinput

## run: embedded defaults (SQLite, in-process Celery, demo data); serves on http://$(HOST):$(PORT)
run: migrate
	$(BIN)/python manage.py load_demo
	$(BIN)/python manage.py ensure_demo_admin
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

## test-deps: the real parts the tests start (Debian's prometheus and chromium), installed when missing
test-deps:
	@for script in .ci/setup.d/*.sh; do bash "$$script"; done

## test: the whole suite (SQLite by default; DATABASE_URL=postgres://... for PostgreSQL)
test: install test-deps
	$(BIN)/pytest $(PYTEST_ARGS)

## bench: benchmarks, printed as a table and written to bench/results.json
bench: install test-deps
	$(BIN)/python -m bench

lint: install
	$(BIN)/ruff check .

worker: install
	$(BIN)/celery -A config worker -Q default,sync --loglevel=INFO

clean:
	rm -rf $(VENV) db.sqlite3 staticfiles

# One command to run the portal, one to test it (see README.md).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
GATEWAY_PORT ?= 8001

.PHONY: run test test-deps control-plane bench lint install migrate worker clean assets

$(BIN)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

install: $(BIN)/.installed

migrate: install
	$(BIN)/python manage.py migrate --noinput

## run: the demo on http://$(HOST):$(PORT) (embedded defaults: SQLite, in-process Celery). With Go
## installed it is live: a local Kubernetes control plane (kwok GPU nodes), the watcher, the gateway
## on $(GATEWAY_PORT) and a demo model server (docs/demo.md); without Go, snapshot data. Ctrl-C stops all.
## GITOPS=1: also a local Gitea and Flux applying its repository to the cluster (docs/demo.md, GitOps).
run: migrate
	$(BIN)/python manage.py run_demo --host $(HOST) --port $(PORT) --gateway-port $(GATEWAY_PORT) $(if $(GITOPS),--gitops)

## test-deps: the real parts the tests start, installed and started when missing: PostgreSQL and
## Redis (started on loopback), Prometheus, Chromium (Debian packages), and the Kubernetes control
## plane, Helm, the tests' OpenID Provider, Gitea and Flux's controllers built from the pinned Go
## modules in tools/kube-control-plane, tools/helm, tools/oidc-provider, tools/gitea and tools/flux,
## and KEDA's CRDs taken from its pinned Go module by tools/keda (all cached by hash)
test-deps:
	for script in .ci/setup.d/*.sh; do bash "$$script"; done  # apt-get install postgresql redis-server prometheus chromium, when missing
	bash .ci/start-services.sh
	@# exit 2: no Go toolchain here; the cluster tests then skip with that reason (CI fails them)
	bash tools/kube-control-plane/build.sh >/dev/null || test $$? -eq 2
	bash tools/helm/build.sh >/dev/null || test $$? -eq 2
	bash tools/oidc-provider/build.sh >/dev/null || test $$? -eq 2  # the tests' OpenID Provider (zitadel/oidc), cached by hash
	bash tools/keda/build.sh >/dev/null || test $$? -eq 2  # KEDA's CRDs (github.com/kedacore/keda/v2), cached by hash
	bash tools/gitea/build.sh >/dev/null || test $$? -eq 2  # the GitOps tests' forge (issue 45), cached by hash
	bash tools/flux/build.sh >/dev/null || test $$? -eq 2  # Flux's source and kustomize controllers, cached by hash

## test: the whole suite on PostgreSQL (DATABASE_URL overrides; sqlite:///... works without the server), in
## PYTEST_WORKERS processes (pytest-xdist; most tests wait on real processes, so 3 fit 2 cores: docs/operations.md)
PYTEST_WORKERS ?= 3
test: export DATABASE_URL ?= postgres://postgres:postgres@127.0.0.1:5432/test
test: export REDIS_URL ?= redis://127.0.0.1:6379/15
test: install test-deps
	@# --durations: every run's log says where its minutes went (the slowest setups, calls and teardowns)
	@# worksteal: a worker out of tests takes half of a busy one's queue, so all end together
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal --durations=40 $(PYTEST_ARGS)

## bench: benchmarks, printed as a table and written to bench/results.json
bench: export DATABASE_URL ?= postgres://postgres:postgres@127.0.0.1:5432/test
bench: install test-deps
	@# the gateway figures' native backend, load generator and reference proxy (tools/go-build.sh, cached by hash)
	bash tools/fast-backend/build.sh >/dev/null
	bash tools/http-load/build.sh >/dev/null
	bash tools/reference-proxy/build.sh >/dev/null
	$(BIN)/python -m bench

## control-plane: build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
control-plane:
	bash tools/kube-control-plane/build.sh

## assets: rebuild the committed browser bundle static/editor/yaml-editor.js (CodeMirror 6, YAML, CRD
## completion) from assets/ with esbuild; the pinned npm packages are fetched here, never at run time
assets:
	cd assets && npm ci --no-audit --no-fund && npm run build

lint: install
	$(BIN)/ruff check .

worker: install
	$(BIN)/celery -A config worker -Q default,sync --loglevel=INFO

clean:
	rm -rf $(VENV) db.sqlite3 staticfiles

# Two commands do all setup: `make demo` and `make test`. Both create the venv on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# An index that cannot be reached must cost seconds, not minutes: pip's default retries with
# back-off and a long timeout per URL (some machines raise it to minutes through PIP_DEFAULT_TIMEOUT).
PIP := $(PY) -m pip --retries 2 --timeout 20
STAMP := $(VENV)/.kernelopt-installed

# PyTorch: with no NVIDIA GPU, its CPU build, installed the way PyTorch documents it: from its CPU
# index, pinned by the +cpu local version. PyPI has no +cpu build, so pip can never fall back to
# PyPI's multi-GB CUDA build (torch==X alone resolves to it, plus 15 nvidia-* packages). PyPI's
# wheels for macOS are CPU builds already. Override with TORCH_INSTALL='...' (pip arguments).
# torch is installed alone (--no-deps), then its dependencies from the default index: pip would
# otherwise ask PyTorch's index for each of them too, and with retries when it is slow or unreachable.
TORCH_VERSION ?= 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
ifneq ($(HAS_GPU),)
TORCH_INSTALL ?= torch
else ifeq ($(shell uname -s),Darwin)
TORCH_INSTALL ?= torch==$(TORCH_VERSION)
else
TORCH_INSTALL ?= --extra-index-url $(TORCH_CPU_INDEX) torch==$(TORCH_VERSION)+cpu
endif

# Tests: `make test` runs everything but the long end-to-end tests (marker `slow`), which
# `make test-slow` runs (CI runs `make test`). PYTEST_ARGS adds options, e.g. PYTEST_ARGS='-x -k gates'.
# --durations: every run names its slowest tests, so that a slow one is seen where it lands
PYTEST := $(PY) -m pytest -q -p no:cacheprovider --durations=15 --durations-min=20
PYTEST_ARGS ?=
# Two pytest workers (pytest-xdist), a test file per worker at a time so that module fixtures (compiled
# dumps, the gate corpus) are built once; TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
ifeq ($(TEST_WORKERS),0)
PARALLEL :=
else
# --no-loadscope-reorder: keep tests/conftest.py's order (longest files first); xdist would put the
# files with the most tests first, and the long few-test files then ran last on one worker.
PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
endif

.PHONY: all venv install demo test test-python test-slow test-vscode lint bench-parse clean torch-install-check

all: test

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	@echo "installing PyTorch: pip install --no-deps $(TORCH_INSTALL), then its dependencies"
	@$(PIP) install -q --no-deps $(TORCH_INSTALL) || { \
	  echo "make: could not install PyTorch ($(TORCH_INSTALL))." >&2; \
	  echo "  Without a GPU the CPU build comes from PyTorch's index $(TORCH_CPU_INDEX) (PyPI has only the" >&2; \
	  echo "  multi-GB CUDA build, which is never taken). Check that the index is reachable, or give pip a CPU" >&2; \
	  echo "  wheel you have: make TORCH_INSTALL='--find-links DIR torch==$(TORCH_VERSION)+cpu' (or the .whl path)." >&2; \
	  exit 1; }
	$(PIP) install -q torch "triton>=3.1"
	$(PIP) install -q -e ".[dev]"
	touch $(STAMP)
	$(USAGE_HINT)

install: venv

# What pip would install for PyTorch, without installing it: the CPU wheel and where it comes from.
torch-install-check: venv
	@report=$$(mktemp); trap 'rm -f $$report' EXIT; \
	$(PIP) install --dry-run --ignore-installed --no-deps --report $$report -q $(TORCH_INSTALL) && \
	$(PY) -c "import json,sys; [print('would install', i['metadata']['name'], i['metadata']['version'], 'from', \
	  i['download_info']['url']) for i in json.load(open(sys.argv[1]))['install']]" $$report

# How to use the tool afterwards: `kernelopt` is in the venv, not on PATH.
USAGE_HINT := @echo "kernelopt is installed in $(VENV)/bin: run 'source $(VENV)/bin/activate' once per shell, \
then 'kernelopt -h' (or call $(VENV)/bin/kernelopt directly; README.md, 'Using it')"

demo: venv
	$(VENV)/bin/kernelopt demo --out demo-out
	$(USAGE_HINT)

# A job run beside the tests: niced, in its own process group where setsid exists (not on macOS).
SIDE_JOB := $(shell command -v setsid >/dev/null 2>&1 && echo setsid -w) nice -n 10
RUFF := $(VENV)/bin/ruff check kernelopt_core kernelopt server tests benchmarks
MYPY := $(VENV)/bin/mypy

lint: venv
	$(RUFF)
	$(MYPY)

# ruff first (under a second); mypy (30-50 s on a clean clone, mostly one core) runs beside pytest, niced
# so that pytest's two workers keep the cores they need, and its output follows pytest's. Either failing
# fails the target. Each side job has its own process group, ended when the recipe ends (Ctrl-C too).
test-python: venv
	$(RUFF)
	@mypy_log=$$(mktemp "$${TMPDIR:-/tmp}/kernelopt-mypy.XXXXXX"); \
	$(SIDE_JOB) $(MYPY) >"$$mypy_log" 2>&1 </dev/null & mypy_pid=$$!; \
	trap 'kill -- -$$mypy_pid 2>/dev/null || kill $$mypy_pid 2>/dev/null; rm -f "$$mypy_log"' EXIT; \
	echo "$(MYPY): started beside pytest (its output follows pytest's)"; \
	pytest_status=0; $(PYTEST) -m "not slow" $(PARALLEL) $(PYTEST_ARGS) || pytest_status=$$?; \
	mypy_status=0; wait $$mypy_pid || mypy_status=$$?; \
	echo "$(MYPY):"; cat "$$mypy_log"; \
	[ $$mypy_status = 0 ] || echo "make test-python: mypy FAILED (exit $$mypy_status)"; \
	[ $$pytest_status = 0 ] && [ $$mypy_status = 0 ]

test-slow: venv
	$(PYTEST) -m slow $(PARALLEL) $(PYTEST_ARGS)

NPM ?= npm
test-vscode:
	@if command -v $(NPM) >/dev/null 2>&1 && [ -f client-vscode/package.json ]; then \
	  cd client-vscode && $(NPM) ci --no-audit --no-fund && $(NPM) run build && $(NPM) test && $(NPM) run package; \
	else echo "test-vscode: npm or client-vscode/package.json missing; skipped"; fi

# The extension in a real VS Code (code-server) driven through a real browser (Debian's chromium): its
# setup (Node 24, code-server, playwright-core, chromium) comes from npm and Debian and is cached under
# ~/.cache/kernelopt-vscode-host (KERNELOPT_VSCODE_HOST_CACHE). Screenshots: client-vscode/host-test/out/.
# See client-vscode/host-test/README.md. The time limit is a backstop for a hung browser or host.
.PHONY: test-vscode-host vscode-host-setup
VSCODE_HOST_TIMEOUT ?= 3000
test-vscode-host: venv
	timeout --kill-after=30 $(VSCODE_HOST_TIMEOUT) bash client-vscode/host-test/run.sh

# The setup alone (test-vscode-host runs it too): .ci/run starts it while `make test` runs.
vscode-host-setup:
	bash client-vscode/host-test/setup.sh

# Both parts run whatever the other's outcome; the last lines say how each went. The extension's part
# (npm ci, build, tests, package: ~50 s, much of it download and disk) runs beside the Python part, niced,
# and its output follows the Python part's.
test: venv
	@python_status=0; vscode_status=0; \
	vscode_log=$$(mktemp "$${TMPDIR:-/tmp}/kernelopt-test-vscode.XXXXXX"); \
	$(SIDE_JOB) $(MAKE) --no-print-directory test-vscode >"$$vscode_log" 2>&1 </dev/null & vscode_pid=$$!; \
	trap 'kill -- -$$vscode_pid 2>/dev/null || kill $$vscode_pid 2>/dev/null; rm -f "$$vscode_log"' EXIT; \
	echo "make test: the VS Code extension's build and tests started beside the Python tests (their output follows)"; \
	$(MAKE) --no-print-directory test-python || python_status=$$?; \
	wait $$vscode_pid || vscode_status=$$?; \
	echo "make test-vscode:"; cat "$$vscode_log"; \
	verdict() { [ "$$1" = 0 ] && echo passed || echo "FAILED (exit $$1)"; }; \
	echo "make test: python (ruff + mypy + pytest -m 'not slow'): $$(verdict $$python_status)"; \
	if command -v $(NPM) >/dev/null 2>&1; then vscode_verdict=$$(verdict $$vscode_status); \
	else vscode_verdict="SKIPPED: $(NPM) not found (install Node.js 20 with npm to test the extension)"; fi; \
	echo "make test: vscode extension (build + tests + package): $$vscode_verdict"; \
	[ $$python_status = 0 ] && [ $$vscode_status = 0 ]

bench-parse: venv
	$(PY) benchmarks/parse_speed.py

clean:
	rm -rf $(VENV) demo-out .pytest_cache

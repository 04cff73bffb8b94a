# Two commands do all setup: `make demo` and `make test`. Both create the venv on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# With no NVIDIA GPU, take PyTorch's CPU wheel: a bare `torch` requirement pulls a multi-GB CUDA build.
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
TORCH_SPEC ?= $(if $(HAS_GPU),torch,torch==2.13.0)
STAMP := $(VENV)/.kernelopt-installed

.PHONY: all venv install demo test test-python test-vscode lint bench-parse clean

all: test

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH_SPEC)"
	$(PIP) install -q "triton>=3.1"
	$(PIP) install -q -e ".[dev]"
	touch $(STAMP)

install: venv

demo: venv
	$(VENV)/bin/kernelopt demo --out demo-out

lint: venv
	$(VENV)/bin/ruff check kernelopt_core kernelopt server tests benchmarks

test-python: venv lint
	$(PY) -m pytest -q -p no:cacheprovider

test-vscode:
	@if command -v npm >/dev/null 2>&1 && [ -f client-vscode/package.json ]; then \
	  cd client-vscode && npm ci --no-audit --no-fund && npm run build && npm test && npm run package; \
	else echo "test-vscode: npm or client-vscode/package.json missing; skipped"; fi

test: test-python test-vscode

bench-parse: venv
	$(PY) benchmarks/parse_speed.py

clean:
	rm -rf $(VENV) demo-out .pytest_cache

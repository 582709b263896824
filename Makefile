# Two commands do everything on a fresh machine with Python 3.10+:
#   make book   build the book into _build/html (creating .venv first if needed)
#   make test   unit tests, every notebook through nbval, and a strict book build
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Without an NVIDIA GPU, pin torch to its CPU build: an unpinned torch pulls several GB of CUDA
# wheels. Override with `make CONSTRAINTS= ...` to let pip choose.
CONSTRAINTS ?= $(if $(shell command -v nvidia-smi 2>/dev/null),,-c constraints-cpu.txt)
PYTEST_WORKERS ?= 2
# One torch thread per test worker: two workers with two threads each on two cores slow small
# training loops down many times over (oversubscription).
TEST_THREADS ?= 1
JB_FLAGS ?=

.PHONY: help env book book-strict test execute setup-cells student instructor clean

help:
	@echo "make book         build the book into _build/html"
	@echo "make test         unit tests + every notebook (nbval) + book build with warnings as errors"
	@echo "make execute      re-run every notebook in place and store its outputs (NB=path for one)"
	@echo "make student      write the student edition (no solutions) into editions/student"
	@echo "make instructor   write the full edition into editions/instructor"
	@echo "make setup-cells  rewrite each notebook's first (setup) cell from tools/notebook_setup.py"
	@echo "make clean        remove the build (keeps .venv)"

# d2l is a test-time reference only, installed without its pinned numpy/matplotlib.
$(STAMP): requirements.txt requirements-dev.txt constraints-cpu.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(CONSTRAINTS) -r requirements-dev.txt -e .
	$(BIN)/python -m pip install -q --no-deps d2l==1.0.3
	@touch $@

env: $(STAMP)

book: $(STAMP)
	$(BIN)/jupyter-book build . $(JB_FLAGS)
	@echo "The book is built. Open: _build/html/index.html"

# A fresh, strict build: every page re-read, every Sphinx warning an error.
book-strict: $(STAMP)
	$(BIN)/jupyter-book build . --all -W -n --keep-going $(JB_FLAGS)

# The strict book build first, then one pytest run over the unit tests and every notebook.
test: book-strict
	$(BIN)/python -m tools.notebook_setup --check
	OMP_NUM_THREADS=$(TEST_THREADS) $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --nbval-lax --nbval-current-env tests chapters

execute: $(STAMP)
	$(BIN)/python -m tools.execute_notebooks $(NB)

student instructor: $(STAMP)
	rm -rf editions/$@
	$(BIN)/python -m tools.editions $@ --out editions/$@

setup-cells: $(STAMP)
	$(BIN)/python -m tools.notebook_setup --write

clean:
	rm -rf _build

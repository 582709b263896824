# Two commands do everything on a fresh machine with Python 3.10+, Node.js/npm and make:
#   make book   build the book into _build/html (creating .venv and the web assets first if needed)
#   make test   lint, a strict book build, unit tests, every notebook through nbval at the quick
#               budget (ATTN_UTILS_QUICK=1), and the browser test of every built page (installs
#               Debian's Chromium if it is missing)
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
# make test-gpu runs with a Python that already has CUDA torch and the test tools (no environment is
# made): PY=python3 names it; GPU_WORKERS pytest workers share the GPU.
PY ?= $(BIN)/python
GPU_WORKERS ?= 4

WEB := tools/web
WEB_STAMP := $(WEB)/node_modules/.installed
CHROMIUM ?= chromium

.PHONY: help env web-assets browser check-site lint format book book-strict test test-gpu execute setup-cells student instructor words clean

help:
	@echo "make book         build the book into _build/html"
	@echo "make test         lint + book build with warnings as errors + unit tests + every notebook (nbval)"
	@echo "                  + the browser test of every page"
	@echo "make test-gpu     on a CUDA machine, with its own Python (PY=python3): the unit tests, CUDA variants"
	@echo "                  included, and every notebook at the quick budget with the device forced to CUDA"
	@echo "make lint         ruff over attn_utils, tests, tools, benchmarks and the notebooks;"
	@echo "                  actionlint (with ShellCheck) over the GitHub workflows"
	@echo "make check-site   the browser test alone, on the book as last built"
	@echo "make execute      re-run every notebook at the book budget and store its outputs (NB=path for one)"
	@echo "make student      write the student edition (no solutions) into editions/student"
	@echo "make instructor   write the full edition into editions/instructor"
	@echo "make words        print each notebook's prose word count (at most 4,500; a test holds it)"
	@echo "make format       ruff format the notebooks' code (88 characters a line), solution blocks with it"
	@echo "make setup-cells  rewrite each notebook's first (setup) cell from tools/notebook_setup.py"
	@echo "make clean        remove the build (keeps .venv)"

# d2l is a test-time reference only, installed without its pinned numpy/matplotlib.
$(STAMP): requirements.txt requirements-dev.txt constraints-cpu.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --no-compile $(CONSTRAINTS) -r requirements-dev.txt -e .
	$(BIN)/python -m pip install -q --no-deps d2l==1.0.3
	@touch $@

env: $(STAMP)

# MathJax and the widget manager, from the npm registry at the versions in package-lock.json, copied
# into _build/web_assets: the built pages load them from there, so the book reads offline.
$(WEB_STAMP): $(WEB)/package.json $(WEB)/package-lock.json
	@command -v npm >/dev/null || { echo "npm is needed to install MathJax and the widget manager (Debian: apt-get install npm)"; exit 1; }
	npm ci --prefix $(WEB) --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

web-assets: $(STAMP) $(WEB_STAMP)
	$(BIN)/python -m tools.web_assets

# The browser test drives Debian's Chromium (never a downloaded browser build); CHROMIUM=... names
# another installed Chromium-based browser (e.g. google-chrome on GitHub's runners).
browser:
	@command -v $(CHROMIUM) >/dev/null || { echo "Installing Debian's chromium for the browser test"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends chromium; }

# The browser test alone, on the book as last built (make test runs it with everything else).
check-site: browser
	CHROMIUM=$$(command -v $(CHROMIUM)) $(BIN)/python -m pytest -q tests/test_browser.py

# actionlint checks the workflows (syntax, expressions, action inputs and versions) and their run: steps
# with the environment's own ShellCheck, never whichever one is on PATH, and without pyflakes (no step
# runs Python as its shell): the same findings on every machine.
lint: $(STAMP)
	$(BIN)/ruff check attn_utils tests tools benchmarks chapters
	$(BIN)/python -m tools.format_notebooks --check
	$(BIN)/actionlint -shellcheck=$(BIN)/shellcheck -pyflakes= .github/workflows/*.yml

format: $(STAMP)
	$(BIN)/python -m tools.format_notebooks

book: web-assets
	$(BIN)/jupyter-book build . $(JB_FLAGS)
	@echo "The book is built. Open: _build/html/index.html"

# A fresh, strict build: every page re-read, every Sphinx warning an error.
book-strict: web-assets
	$(BIN)/jupyter-book build . --all -W -n --keep-going $(JB_FLAGS)

# Lint and the strict book build first, then one pytest run over the unit tests, every notebook and
# the browser test of the pages just built (tests/test_browser.py).
test: lint book-strict browser
	$(BIN)/python -m tools.notebook_setup --check
	ATTN_UTILS_QUICK=1 CHROMIUM=$$(command -v $(CHROMIUM)) OMP_NUM_THREADS=$(TEST_THREADS) $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --nbval-lax --nbval-current-env tests chapters

# The GPU path: every unit test (the cuda variants run instead of skipping) and every notebook at the
# quick budget with ATTN_UTILS_DEVICE=cuda, in the Python named by PY, installing nothing: for a GPU
# machine that has torch and the test tools but may have no network. No lint, book build or browser
# test: those do not depend on the device, and make test runs them.
test-gpu:
	@$(PY) -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else \
	  'make test-gpu needs a CUDA GPU, and torch ' + torch.__version__ + ' in ' + sys.executable + ' sees none')"
	$(PY) -c "import torch; print('testing on', torch.cuda.get_device_name(0), 'with torch', torch.__version__)"
	ATTN_UTILS_QUICK=1 ATTN_UTILS_DEVICE=cuda $(PY) -m pytest -n $(GPU_WORKERS) --dist loadfile --nbval-lax \
	  --nbval-current-env tests chapters --ignore=tests/test_browser.py -rs

# The book budget, whatever the environment says: these are the outputs the book shows.
execute: $(STAMP)
	ATTN_UTILS_QUICK=0 $(BIN)/python -m tools.execute_notebooks $(NB)

student instructor: $(STAMP)
	rm -rf editions/$@
	$(BIN)/python -m tools.editions $@ --out editions/$@

words: $(STAMP)
	$(BIN)/python -m tools.word_count

setup-cells: $(STAMP)
	$(BIN)/python -m tools.notebook_setup --write

clean:
	rm -rf _build

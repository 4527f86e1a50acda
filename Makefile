# The book's commands. `make book` and `make test` are all a newcomer needs; both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
BOOK_FLAGS := -W -n --keep-going --all
PORT ?= 8000
# jupyter-cache re-runs a notebook when its code changes, but it cannot see the code the notebooks import.
# When gpukit or the pinned versions change, every cached output may be stale: drop the cache.
EXECUTION_CACHE := _build/.jupyter_cache
CACHE_MATCHES := _build/.cache-matches-gpukit
# Kernels started by the build and the tests keep their state inside the project, not in $HOME.
export MPLCONFIGDIR := $(CURDIR)/_build/cache/matplotlib
export IPYTHONDIR := $(CURDIR)/_build/cache/ipython

.PHONY: setup system-packages state-dirs book serve test lint bench clean help

help:
	@echo "make book   - set up .venv and build the book into _build/html"
	@echo "make test   - set up .venv and run every test (lint, package, notebooks, offline build, browser)"
	@echo "make serve  - serve _build/html on http://127.0.0.1:$(PORT)"
	@echo "make lint   - ruff over the package, tests, _ext and scripts (120 columns) and the notebooks (88)"
	@echo "make setup  - install missing system packages (scripts/system-packages.sh), then set up .venv"
	@echo "make bench  - time the pipeline (clean build, cached rebuild, one-notebook rebuild, tests)"
	@echo "make clean  - remove _build (keeps .venv)"

setup: system-packages $(INSTALLED)

# Runs on every make that sets up .venv: it only probes for commands, and calls apt-get when one is missing.
system-packages:
	@PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/system-packages.sh

# Order-only: creating .venv needs python3-venv first, but a run of the system step must not force a reinstall.
$(INSTALLED): requirements.txt pyproject.toml | system-packages
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (NumPy 2.4 and pandas 3 require it); run make with PYTHON=/path/to/python3.x")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -r requirements.txt -e .
	@touch $@

state-dirs:
	@mkdir -p $(MPLCONFIGDIR) $(IPYTHONDIR)

$(CACHE_MATCHES): $(wildcard gpukit/*.py) requirements.txt
	@if [ -d $(EXECUTION_CACHE) ]; then echo "gpukit or requirements.txt changed: clearing the execution cache"; fi
	@rm -rf $(EXECUTION_CACHE)
	@mkdir -p $(@D) && touch $@

book: setup state-dirs $(CACHE_MATCHES)
	$(BIN)/python scripts/execute_notebooks.py
	$(BIN)/jupyter-book build . $(BOOK_FLAGS)
	@echo
	@echo "The book is in _build/html (open _build/html/index.html). To view it: make serve"

serve:
	@test -f _build/html/index.html || { echo "No book built yet: run 'make book' first."; exit 1; }
	@echo "Serving the book on http://127.0.0.1:$(PORT) (Ctrl-C stops it)"
	$(BIN)/python -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html

# Notebooks are read on narrow pages and in side-by-side diffs, so they are held to 88 columns, not 120.
lint: setup
	$(BIN)/ruff check gpukit tests _ext scripts
	$(BIN)/ruff check --line-length 88 notebooks

test: lint state-dirs $(CACHE_MATCHES)
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python scripts/benchmark_pipeline.py

clean:
	rm -rf _build

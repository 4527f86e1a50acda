# The book's commands. `make book` and `make test` are all a newcomer needs; both set up .venv first.
PYTHON ?= python3
# torch.compile and torch's extension builder hand torch's own folder to the compiler unquoted, so the Python
# environment must sit at a path without spaces, quotes or other shell syntax. Where the clone's path is plain
# that is .venv inside it; elsewhere ("~/GPU Workshop/gpu-python") a private folder of the user's cache named
# after the clone, with .venv a link to it (activating .venv/bin/activate or running its commands works).
PLAIN_PATH := '^[A-Za-z0-9_./+@-]+$$'
CLONE_ID := $(shell pwd | cksum | cut -d' ' -f1)
ifeq ($(shell pwd | LC_ALL=C grep -qE $(PLAIN_PATH) && echo yes),yes)
VENV := .venv
else
VENV := $(shell d="$${XDG_CACHE_HOME:-$$HOME/.cache}/gpukit/venv-$(CLONE_ID)"; \
	printf '%s' "$$d" | LC_ALL=C grep -qE $(PLAIN_PATH) && echo "$$d" || echo /tmp/gpukit-venv-$(CLONE_ID))
endif
BIN := $(VENV)/bin
BOOK_FLAGS := -W -n --keep-going --all
PORT ?= 8000
LAB_PORT ?= 8888
# GPU additions installed on top (requirements/<GPU>.txt, gpukit's extra of that name): empty for a CPU or a
# Mac; cuda13 on an NVIDIA driver 580 or newer; cuda12 on an older one (525+), whose torch comes from
# PyTorch's own wheel index. `python -m gpukit doctor --gpu` says which one a node needs.
# Only a value on the command line counts: some clusters export a variable named GPU for their own use.
ifneq ($(origin GPU),command line)
GPU :=
endif
ifeq ($(filter-out cuda13 cuda12,$(GPU)),)
else
$(error GPU=$(GPU) is not one of: (empty), cuda13, cuda12)
endif
comma := ,
GPU_EXTRA := $(if $(GPU),$(comma)$(GPU))
LOCK := requirements/lock.txt
REQUIREMENTS := pyproject.toml $(wildcard requirements/*.txt)
# requirements/lock.txt pins every package for every platform (scripts/platforms.py resolves it). The CUDA 12
# stack cannot use it: its torch comes from PyTorch's index, whose CUDA 12 libraries the lock cannot know.
ifeq ($(GPU),cuda12)
PIP_SOURCES := --extra-index-url https://download.pytorch.org/whl/cu129
else
PIP_SOURCES := -c $(LOCK)
endif
# jupyter-cache re-runs a notebook when its code changes, but it cannot see the code the notebooks import.
# When gpukit or the pinned versions change, every cached output may be stale: drop the cache.
EXECUTION_CACHE := _build/.jupyter_cache
CACHE_MATCHES := _build/.cache-matches-gpukit
# Kernels started by the build and the tests keep their state inside the project, not in $HOME. The folders
# are quoted wherever the shell sees them: the clone may sit in a folder whose name has spaces.
export MPLCONFIGDIR := $(CURDIR)/_build/cache/matplotlib
export IPYTHONDIR := $(CURDIR)/_build/cache/ipython

# `make test LESSON=03`: one lesson's tests (conftest.py's --lesson picks them from these files): its notebook under
# nbval, its thin-kernel run, its exercises' checks, and its page in the site test (the hub session, which opens every
# lesson at once, stays in the whole `make test`).
# Only a value on the command line counts, as for GPU.
ifneq ($(origin LESSON),command line)
LESSON :=
endif
LESSON_NUMBERS := $(sort $(foreach path,$(wildcard notebooks/[0-9][0-9]-*.ipynb),$(firstword $(subst -, ,$(notdir $(path))))))
ifneq ($(LESSON),)
LESSON_NOTEBOOK := $(wildcard notebooks/$(LESSON)-*.ipynb)
ifneq ($(words $(LESSON_NOTEBOOK)),1)
$(error LESSON=$(LESSON) is not a lesson; the lessons are: $(LESSON_NUMBERS))
endif
endif
TEST_SELECTION := $(if $(LESSON),--lesson $(LESSON) $(LESSON_NOTEBOOK) tests/lessons tests/exercises \
	tests/book/test_site.py tests/book/test_jupyterhub.py)

.PHONY: setup state-dirs book serve lab lessons test check lint bench gpu-check wheelhouse lesson clean help

help:
	@echo "make book   - set up .venv and build the book into _build/html"
	@echo "make test   - set up .venv and run every test (lint, package, notebooks, offline build, browser)"
	@echo "make test LESSON=03 - one lesson's tests: it under nbval and in the thin kernel, its exercises' checks, its"
	@echo "             tests in tests/lessons, its page in the site test (built from make book's cache: run make book"
	@echo "             first), in a minute or two"
	@echo "make check  - the quick loop, 80 to 140 s on 2 cores: lint, zizmor and every test that starts no server, executes"
	@echo "             no lesson, needs no network and is not slow (conftest.py says which: pytest --quick)"
	@echo "make serve  - serve _build/html on http://127.0.0.1:$(PORT)"
	@echo "make lab    - set up .venv and start JupyterLab on 127.0.0.1:$(LAB_PORT) as attendees get it (MyST rendered)"
	@echo "make lint   - ruff over gpukit, booktools, tests, _ext and scripts (120 columns) and the notebooks (88)"
	@echo "make setup  - install missing system packages (scripts/system-packages.sh), then set up .venv"
	@echo "make lessons GPU=cuda13 - the lessons' environment with a CUDA stack, nothing only the tests need (no root)"
	@echo "GPU=cuda13 or GPU=cuda12 after any of them adds that CUDA stack (python -m gpukit doctor --gpu says which)"
	@echo "make lesson NN=18 NAME=sparse-matrices - a new lesson's notebook, page, exercise, cases, notes and schedule row"
	@echo "make bench  - time the pipeline (clean build, cached rebuild, one-notebook rebuild, tests), phase by phase"
	@echo "make gpu-check - on a GPU node: the preflight, the lessons with no kept GPU run first, the GPU tests and the"
	@echo "             bench, within a budget (9 minutes); report in _build/gpu-check/<date>-<device>/"
	@echo "             GPU_CHECK_FLAGS=--save-run keeps each lesson as it passes in data/gpu-runs/: commit that"
	@echo "             folder, and make book builds their pages from it while their code is unchanged"
	@echo "             WHEELHOUSE=DIR installs what the node's Python lacks from DIR (no network, no root)"
	@echo "make wheelhouse WHEELHOUSE=DIR WHEEL_PLATFORM=linux-x86_64 WHEEL_PYTHON=3.12 - where there is network:"
	@echo "             the wheels make gpu-check needs on a GPU node without it (about 33 MB)"
	@echo "make clean  - remove _build (keeps .venv)"

# What each command installs into .venv, as gpukit's extras: `make book` the lessons and the book build;
# `make test` and `make setup` the tests too. A stamp per set, so each reinstalls only when its pins change.
STAMP := $(if $(GPU),-$(GPU))
setup: $(VENV)/.installed-test$(STAMP)

# The system tools each command needs, probed (apt-get only when one is missing; scripts/system-packages.sh):
# the book needs Python's venv alone, the tests need Chromium, Slurm, munge, Node.js and the rest.
system-packages-%:
	@PYTHON="$(PYTHON)" VENV="$(VENV)" bash scripts/system-packages.sh $*

# $(call install,EXTRAS): create .venv if needed, install gpukit (editable) with those extras, touch the stamp.
define install
	@"$(PYTHON)" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (NumPy 2.4 and pandas 3 require it); run make with PYTHON=/path/to/python3.x")'
	@test -x $(BIN)/python || "$(PYTHON)" -m venv $(VENV)
	@if [ "$(VENV)" = .venv ]; then :; elif [ -L .venv ] || [ ! -e .venv ]; then ln -sfn "$(VENV)" .venv && \
		echo "This folder's path has spaces or quotes, which torch's compilers cannot take: the environment is $(VENV) (.venv links to it)"; \
	else echo "This folder's path has spaces or quotes: the book uses the environment $(VENV), not the .venv folder here"; fi
	$(BIN)/python -m pip install --disable-pip-version-check $(PIP_SOURCES) -e ".[$(1)]"
	$(BIN)/python -m pip uninstall --disable-pip-version-check -y -q $(NOT_KEPT)
	@touch $@
endef
# jsonschema[format-nongpl] (which jupyter-events asks for) brings rfc3987-syntax, which builds 35 Earley parsers when
# it is imported: 1.4 s more in every Python that imports nbformat or a Jupyter server (each book build, notebook
# run, JupyterLab start and test worker), to check the "iri" formats that no schema of Jupyter's or the book's uses.
# Without it jsonschema leaves those two formats unchecked (tests/book/test_makefile.py).
NOT_KEPT := rfc3987-syntax

# Order-only: creating .venv needs python3-venv first, but a run of the system step must not force a reinstall.
$(VENV)/.installed-book$(STAMP): $(REQUIREMENTS) | system-packages-book
	$(call install,lessons$(comma)book$(GPU_EXTRA))

$(VENV)/.installed-test$(STAMP): $(REQUIREMENTS) | system-packages-test
	$(call install,lessons$(comma)lab$(comma)book$(comma)test$(comma)hub$(GPU_EXTRA))

# What a GPU node needs to run the lessons (and make gpu-check) with GPU=cuda13 or cuda12: the lessons' kernel, the
# attendee's JupyterLab and that CUDA stack, without the system packages only the tests need (Chromium, Slurm, ...),
# so that it installs without root. pip needs network to the package index (a login node has it).
lessons: $(VENV)/.installed-lab$(STAMP)
	@echo "The lessons' environment is $(VENV)$(if $(GPU), with the $(GPU) stack): activate it, or make lab, or make gpu-check"

# The attendee's JupyterLab: the lessons' kernel and the `lab` extra (jupyterlab-myst, nbgitpuller, the GPU dashboard).
$(VENV)/.installed-lab$(STAMP): $(REQUIREMENTS) | system-packages-book
	$(call install,lessons$(comma)lab$(GPU_EXTRA))

state-dirs:
	@mkdir -p "$(MPLCONFIGDIR)" "$(IPYTHONDIR)"

$(CACHE_MATCHES): $(wildcard gpukit/*.py gpukit/*/*.py) $(REQUIREMENTS)
	@if [ -d $(EXECUTION_CACHE) ]; then echo "gpukit or the pinned requirements changed: clearing the execution cache"; fi
	@rm -rf $(EXECUTION_CACHE)
	@mkdir -p $(@D) && touch $@

book: $(VENV)/.installed-book$(STAMP) state-dirs $(CACHE_MATCHES)
	$(BIN)/python scripts/execute_notebooks.py
	$(BIN)/jupyter-book build . $(BOOK_FLAGS)
	@echo
	@echo "The book is in _build/html (open _build/html/index.html). To view it: make serve"

serve:
	@test -f _build/html/index.html || { echo "No book built yet: run 'make book' first."; exit 1; }
	@echo "Serving the book on http://127.0.0.1:$(PORT) (Ctrl-C stops it)"
	$(BIN)/python -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html

# JupyterLab as an attendee meets it, for trying a lesson on a laptop: on 127.0.0.1 only, with the token it prints.
# jupyter-config/ holds the attendees' JupyterLab settings (labconfig/page_config.json switches the news pop-up off).
lab: $(VENV)/.installed-lab$(STAMP) state-dirs
	@echo "Starting JupyterLab on http://127.0.0.1:$(LAB_PORT)/lab (Ctrl-C stops it); the lessons are in notebooks/"
	JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-config" $(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.port=$(LAB_PORT) --ServerApp.port_retries=0 \
		--ServerApp.root_dir="$(CURDIR)"

# Notebooks are read on narrow pages and in side-by-side diffs, so they are held to 88 columns, not 120.
lint: setup
	$(BIN)/ruff check gpukit booktools tests _ext scripts
	$(BIN)/ruff check --line-length 88 notebooks
# The workflows run with a token and, for the GPU, on our own machine: held to zizmor's checks (offline, no API).
	$(BIN)/zizmor --offline .github/workflows

test: lint state-dirs $(CACHE_MATCHES)
	$(BIN)/python -m pytest $(TEST_SELECTION)

# The contributor's quick loop: no lesson executed, no server started, so no execution cache to keep current.
check: lint state-dirs
	$(BIN)/python -m pytest --quick tests

# A new lesson's files, each following the book's conventions, so that `make test LESSON=NN` passes at once
# (scripts/new_lesson.py says what it writes and what is left for the author).
lesson: setup
	@if [ -z "$(NN)" ] || [ -z "$(NAME)" ]; then \
		echo "usage: make lesson NN=18 NAME=sparse-matrices [TITLE=\"Sparse matrices on the GPU\"]" >&2; exit 2; fi
	$(BIN)/python scripts/new_lesson.py "$(NN)" "$(NAME)" $(if $(TITLE),--title "$(TITLE)")

bench: setup
	$(BIN)/python scripts/benchmark_pipeline.py

# The whole GPU run again (booktools/gpu_check.py): in the environment that is here, .venv where it exists, else
# $(PYTHON) (a cluster module's Python, say). It reaches no network. WHEELHOUSE=DIR (made by make wheelhouse) installs
# what that Python lacks from DIR into a private folder of the run, without root, leaving its own packages as they are.
# Options go in GPU_CHECK_FLAGS: make gpu-check GPU_CHECK_FLAGS="--budget 1200" (python -m booktools gpu-check -h).
# --save-run keeps each lesson as it passes as a GPU run in data/gpu-runs/<date>-<device>-<stack>/, which `make book`
# (scripts/execute_notebooks.py) builds their pages from while their code is unchanged (data/gpu-runs/README.md).
ifneq ($(origin WHEELHOUSE),command line)
WHEELHOUSE :=
endif
gpu-check: state-dirs
	@if [ -x $(BIN)/python ]; then python=$(BIN)/python; else python="$(PYTHON)"; fi; \
		"$$python" -m booktools gpu-check $(if $(WHEELHOUSE),--wheelhouse "$(WHEELHOUSE)") $(GPU_CHECK_FLAGS)

# On a machine with network, the wheels make gpu-check needs on a GPU node without it (scripts/wheelhouse.py): the
# Jupyter kernel, nbclient, the test tools, the lessons' small libraries and the book's NumPy, at the lock's versions,
# for the node's platform and Python. WHEEL_WITH="matplotlib pandas" adds those for a node whose Python lacks them.
WHEEL_PLATFORM ?= linux-x86_64
WHEEL_PYTHON ?= 3.12
WHEEL_WITH ?=
wheelhouse:
	@test -n "$(WHEELHOUSE)" || { echo "Say where: make wheelhouse WHEELHOUSE=DIR [WHEEL_PLATFORM=linux-x86_64|linux-aarch64] [WHEEL_PYTHON=3.11|3.12|3.13]"; exit 2; }
	@if [ -x $(BIN)/python ]; then python=$(BIN)/python; else python="$(PYTHON)"; fi; \
		"$$python" scripts/wheelhouse.py "$(WHEELHOUSE)" --platform $(WHEEL_PLATFORM) --python $(WHEEL_PYTHON) \
		$(if $(WHEEL_WITH),--with $(WHEEL_WITH))

clean:
	rm -rf _build

# Reproduction of "Emergent Inverse-Depth Scaling From Nonlinearity In Attention".
# `make` lists the targets; `make test` and `make reproduce` are the two main commands.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON  ?= python3
VENV    ?= .venv
# The one place the default torch pin lives (environment.yml must match it). The default is
# whatever wheel pip picks for this platform; on a GPU machine choose a CUDA build, e.g.
#   make test TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
TORCH   ?= torch==2.13.0
PROFILE ?= quick
DEVICE  ?= auto
# Notebooks run at once by `make reproduce`, each in its own process with one thread. Empty: icl's
# default, the cores this process may use (os.sched_getaffinity); `nproc` would obey OMP_NUM_THREADS.
JOBS    ?=

VPY      := $(VENV)/bin/python
# No GPU in the tests: the golden notebooks say device "auto", and their numbers are the CPU's.
TESTENV  := OMP_NUM_THREADS=1 MPLBACKEND=Agg CUDA_VISIBLE_DEVICES=
# A second CPU for the notebook regression: torch's generic kernels and icl's C kernels built
# without -march=native, as on a machine without AVX2 (scripts/variants.py runs every variant).
SECOND_CPU := ATEN_CPU_CAPABILITY=default ICL_KERNEL_FLAGS=portable
NBVAL    := $(VPY) -m pytest --nbval-lax --nbval-current-env -p no:cacheprovider tests/golden/*.ipynb -q
STAMP    := $(VENV)/.installed
# Holds the TORCH value of the last install; rewritten only when TORCH changes, so that a
# different TORCH triggers a reinstall while an unchanged one leaves the stamp up to date.
TORCHSPEC := $(VENV)/.torch-spec

.PHONY: help install lock site test-site test test-fast variants reproduce golden lab bench sync clean FORCE

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  %-10s %s\n", $$1, $$2}'

$(TORCHSPEC): FORCE
	@mkdir -p $(VENV)
	@echo '$(TORCH)' | cmp -s - $@ || echo '$(TORCH)' > $@

# Every package but torch comes from requirements.lock, checked against its hashes; torch's build
# is TORCH's choice (its pure-Python dependencies are in the lock); icl itself goes in last, with
# no dependency resolution of its own and the lock's setuptools (no build environment fetched).
# A changed TORCH on an installed .venv uninstalls torch first: pip would take torch==2.13.0 as
# satisfied by the 2.13.0+cpu build already there (and a CUDA build needs its own dependencies).
# The run cache in outputs/runs stays.
$(STAMP): pyproject.toml requirements.lock $(TORCHSPEC)
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(if $(and $(wildcard $(STAMP)),$(filter $(TORCHSPEC),$?)),$(VPY) -m pip uninstall -q -y torch)
	$(VPY) -m pip install -q --require-hashes -r requirements.lock
	$(VPY) -m pip install -q $(TORCH)
	$(VPY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

# JupyterLab's settings, written into the environment with it (icl/running/lab.py says what they are), so
# that a plain `.venv/bin/jupyter lab` opens .py notebooks as notebooks and never saves outputs into
# notebooks/*.ipynb, as `make lab` does. The file named is the last one written.
LABSETTINGS := $(VENV)/etc/jupyter/jupyter_server_config.json
$(LABSETTINGS): $(STAMP) icl/running/lab.py
	$(VPY) -m icl.running.lab $(VENV)

install: $(STAMP) $(LABSETTINGS) ## create .venv from requirements.lock, with torch (TORCH), the icl package (editable) and the lab's settings

test: install ## unit tests, then nbval on tests/golden/*.ipynb, here and as on a second CPU
	$(TESTENV) $(VPY) -m pytest tests -q
	$(TESTENV) $(NBVAL)
	$(TESTENV) $(SECOND_CPU) $(NBVAL)

test-fast: install ## the unit tests that start no process and train for no more than a second (under a minute)
	$(TESTENV) $(VPY) -m pytest tests -q -m "not slow"

variants: install ## make test's checks under every CPU-kernel, thread and C-build variant, with the spread of each checked number
	$(VPY) scripts/variants.py --suite

reproduce: install ## run every notebook at PROFILE (quick|paper|ci) on DEVICE into outputs/, JOBS at once
	@$(VPY) -m icl reproduce --profile $(PROFILE) --device $(DEVICE) $(if $(JOBS),--jobs $(JOBS))

golden: install ## regenerate tests/golden/*.ipynb at the ci profile
	$(VPY) -m icl golden

# --allow-root: containers and CI machines often run as root, where JupyterLab refuses to start
# without it (it changes nothing for other users). The root folder is the repository, so that
# notebooks/ and the executed copies in outputs/ are both a click away.
lab: install ## open the repository (notebooks/, outputs/) in JupyterLab; .py notebooks open as notebooks
	$(VENV)/bin/jupyter lab --allow-root --ServerApp.root_dir="$(CURDIR)"

# The bench is a developer's tool, outside the package (benchmarks/); -m finds it from the repository's root.
bench: install ## benchmark the fast model against plain full attention, and each C kernel against autograd
	$(VPY) -m benchmarks.bench --json outputs/studies/bench.json --reproduce-jobs 2

sync: install ## re-pair notebooks/*.py with their .ipynb (jupytext --sync)
	if ls notebooks/*.py >/dev/null 2>&1; then $(VENV)/bin/jupytext --sync notebooks/*.py; fi

# The lock files, re-solved with pip-tools in a venv of their own under build/ (never in .venv).
# torch is left out of both (TORCH installs it); its version here only steers the resolution.
LOCKVENV   := $(CURDIR)/build/lock-venv
PIPCOMPILE := CUSTOM_COMPILE_COMMAND="make lock" $(LOCKVENV)/bin/pip-compile -q --generate-hashes \
  --strip-extras --no-emit-index-url --no-emit-find-links --unsafe-package torch
LOCKNOTE1  := \# torch is not in this file: the Makefile's TORCH variable, the one place it lives, picks
LOCKNOTE2  := \# its build (CPU here, a CUDA wheel on a GPU machine); make install installs it after this file.
lock: ## re-solve requirements.lock and website/requirements.lock (hashes) from pyproject.toml
	$(PYTHON) -m venv $(LOCKVENV)
	$(LOCKVENV)/bin/pip install -q pip-tools==7.6.2
	echo '$(firstword $(TORCH))' > build/torch-constraint.txt
	$(PIPCOMPILE) --build-deps-for editable -c build/torch-constraint.txt -o requirements.lock pyproject.toml
	cd website && $(PIPCOMPILE) -o requirements.lock requirements.in
	for f in requirements.lock website/requirements.lock; do \
	  { printf '%s\n' "$(LOCKNOTE1)" "$(LOCKNOTE2)"; cat $$f; } > $$f.new && mv $$f.new $$f; done

# The website: the answer (README's), outputs/REPORT.md, the executed notebooks in outputs/ and docs/,
# rendered by Sphinx and myst-nb without running a cell (website/conf.py), into build/site/. The
# sources are copied (about 20 MB) as the repository lays them out, so every relative link resolves
# as it does on GitHub; one that does not fails the build. Copies, not links: Sphinx would resolve a
# linked folder to its real path, outside the site's sources.
SITE_STAMP := $(VENV)/.site-installed
$(SITE_STAMP): website/requirements.lock $(STAMP)
	$(VPY) -m pip install -q --require-hashes -r website/requirements.lock
	touch $@

site: $(SITE_STAMP) ## build the results website build/site/ from outputs/ and docs/ (no re-execution); open build/site/index.html
	rm -rf build/site-src build/site
	mkdir -p build/site-src
	mkdir -p build/site-src/outputs
	cp -r outputs/REPORT.md outputs/studies outputs/paper_slice outputs/[0-9][0-9]_* build/site-src/outputs/
	cp -r docs params build/site-src/
	# the landing page: the README's answer, its figure and the claims table, then the table of contents
	{ cat website/index.md; sed -n '/^## The answer/,/^## What the paper claims/{/^## What the paper claims/!p}' README.md; \
	  cat website/contents.md; } > build/site-src/index.md
	$(VENV)/bin/sphinx-build -q -W --keep-going -b html -c website build/site-src build/site

test-site: site ## load every page of build/site/ in headless Chromium: each loads, every image is there
	ICL_SITE_TEST=1 $(TESTENV) $(VPY) -m pytest tests/running/test_site.py -q

clean: ## remove .venv and the run cache outputs/runs
	rm -rf $(VENV) outputs/runs

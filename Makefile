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

.PHONY: help install test test-fast variants reproduce golden lab bench sync clean FORCE

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  %-10s %s\n", $$1, $$2}'

$(TORCHSPEC): FORCE
	@mkdir -p $(VENV)
	@echo '$(TORCH)' | cmp -s - $@ || echo '$(TORCH)' > $@

# A changed TORCH on an installed .venv uninstalls torch first: pip would take torch==2.13.0 as
# satisfied by the 2.13.0+cpu build already there (and a CUDA build needs its own dependencies).
# The run cache in outputs/runs stays.
$(STAMP): pyproject.toml $(TORCHSPEC)
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(if $(and $(wildcard $(STAMP)),$(filter $(TORCHSPEC),$?)),$(VPY) -m pip uninstall -q -y torch)
	$(VPY) -m pip install -q $(TORCH)
	$(VPY) -m pip install -q -e .
	touch $@

install: $(STAMP) ## create .venv with torch (TORCH) and the icl package (editable)

test: install ## unit tests, then nbval on tests/golden/*.ipynb, here and as on a second CPU
	$(TESTENV) $(VPY) -m pytest tests -q
	$(TESTENV) $(NBVAL)
	$(TESTENV) $(SECOND_CPU) $(NBVAL)

test-fast: install ## the unit tests that start no process and train for no more than a second (about a minute)
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
# A .py notebook opens as a notebook on double-click: jupytext's viewer is made the default for
# Python files in this environment's JupyterLab settings (not the user's).
LABVIEWER := $(VENV)/etc/jupyter/labconfig/default_setting_overrides.json
# and JupyterLab's "get notified about official Jupyter news?" pop-up switched off for this lab.
$(LABVIEWER): $(STAMP)
	$(VENV)/bin/jupytext-config --settings-file $@ set-default-viewer python
	$(VPY) -c 'import json, sys; p = sys.argv[1]; s = json.load(open(p)); \
	  s["@jupyterlab/apputils-extension:notification"] = {"fetchNews": "false", "checkForUpdates": False}; \
	  json.dump(s, open(p, "w"), indent=2)' $@

lab: install $(LABVIEWER) ## open the repository (notebooks/, outputs/) in JupyterLab; .py notebooks open as notebooks
	$(VENV)/bin/jupyter lab --allow-root --ServerApp.root_dir="$(CURDIR)"

bench: install ## benchmark the fast model against plain full attention
	$(VPY) -m icl bench --json outputs/bench.json --reproduce-jobs 2

sync: install ## re-pair notebooks/*.py with their .ipynb (jupytext --sync)
	if ls notebooks/*.py >/dev/null 2>&1; then $(VENV)/bin/jupytext --sync notebooks/*.py; fi

clean: ## remove .venv and the run cache outputs/runs
	rm -rf $(VENV) outputs/runs

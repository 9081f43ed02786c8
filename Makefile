# README.md's commands (the Quick start's two, and a GPU user's check), each setting up first:
#
#   make quickstart   the quick-start study, then its HTML report (results/report.html)
#   make test         the test suite (what .ci/run runs)
#   make check        on a machine with an NVIDIA GPU: the stack, the goal cells, their table
#                     (python -m nettebench check; docs/gpu.md)
#
# Set-up: a virtual environment in the checkout (.venv) with the stack this project tests, from
# its lock (envs/lock-py311.txt or envs/lock-py312.txt, by the interpreter: every package pinned
# with its hashes, installed with pip --require-hashes), then the package itself, editable; made
# once, again when pyproject.toml or the lock changes. Options: PYTHON=python3.12 (the
# interpreter: 3.11.4 or newer, one of the locks' 3.11 and 3.12), VENV=path,
# TORCH_INDEX=https://download.pytorch.org/whl/cpu (torch and torchvision from PyTorch's CPU
# index at the lock's versions, and the rest of the lock less CUDA's libraries, which only
# torch's default wheel needs: no CUDA on a machine without a GPU).
#
#   make lock         refresh the locks from pyproject.toml (envs/lock.py, with uv)

PYTHON ?= python3
VENV ?= .venv
TORCH_INDEX ?=
STAMP := $(VENV)/.nettebench-installed
BIN := $(VENV)/bin
PY := $(shell $(PYTHON) -c 'import sys; print("%d%d" % sys.version_info[:2])' 2>/dev/null)
LOCK := envs/lock-py$(PY).txt
# The requirements the environment was installed from, which each record names by its hash
# (nettebench.records.lock).
INSTALLED_LOCK := $(VENV)/nettebench-lock.txt
QUICKSTART := --workflow-profile profiles/quickstart
STUDY := profiles/quickstart/study.yaml

.PHONY: quickstart test check setup lock

setup: $(STAMP)

$(STAMP): pyproject.toml $(wildcard $(LOCK))
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11, 4))' || { \
	  echo "nettebench needs Python 3.11.4 or newer; $(PYTHON) is $$($(PYTHON) -V 2>&1)" >&2; \
	  exit 1; }
	@test -f $(LOCK) || { \
	  echo "nettebench: no lock for $$($(PYTHON) -V 2>&1) ($(LOCK)); the locks are for 3.11 and" \
	    "3.12: PYTHON=python3.12, or add it to envs/lock.py's PYTHONS and make lock" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
ifeq ($(TORCH_INDEX),)
	$(BIN)/pip install --require-hashes -r $(LOCK)
	cp $(LOCK) $(INSTALLED_LOCK)
else
	$(BIN)/pip install --no-deps $(shell grep -oE '^torch(vision)?==[^ ]+' $(LOCK)) --index-url $(TORCH_INDEX)
	$(BIN)/python envs/lock.py without-torch $(LOCK) > $(INSTALLED_LOCK)
	$(BIN)/pip install --require-hashes -r $(INSTALLED_LOCK)
endif
	$(BIN)/pip install --no-deps -e .
	touch $@

# The locks compiled again from pyproject.toml, keeping every pin it still allows
# (LOCK_OPTIONS=--upgrade: the newest releases it allows); then `make` installs them.
lock: $(STAMP)
	$(BIN)/python envs/lock.py compile --uv $(BIN)/uv $(LOCK_OPTIONS)

# The study checked first (Snakemake's own reader names neither file nor line of a YAML error in
# a profile's configfile); the run; then the report, in a Snakemake call of its own, so a dry run
# (-n) never rewrites it.
quickstart: $(STAMP)
	@$(BIN)/python -m nettebench study config --replace-workflow-config $(STUDY) >/dev/null
	$(BIN)/snakemake $(QUICKSTART)
	$(BIN)/snakemake $(QUICKSTART) --report results/report.html
	@echo "nettebench: report: results/report.html (open it in a browser; the tables are in results/tables/, the figures in results/figures/)"
	@$(BIN)/python -c 'from nettebench.study.terminal_answer import print_answer; print_answer(0)' 2>&1

test: $(STAMP)
	$(BIN)/pytest

check: $(STAMP)
	$(BIN)/python -m nettebench check

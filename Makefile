# README.md's commands (the Quick start's two, and a GPU user's check), each setting up first:
#
#   make quickstart   the quick-start study, then its HTML report (results/report.html)
#   make test         the test suite (what .ci/run runs)
#   make check        on a machine with an NVIDIA GPU: the stack, the goal cells, their table
#                     (python -m nettebench check; docs/gpu.md)
#
# Set-up: a virtual environment in the checkout (.venv) with the package and the versions this
# project tests (envs/constraints.txt); made once, again when pyproject.toml or the constraints
# change. Options: PYTHON=python3.12 (the interpreter, 3.11.4 or newer), VENV=path,
# TORCH_INDEX=https://download.pytorch.org/whl/cpu (torch and torchvision from PyTorch's CPU
# index first: no CUDA libraries on a machine without a GPU).

PYTHON ?= python3
VENV ?= .venv
TORCH_INDEX ?=
STAMP := $(VENV)/.nettebench-installed
BIN := $(VENV)/bin
QUICKSTART := --workflow-profile profiles/quickstart
STUDY := profiles/quickstart/study.yaml

.PHONY: quickstart test check setup

setup: $(STAMP)

$(STAMP): pyproject.toml envs/constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11, 4))' || { \
	  echo "nettebench needs Python 3.11.4 or newer; $(PYTHON) is $$($(PYTHON) -V 2>&1)" >&2; \
	  exit 1; }
	$(PYTHON) -m venv $(VENV)
ifneq ($(TORCH_INDEX),)
	$(BIN)/pip install torch torchvision -c envs/constraints.txt --index-url $(TORCH_INDEX)
endif
	$(BIN)/pip install -e '.[dev]' -c envs/constraints.txt
	touch $@

# The study checked first (Snakemake's own reader names neither file nor line of a YAML error in
# a profile's configfile); the run; then the report, in a Snakemake call of its own, so a dry run
# (-n) never rewrites it.
quickstart: $(STAMP)
	@$(BIN)/python -m nettebench study config --replace-workflow-config $(STUDY) >/dev/null
	$(BIN)/snakemake $(QUICKSTART)
	$(BIN)/snakemake $(QUICKSTART) --report results/report.html
	@echo "nettebench: report: results/report.html (open it in a browser; the tables are in results/tables/, the figures in results/figures/)"
	@echo "nettebench: the answer (results/tables/answer.txt):" && sed 's/^/  /' results/tables/answer.txt

test: $(STAMP)
	$(BIN)/pytest

check: $(STAMP)
	$(BIN)/python -m nettebench check

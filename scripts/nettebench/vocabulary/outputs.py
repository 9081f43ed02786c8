"""The names of the files the workflow's rules write: what Snakemake must know while it parses.

A cell's record files, the ceiling beside it, and the tables and figures aggregation writes.
They live here, at the bottom of the package, so that the workflow (parse time, torch-free) and
the code that writes and reads these files (``records``, ``report``) share one spelling.
"""

from __future__ import annotations

METRICS_FILE = "metrics.json"
# The study a run stored beside its results (study/stored.py): what profiles/aggregate and the
# rerun line (report/rerun.py) read it from.
STUDY_FILE = "results/study.yaml"
EPOCHS_FILE = "epochs.csv"
CEILING_FILE = (
    "ceiling.json"  # the compute ceiling (nettebench.benchmarks.ceiling) beside a matrix cell
)

# The report's front page (report/workflow.rst includes it above the prose): the headline
# table as an HTML fragment beside the tables, then the page with the throughput figure.
HEADLINE_FILE = "headline.html"
# The front page's answer as plain text, beside the tables: what a run prints at its end.
ANSWER_FILE = "answer.txt"
FRONT_PAGE = "results/front_page.html"
# Every table the aggregation writes (``python -m nettebench report tables``): its name -> the
# function that renders it, ``module:function`` under ``nettebench.report``, called with the
# frames it names among ``runs``, ``epochs`` and ``compared`` (report.registry.render). Each is
# written as <name>.md and <name>.html, with the caption report/tables/<name>.rst; the order is
# the report's. A new table is its module and one line here.
TABLES = {
    "time_by_model_precision": "tables.time:time_markdown",
    "accuracy_by_epoch": "tables.accuracy:accuracy_markdown",
    "throughput": "tables.throughput:throughput_markdown",
    "cpu_vs_gpu": "tables.cpu_vs_gpu:cpu_vs_gpu_markdown",
    # the study's PyTorch 1.0.1 against 1.1.0: a column per version of each library that varies
    "time_by_library_version": "tables.versions:library_versions_markdown",
    # what else the machine did during every timed window, and which windows overlapped
    "timing_conditions": "tables.conditions:timing_conditions_markdown",
    "time_by_machine": "tables.machines:machines_markdown",  # a column per machine and setup
    "time_to_accuracy": "tables.time_to_accuracy:time_to_accuracy_markdown",
    "scaling": "tables.scaling:scaling_markdown",  # data-parallel cells against one process
    "comparisons": "tables.comparisons:comparisons_markdown",  # every axis against its reference
    "energy": "tables.energy:energy_markdown",  # J per trained image (NVML, RAPL)
    "published_references": "tables.references:references_markdown",
}
TABLE_NAMES = tuple(TABLES)
# Every figure (``python -m nettebench report figures``): its name -> the function that draws
# it, ``module:function`` under ``nettebench.report``, called with the frames it names among
# ``runs`` and ``epochs`` (report.registry.render). Each is written as <name>.png and <name>.svg,
# with the caption report/figures/<name>.rst. A new figure is its module and one line here.
FIGURES = {
    "time_by_model_precision": "figures.time:plot_time",
    "speedup_over_O0": "figures.speedup:plot_speedup",
    "accuracy_curves": "figures.accuracy:plot_accuracy",
    "throughput": "figures.throughput:plot_throughput",
    "time_to_accuracy": "figures.time_to_accuracy:plot_time_to_accuracy",
    "scaling": "figures.scaling:plot_scaling",
    "energy_per_image": "figures.energy:plot_energy",
}
FIGURE_NAMES = tuple(FIGURES)
# One code manifest per code group (nettebench.study.code_groups.write_manifest): the input by
# which a rule depends on the package's code.
CODE_MANIFEST_DIR = ".snakemake/nettebench/code"
# The comparisons table's rows as CSV, with each raw p and the p after Holm's correction.
COMPARISONS_CSV = "comparisons.csv"
# Every training step (report.steps_export): one row a step, and each trained cell as a pyperf
# benchmark file (results/pyperf/<cell path>.json), for `python -m pyperf stats|compare_to`.
STEPS_TABLE = "results/tables/steps.csv"
PYPERF_DIR = "results/pyperf"

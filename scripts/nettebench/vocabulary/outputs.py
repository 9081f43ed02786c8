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

# What aggregation writes: each table as Markdown and HTML, each figure as PNG and SVG.
TABLE_NAMES = ("time_by_model_precision", "accuracy_by_epoch", "throughput", "cpu_vs_gpu")
# The study's library-version table (PyTorch 1.0.1 against 1.1.0): time by model, one column per
# version of a library, for every library whose version varies among the cells.
TABLE_NAMES += ("time_by_library_version",)
# What else the machine did during every timed window, and which windows overlapped.
TABLE_NAMES += ("timing_conditions",)
# The report's front page (report/workflow.rst includes it above the prose): the headline
# table as an HTML fragment beside the tables, then the page with the throughput figure.
HEADLINE_FILE = "headline.html"
# The front page's answer as plain text, beside the tables: what a run prints at its end.
ANSWER_FILE = "answer.txt"
FRONT_PAGE = "results/front_page.html"
# Machines side by side (one column per machine and environment) and time to accuracy (seconds
# until validation top-1 first reached the config's target_top1).
TABLE_NAMES += ("time_by_machine", "time_to_accuracy")
FIGURE_NAMES = ("time_by_model_precision", "speedup_over_O0", "accuracy_curves", "throughput")
FIGURE_NAMES += ("time_to_accuracy",)
# Data-parallel cells against their one-process twins (report.tables.scaling).
TABLE_NAMES += ("scaling",)
FIGURE_NAMES += ("scaling",)
# One code manifest per code group (nettebench.study.code_groups.write_manifest): the input by
# which a rule depends on the package's code.
CODE_MANIFEST_DIR = ".snakemake/nettebench/code"
# The front page's comparisons as a table (report.tables.comparisons): cached / pil, bf16 / O0.
TABLE_NAMES += ("comparisons",)
# Its rows as CSV, with each comparison's raw p and the p after Holm's correction over the table.
COMPARISONS_CSV = "comparisons.csv"
# Energy per trained image by model x precision (report.tables.energy; NVML on a GPU, RAPL on a
# CPU), and published throughputs beside the study's own (report.tables.references).
TABLE_NAMES += ("energy", "published_references")
FIGURE_NAMES += ("energy_per_image",)
# Every training step (report.steps_export): one row a step, and each trained cell as a pyperf
# benchmark file (results/pyperf/<cell path>.json), for `python -m pyperf stats|compare_to`.
STEPS_TABLE = "results/tables/steps.csv"
PYPERF_DIR = "results/pyperf"

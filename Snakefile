# nettebench: a hand-run benchmark study as one reproducible command (README.md).
# Helpers live in rules/common.smk, rules in rules/*.smk, code in scripts/nettebench/.
import gc

from snakemake.utils import min_version

min_version("9.0")

# What Snakemake imported lives as long as the run: frozen out of the garbage collector's
# passes, which otherwise walk it again and again while the rules are read and the DAG is built
# (a dry run of the quick start 2.0 -> 1.6 CPU-s, docs/measurements.md). Snakemake's own process
# only: the jobs it starts run as Python runs them.
gc.freeze()


# Reads config.yaml's YAML first: Snakemake's own error for it names neither file nor line.
include: "rules/config_file.smk"


configfile: "config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/datasets.smk"
include: "rules/train.smk"
include: "rules/aggregate.smk"
include: "rules/profile.smk"
include: "rules/builds.smk"
include: "rules/inference.smk"


rule all:
    default_target: True
    input:
        final_outputs(),

# nettebench: a hand-run benchmark study as one reproducible command (README.md).
# Helpers live in rules/common.smk, rules in rules/*.smk, code in scripts/nettebench/.
from snakemake.utils import min_version

min_version("9.0")


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
    # one line, not the study's every output (profiles/default/config.yaml)
    message:
        "{rule}: every cell, table and figure of the study"

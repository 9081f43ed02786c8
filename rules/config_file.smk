# Before `configfile:` reads config.yaml: a YAML error (a tab in the indentation, say) fails here
# naming the file, line and column, where Snakemake's own reader names neither. Files given with
# --configfile are read by Snakemake before any workflow code; `python -m nettebench study
# config FILE` finds the line in those.
import sys
from pathlib import Path

if str(Path(workflow.basedir) / "scripts") not in sys.path:
    sys.path.insert(0, str(Path(workflow.basedir) / "scripts"))

from nettebench.study.config_file import check_yaml_file, one_line_errors

with one_line_errors():
    check_yaml_file("config.yaml")

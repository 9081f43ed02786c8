"""Config errors in one line: the file and line, or the key and what is allowed.

Two readers a user meets before any job runs say too little. Snakemake's config reader, given a
YAML file with a tab in its indentation, says "Config file is not valid JSON or YAML" and names
neither the file nor the line. jsonschema, given ``profile: {backend: nvprof2}`` or
``matrix.batch_size: lots``, opens with "... is not valid under any of the given schemas" and
names the key and the allowed values only deep in a long dump. Here:

- :func:`check_yaml_file` reads a config file with PyYAML first and fails with
  ``config.yaml line 4, column 1: found a tab character ...; YAML indents with spaces only``;
- :func:`nettebench.study.schema.schema_problem` turns the schema's most relevant error into
  ``profile.backend: 'nvprof2' is not allowed; allowed: torch, nsys, nvprof`` (one line, no
  schema dump).

``python -m nettebench study config FILE`` checks a config file the whole way (YAML, schema,
the matrix) without Snakemake; it is how to find the line of a YAML error in a file passed with
``--configfile``, which Snakemake reads before any of the workflow's code runs. Like Snakemake,
it reads the workflow's ``config.yaml`` first and merges the files over it (so a partial file
such as the README's ``compare.yaml`` checks as the run will see it), unless told
``--replace-workflow-config``.

Imports PyYAML (it comes with Snakemake), nothing heavy.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from nettebench.study.cell_options import CommandParser
from nettebench.study.crossing import ConfigError
from nettebench.study.workflow import Study
from nettebench.vocabulary import commands


def check_yaml_file(path: str | Path) -> Any:
    """Parse ``path`` as YAML; a syntax error names the file, line and column. Returns the data
    (None for a missing file: Snakemake decides whether that is an error)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        raise ConfigError(yaml_message(path, text, error)) from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None


def yaml_message(path: Path, text: str, error: yaml.MarkedYAMLError) -> str:
    mark = error.problem_mark or error.context_mark
    if mark is None:
        return f"{path}: not valid YAML: {error.problem or error}"
    lines = text.splitlines()
    line = lines[mark.line] if mark.line < len(lines) else ""
    problem = error.problem or "not valid YAML"
    hint = ""
    if "\t" in line[: len(line) - len(line.lstrip())] or "tab" in problem:
        hint = "; YAML indents with spaces only: replace the tab(s) at the start of the line"
    return f"{path} line {mark.line + 1}, column {mark.column + 1}: {problem}{hint}\n  {line}"


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Around the workflow's parse-time checks (rules/common.smk): a :class:`ConfigError` ends
    Snakemake with its message alone, where Snakemake would open with ``ConfigError in file
    ".../rules/common.smk", line 43:`` and a traceback, which reads as a bug in the workflow."""
    try:
        yield
    except ConfigError as error:
        sys.exit(f"Config error: {error}")


WORKFLOW_CONFIG = "config.yaml"  # the Snakefile's `configfile:`, relative to the working directory


def main(argv: list[str] | None = None) -> int:
    """Check config files as the workflow will (YAML, schema, every matrix value): the
    workflow's config.yaml first, then each file merged over it, as Snakemake merges
    --configfile files."""
    parser = CommandParser(
        prog="python -m nettebench study config",
        description=main.__doc__,
        epilog="example:\n  python -m nettebench study config compare.yaml\n"
        "  python -m nettebench study config --replace-workflow-config "
        "profiles/quickstart/study.yaml",
    )
    parser.add_argument("files", nargs="+", help="config files, merged in order like Snakemake")
    parser.add_argument(
        "--replace-workflow-config",
        action="store_true",
        help=f"do not read {WORKFLOW_CONFIG} first (Snakemake's option of the same name)",
    )
    return commands.run(parser, _check, argv, errors=(ConfigError,), stream=sys.stdout)


def _check(args: argparse.Namespace) -> Iterator[str]:
    names = list(args.files)
    if not args.replace_workflow_config and Path(WORKFLOW_CONFIG).is_file():
        names.insert(0, WORKFLOW_CONFIG)
    config: dict[str, Any] = {}
    try:
        for name in names:
            data = check_yaml_file(name)
            if data is None and not Path(name).is_file():
                raise ConfigError(f"{name} does not exist")
            if not isinstance(data, Mapping):
                raise ConfigError(f"{name}: a config file holds a mapping of keys at its top")
            merge_config(config, data)
        Study.from_config(config)  # the schema, then the rules across keys
    except ConfigError as error:
        raise ConfigError(f"{error} (in {' + '.join(names)})") from None
    yield f"ok: {' + '.join(names)}"


def merge_config(into: dict[str, Any], update: Mapping[str, Any]) -> None:
    """Snakemake's way of merging config files: mappings key by key, anything else replaced."""
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            merge_config(into[key], value)
        else:
            into[key] = dict(value) if isinstance(value, Mapping) else value


if __name__ == "__main__":  # run as python -m nettebench study config
    sys.exit(commands.moved(__spec__.name))

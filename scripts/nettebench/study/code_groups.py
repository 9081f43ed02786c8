"""The code each group of rules runs: inputs of those rules, so an edit reruns exactly them.

A group is named by the commands its rules run (the words after ``python -m nettebench``, as
:data:`nettebench.vocabulary.commands.COMMANDS` maps them to modules). Its code is computed, not
listed by hand: those modules, every ``nettebench`` module they import at any depth (functions
included, read from the source's import statements, nothing imported), the packages those modules
sit in, the dispatcher that starts a command (``__main__.py``, ``vocabulary/commands.py``),
which reaches the command's module by its name rather than by an import, and the modules a
registry names (:data:`REGISTRIES`: the tables and the figures of ``vocabulary/outputs.py``). So
editing the plotting code reruns only the figures, editing ``training/`` every training cell,
and a module a command starts to import joins its group the same day.

A rule's input is not the group's modules themselves but one manifest per group
(:func:`write_manifest`, ``.snakemake/nettebench/code/<group>.sha256``, beside Snakemake's own
metadata, so a dry run writes nothing under ``results/``): every module's sha256, rewritten at
parse time only when one of them changed. Snakemake sees a newer input with a new checksum and
reruns the group's jobs, exactly as with the modules listed, while a job's ``input:`` line in
the terminal names one file instead of fifty. The trainer's restore key reads the same list
(:mod:`nettebench.training.validity`): one definition of "the code that made this result".
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

from nettebench.vocabulary import outputs
from nettebench.vocabulary.atomic import write_text_atomic
from nettebench.vocabulary.commands import COMMANDS, SINGLE

PACKAGE_DIR = Path(__file__).resolve().parent.parent
# What starts every command: ``python -m nettebench`` and the table that names the module.
DISPATCH = ("__main__.py", "vocabulary/commands.py")

# group -> the commands its rules run (rules/*.smk, `code("<group>")` beside the shell line)
GROUP_COMMANDS: dict[str, tuple[str, ...]] = {
    "store": ("data store",),
    "train": ("training",),
    "matrix_train": ("benchmarks cell-job", "training"),  # the trainer, then the ceiling
    "profile": ("profiling",),
    "inference": ("inference",),
    "inference_tables": ("report inference-tables",),
    "inference_figure": ("report inference-figure",),
    "aggregate": ("report tables", "report steps"),
    "front_page": ("report front-page",),
    "figures": ("report figures",),
    "profile_aggregate": ("report kernel-tables",),
    "profile_figures": ("report kernel-figure",),
    "builds": ("builds clone", "builds wheel", "builds install"),
    "environments": ("builds environment",),
}


# group -> the registry whose entries (``module:function`` under nettebench.report) its command
# imports by name (report.registry.render), so no import statement shows them
REGISTRIES: dict[str, dict[str, str]] = {"aggregate": outputs.TABLES, "figures": outputs.FIGURES}


def command_module(command: str) -> str:
    """``report tables`` -> ``report/aggregate.py``: the module a command's words start."""
    group, _, name = command.partition(" ")
    dotted = SINGLE[group][0] if group in SINGLE else f"{group}.{COMMANDS[group][name][0]}"
    return dotted.replace(".", "/") + ".py"


# An import statement at any indentation: ``import a.b, c`` or ``from .x import (y, z)``, its
# names running on over a parenthesised list or backslashed lines. A line of a docstring that
# reads like an import only adds a module, never hides one (tests/test_study.py checks the
# groups against a full ast reading); a regex reads the package in milliseconds where parsing
# every module took most of a second of each Snakemake start.
_LINE = r"(?:[^\n\\]|\\\n)*"  # the rest of a line, backslashed line ends included
_IMPORT = re.compile(
    rf"^[ \t]*(?:from[ \t]+(?P<base>\.*[\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|{_LINE})"
    rf"|import[ \t]+(?P<modules>{_LINE}))",
    re.MULTILINE,
)


def _names(text: str) -> list[str]:
    """``a as b, (c, d)`` -> ``["a", "c", "d"]``: the imported names, aliases dropped."""
    words = [w.strip() for w in re.sub(r"[()\\\n]", " ", text.split("#")[0]).split(",")]
    return [w.split()[0] for w in words if w and w.split()[0].replace(".", "").isidentifier()]


@functools.cache
def _imports(root: Path, relative: str) -> frozenset[str]:
    """The package modules (files relative to the package folder ``root``) one module imports,
    anywhere in it."""
    package = ["nettebench", *Path(relative).parent.parts]
    names: set[str] = set()
    for match in _IMPORT.finditer((root / relative).read_text(encoding="utf-8")):
        if match["modules"] is not None:
            names |= set(_names(match["modules"]))
            continue
        dots = len(match["base"]) - len(match["base"].lstrip("."))
        parent = package[: len(package) - dots + 1] if dots else []
        base = ".".join([*parent, *filter(None, [match["base"].lstrip(".")])])
        names |= {base, *(f"{base}.{name}" for name in _names(match["names"]))}
    found = set()
    for name in names:
        parts = name.split(".")
        if parts[0] != "nettebench":
            continue
        for depth in range(1, len(parts) + 1):  # a module's packages run their __init__.py
            found |= {f for f in _files(parts[1:depth]) if (root / f).is_file()}
    return frozenset(found)


def _files(parts: list[str]) -> tuple[str, ...]:
    """The files a dotted name (without ``nettebench``) may be: a module, or a package."""
    stem = "/".join(parts)
    return (f"{stem}.py", f"{stem}/__init__.py") if parts else ("__init__.py",)


def modules(group: str) -> list[str]:
    """Every module (relative to the package) the group's commands run: their modules, what
    those import at any depth, and the dispatcher."""
    todo = [*DISPATCH, *(command_module(c) for c in GROUP_COMMANDS[group])]
    registered = REGISTRIES.get(group, {}).values()
    todo += [f"report/{target.partition(':')[0].replace('.', '/')}.py" for target in registered]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(_imports(PACKAGE_DIR, module))
    return sorted(seen)


def manifest(group: str) -> str:
    """The group's code as text: ``<sha256>  <module>`` per module (sha256sum's format, so
    ``sha256sum -c`` checks it from the package folder), sorted. It changes exactly when the
    content of a module of the group changes, or a module joins or leaves it."""
    lines = []
    for module in modules(group):
        digest = hashlib.sha256((PACKAGE_DIR / module).read_bytes()).hexdigest()
        lines.append(f"{digest}  {module}\n")
    return "".join(lines)


def write_manifest(group: str, path: str | os.PathLike[str]) -> bool:
    """Write the group's :func:`manifest` to ``path`` unless it already holds that text (so its
    mtime moves only when the code did); True when it wrote. All-or-nothing
    (:func:`~nettebench.vocabulary.atomic.write_text_atomic`): several Snakemake processes may
    parse the workflow at once."""
    path = Path(path)
    text = manifest(group)
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    write_text_atomic(path, text)
    return True

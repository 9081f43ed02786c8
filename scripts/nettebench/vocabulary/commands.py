"""The package's command names: ``python -m nettebench.<subpackage> <command> [options]``.

A subpackage with several commands has one ``__main__`` that hands its arguments to :func:`main`,
which runs the named command's ``main(argv)``; each command's parser names itself the way a user
types it (``prog="python -m nettebench.report tables"``), in its usage and one-line errors. The
rules (``rules/*.smk``) and the README use these names. The trainer, the profiler and the inference
cells are one command each (``python -m nettebench.training``, ``.profiling``, ``.inference``).
The benchmarks are grouped too (``python -m nettebench.benchmarks ceiling``) and still run as
their modules (``python -m nettebench.benchmarks.ceiling``), the name their parsers, the rules and
the docs use: the cell job launches its processes by the module its ``prog`` names
(:func:`nettebench.training.launch.module_of`), and a cell command restarts itself by the name it
was run as, either one (:mod:`nettebench.builds.activate`).

A command's ``main(argv)`` builds its parser and hands it, with the job, to :func:`run`: the
one parse, run, report block (an expected error is the parser's one-line error, exit status 2).

Stdlib only: a command's module is imported when it runs, never to list the commands.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

# subpackage -> command -> (its module inside the subpackage, the arguments that come first)
COMMANDS: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    "datasets": {
        "fetch": ("fetch", ()),  # download an archive, verified
        "extract": ("extract", ()),  # unpack it, all or nothing
        "local": ("local", ()),  # use a folder in place
        "synthetic": ("synthetic", ()),  # generate an Imagenette-shaped dataset
    },
    "data": {
        "store": ("store_build", ()),  # decode a dataset into the uint8 store
        "augment": ("augment", ()),  # time the batched crop and flip
    },
    "builds": {
        "clone": ("build", ("clone",)),  # a library's source at a ref
        "wheel": ("build", ("wheel",)),  # build it against the installed torch
        "install": ("build", ("install",)),  # install the wheel into a prefix
        "environment": ("packages", ()),  # a package environment from the registry
    },
    "study": {
        "config": ("config_file", ()),  # check a config file the whole way
    },
    "report": {
        "tables": ("aggregate", ()),  # records -> every table
        "figures": ("figures", ()),  # the aggregate -> the figures
        "front-page": ("front_page", ()),  # the report's front page
        "kernel-tables": ("tables.kernels", ()),  # profiled cells -> kernel tables
        "kernel-figure": ("kernel_figure", ()),  # their figure
        "inference-tables": ("tables.inference", ()),  # inference cells -> their tables
        "inference-figure": ("inference_figure", ()),  # latency against throughput
        "steps": ("steps_export", ()),  # steps.csv and pyperf files for other tools
        "rerun": ("rerun", ()),  # the line that re-measures the cells timed under interference
    },
    "benchmarks": {
        "ceiling": ("ceiling", ()),  # training steps on batches already on the device
        "cell-job": ("cell_job", ()),  # a matrix cell: the trainer, then its ceiling
        "loader": ("loader", ()),  # the input pipelines side by side
        "wallclock": ("wallclock", ()),  # whole trainer processes side by side
        "ddp-plain": ("ddp_plain", ()),  # torch's plain DDP, beside the cell's data parallel
    },
}


# The groups that are one command each: group -> (its module, what it does).
SINGLE: dict[str, tuple[str, str]] = {
    "training": ("training.cli", "train one cell (the trainer)"),
    "profiling": ("profiling.cli", "profile one cell"),
    "inference": ("inference.cli", "measure or evaluate one inference cell: measure, accuracy"),
}
GROUPS: dict[str, str] = {
    "datasets": "download, extract, use in place or generate a dataset",
    "data": "decode a dataset into the store; time the batched augmentation",
    "builds": "library builds from source, package environments from the registry",
    "study": "check a config file the whole way",
    "report": "records -> tables, figures, the front page, steps.csv",
    "benchmarks": "the compute ceiling, a matrix cell's job, loaders and trainers side by side",
    **{group: text for group, (_, text) in SINGLE.items()},
}


def top_level(argv: Sequence[str] | None = None) -> int:
    """``python -m nettebench <group> [<command>] [options]``: the group's command; ``--help``
    (or nothing) lists the groups."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        listed = "".join(f"  {group:<12}{text}\n" for group, text in GROUPS.items())
        print(
            "usage: python -m nettebench <group> [<command>] [options]\n\ngroups (python -m "
            f"nettebench <group> --help lists a group's commands):\n{listed}",
            file=sys.stdout if argv else sys.stderr,
            end="",
        )
        return 0 if argv else 2
    group, rest = argv[0], argv[1:]
    if group in COMMANDS:
        return main(group, rest)
    if group in SINGLE:
        return importlib.import_module(f"nettebench.{SINGLE[group][0]}").main(rest)
    print(
        f"python -m nettebench: error: unknown group {group!r}; choose from "
        f"{', '.join(GROUPS)}; see --help",
        file=sys.stderr,
    )
    return 2


def moved(module: str) -> int:
    """A command module run by its own path (``python -m nettebench.datasets.synthetic``): one
    line naming the command's form (each form, where the module is several commands), exit
    status 2."""
    for package, commands in COMMANDS.items():
        names = [
            name
            for name, (inner, _) in commands.items()
            if module == f"nettebench.{package}.{inner}"
        ]
        if names:
            form = f"python -m nettebench {package} {'|'.join(names)}"
            print(f"{module} is not run by its path: use {form} (see --help)", file=sys.stderr)
            return 2
    raise LookupError(f"{module} is no command of nettebench.vocabulary.commands.COMMANDS")


def main(package: str, argv: Sequence[str] | None = None) -> int:
    """Run ``python -m nettebench.<package> <command> ...``: the command's ``main(argv)``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = COMMANDS[package]
    usage = f"usage: python -m nettebench.{package} {{{','.join(commands)}}} [options]"
    if not argv or argv[0] in ("-h", "--help"):
        listed = "".join(f"  {c:<18}python -m nettebench.{package} {c} --help\n" for c in commands)
        print(f"{usage}\n\ncommands:\n{listed}", file=sys.stdout if argv else sys.stderr, end="")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in commands:
        print(
            f"python -m nettebench.{package}: error: unknown command {name!r}; choose from "
            f"{', '.join(commands)}; see --help",
            file=sys.stderr,
        )
        return 2
    module, first = commands[name]
    command = importlib.import_module(f"nettebench.{package}.{module}")
    return command.main([*first, *rest])


def run(
    parser: argparse.ArgumentParser,
    job: Callable[[argparse.Namespace], Iterable[str]],
    argv: Sequence[str] | None = None,
    *,
    errors: tuple[type[Exception], ...] = (),
    stream: TextIO | None = None,
) -> int:
    """A command's parse, run, report: parse ``argv``, run ``job(args)`` and print each line it
    yields or returns (to ``stream``, standard error unless told); return 0. An error of
    ``errors`` (one the user can act on) ends the command in one line, ``<prog>: error: <error>``,
    exit status 2, without a traceback."""
    args = parser.parse_args(argv)
    try:
        for line in job(args):
            print(line, file=stream or sys.stderr)
    except errors as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    return 0

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

Stdlib only (and :mod:`.command_start`, which the dispatcher calls once the command's module is
imported): a command's module is imported when it runs, never to list the commands.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

from nettebench.vocabulary import command_start

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
    command_start.resume()  # its imports are done (command_start says why they paused it)
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

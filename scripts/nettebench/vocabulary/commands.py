"""The package's command names: ``python -m nettebench <group> [<command>] [options]``, the
one way to run each command.

A group with several commands (``report``: ``tables``, ``figures``, ...) hands its arguments to
:func:`main`, which runs the named command's ``main(argv)``; the trainer, the profiler and the
inference cells are one command each (``python -m nettebench training``, ``profiling``,
``inference``). Each command's parser names itself the way a user types it
(``prog="python -m nettebench report tables"``, or :func:`prog`), in its usage and one-line
errors. The rules (``rules/*.smk``), the README and the docs use these names; the cell job
starts its processes under torchrun by the same words (:mod:`nettebench.training.launch`), and
a cell command restarts itself by them (:mod:`nettebench.builds.activate`).

Every other way in (a subpackage run as ``python -m nettebench.report``, a command module by its
path, ``python -m nettebench.benchmarks.ceiling``) ends in :func:`moved`: one line naming the
command's form, exit status 2. One way means one name in the rules, the docs and ``sys.argv``.

A command's ``main(argv)`` builds its parser (a :class:`Parser`) and hands it, with the job, to
:func:`run`: the one parse, run, report block, so every command ends the same two ways on an
error the user can act on. A command line the parser refuses is one line,
``<prog>: error: <what>; see --help``, exit status 2 (:data:`USAGE`); an error the job raises is
one line, ``error: <what>``, exit status 1 (:data:`FAILED`), the line the workflow's summary of
a failed job looks for (:mod:`nettebench.study.failures`).

Stdlib only: a command's module is imported when it runs, never to list the commands.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, TextIO

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
        "figures": ("draw", ()),  # the aggregate -> the figures
        "front-page": ("front_page", ()),  # the report's front page
        "kernel-tables": ("kernel_tables", ()),  # profiled cells -> kernel tables
        "kernel-figure": ("kernel_figure", ()),  # their figure
        "inference-tables": ("inference_tables", ()),  # inference cells -> their tables
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
    "check": ("check.cli", "a GPU user's check: the stack, the goal cells, their table"),
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


PROGRAM = "python -m nettebench"


def prog(group: str, command: str | None = None) -> str:
    """How a user types a command (``python -m nettebench report tables``), for its parser's
    ``prog``; a group or command the table does not hold is an error, so no parser names a form
    that does not run."""
    if group in SINGLE and command is None:
        return f"{PROGRAM} {group}"
    if command is None:
        raise LookupError(f"group {group!r} has several commands: name one")
    if command not in COMMANDS.get(group, {}):
        raise LookupError(f"{group} {command} is no command of {__name__}.COMMANDS")
    return f"{PROGRAM} {group} {command}"


def old_forms() -> dict[str, str]:
    """Every module that once ran a command (``python -m <module>``) -> the command's form now:
    each group's package (its ``__main__``) and each command's module."""
    forms = {}
    for group, commands in COMMANDS.items():
        forms[f"nettebench.{group}"] = f"{PROGRAM} {group} <command>"
        for inner in dict.fromkeys(inner for inner, _ in commands.values()):
            names = [name for name, (module, _) in commands.items() if module == inner]
            forms[f"nettebench.{group}.{inner}"] = f"{PROGRAM} {group} {'|'.join(names)}"
    for group, (inner, _) in SINGLE.items():
        forms[f"nettebench.{group}"] = forms[f"nettebench.{inner}"] = prog(group)
    return forms


def moved(module: str, argv: Sequence[str] | None = None) -> int:
    """A command's old way in (``python -m nettebench.report tables``, ``python -m
    nettebench.benchmarks.ceiling``; ``module`` is its ``__spec__.name``): one line naming the
    command's form, exit status 2. A group's package names the command its first argument
    names, if it is one."""
    module = module.removesuffix(".__main__")
    form = old_forms().get(module)
    if form is None:
        raise LookupError(f"{module} is no command module of {__name__}")
    argv = list(sys.argv[1:] if argv is None else argv)
    group = module.removeprefix("nettebench.")
    if argv and argv[0] in COMMANDS.get(group, {}):
        form = prog(group, argv[0])
    print(f"{module} is not run by its path: use {form} (see --help)", file=sys.stderr)
    return 2


def main(group: str, argv: Sequence[str] | None = None) -> int:
    """Run ``python -m nettebench <group> <command> ...``: the command's ``main(argv)``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = COMMANDS[group]
    usage = f"usage: {PROGRAM} {group} {{{','.join(commands)}}} [options]"
    if not argv or argv[0] in ("-h", "--help"):
        listed = "".join(f"  {c:<18}{PROGRAM} {group} {c} --help\n" for c in commands)
        print(f"{usage}\n\ncommands:\n{listed}", file=sys.stdout if argv else sys.stderr, end="")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in commands:
        print(
            f"{PROGRAM} {group}: error: unknown command {name!r}; choose from "
            f"{', '.join(commands)}; see --help",
            file=sys.stderr,
        )
        return 2
    module, first = commands[name]
    command = importlib.import_module(f"nettebench.{group}.{module}")
    return command.main([*first, *rest])


USAGE = 2  # a command line its parser refuses (argparse's status), or an old way in
FAILED = 1  # an error the user can act on, raised while the command ran
ERROR = "error: "  # how a failure's one line starts (study.failures finds it in a job's log)


class Parser(argparse.ArgumentParser):
    """A command's parser: a command line it refuses is one line, ``<prog>: error: <what>; see
    --help``, exit status :data:`USAGE` (argparse's own error prints the usage first, which for a
    command with thirty options fills the screen), and it takes no abbreviated option (argparse's
    default reads ``--epoch 2`` as ``--epochs 2``, silently)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {message}; see --help\n")


def run(
    parser: argparse.ArgumentParser,
    job: Callable[[argparse.Namespace], Iterable[str] | int | None],
    argv: Sequence[str] | None = None,
    *,
    errors: tuple[type[BaseException], ...] = (),
    stream: TextIO | None = None,
    describe: Callable[[BaseException], str] = str,
) -> int:
    """A command's parse, run, report; the exit status.

    ``parser`` (a :class:`Parser`: its errors are one line, exit status :data:`USAGE`) parses
    ``argv``, then ``job(args)`` runs. The job returns the lines to print, each printed (to
    ``stream``, standard error unless told) as it comes, so a generator's lines appear while it
    works and its ``return`` value, if any, is the exit status; or, printing its own output, it
    returns the exit status itself. An error of ``errors`` (one the user can act on) ends the
    command in one line on standard error, ``error: <describe(error)>``, exit status
    :data:`FAILED`; any other error is a bug and keeps its traceback."""
    if not isinstance(parser, Parser):
        raise TypeError(f"{parser.prog}: a command's parser is a {__name__}.Parser")
    args = parser.parse_args(argv)
    try:
        done = job(args)
        if isinstance(done, int):
            return done
        lines = iter(done or ())
        while True:
            try:
                line = next(lines)
            except StopIteration as end:
                return end.value or 0
            print(line, file=stream or sys.stderr, flush=True)
    except errors as error:
        print(f"{ERROR}{describe(error)}", file=sys.stderr, flush=True)
        return FAILED

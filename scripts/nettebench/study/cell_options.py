"""A cell's parameters as command-line options, and the parser every command of the package uses.

The trainer, the ceiling, the profiler and the benches take one ``--option`` per
:class:`~nettebench.vocabulary.cell.CellSpec` parameter (:func:`add_cell_options`), so a rule passes
a cell's arguments to any of them unchanged. Their ``--help`` shows each option's default and the
allowed values of the enumerated ones; a bad value ends the command in one line
(``python -m nettebench training: error: argument --precision: invalid choice: 'o1' (choose
from O0, tf32, ...); see --help``), each checked by the schema's rule for that parameter as the
config's are (:func:`nettebench.study.schema_rules.check_value`), never a traceback from deep inside
the trainer.

:class:`CommandParser` is that parser: module docstrings as descriptions without their reST
markup (:func:`plain_text`), examples kept as written, defaults shown, one-line errors.
Torch-free, like the rest of :mod:`nettebench.study`.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from typing import Any

from nettebench.study import schema_rules
from nettebench.study.crossing import ConfigError
from nettebench.vocabulary import commands, model_names
from nettebench.vocabulary.cell import INSTALLED, LIBRARY_PARAMETERS, CellSpec

# The enumerated parameters and their allowed values (argparse choices: listed by --help), as
# the schema lists them.
CHOICES: dict[str, tuple[str, ...]] = {
    key: schema_rules.enum_of(key)
    for key in ("precision", "device", "lr_schedule", "amp_backend", "loader", "store_placement")
}

# What each parameter means, in a few words (CellSpec's comments say why).
HELP: dict[str, str] = {
    "dataset": "the dataset's name in the record (default: the name in --data)",
    "model": "a torchvision classification model or efficientnet-b0..b7",
    "precision": "precision mode (nettebench.vocabulary.precision)",
    "batch_size": "images per step, or auto: halve from 256 until a step fits",
    "epochs": "training epochs",
    "seed": "random seed",
    "workers": "DataLoader worker processes",
    "image_size": "training crop side in pixels",
    "device": "auto: CUDA when a GPU is visible, else the CPU",
    "max_steps": "steps per epoch, the epoch's time extrapolated (none: every step)",
    "lr": "learning rate (none: 0.1 x batch size / 256)",
    "momentum": "SGD momentum",
    "weight_decay": "SGD weight decay",
    "lr_schedule": "step: x0.1 every 30 epochs; cosine",
    "channels_last": "NHWC memory format: true, false or auto (on for O1, O2, O3, bf16)",
    "deterministic": "deterministic algorithms, cuDNN autotuning off: true or false",
    "pretrained": "start from the libraries' ImageNet weights: true or false",
    "amp_backend": "native: torch.autocast; apex: NVIDIA apex.amp (O0-O3)",
    "loader": "pil: ImageFolder + PIL; cached: the decoded store",
    "compile": "torch.compile the model: true or false",
    "torchvision": f"{INSTALLED}, or a source build under --builds-dir",
    "apex": f"{INSTALLED}, or a source build under --builds-dir",
    "cudnn_benchmark": "cuDNN autotuning: true or false",
    "store_placement": "cached loader on a GPU: auto, device (resident) or host (streamed)",
    "environment": f"{INSTALLED}, or a package environment under --builds-dir",
    "machine": "the run's machine or site label (part of the result path)",
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written (their examples keep their lines); every option
    with a default says it, unless its help already does."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            action.option_strings
            and action.default not in (None, False, argparse.SUPPRESS)
            and "default" not in text
        ):
            text += " (default: %(default)s)"
        return text


class CommandParser(commands.Parser):
    """A command's parser (:class:`nettebench.vocabulary.commands.Parser`: one-line errors, no
    abbreviated option) whose help shows each option's default and the description as plain
    text."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        if kwargs.get("description"):
            kwargs["description"] = plain_text(kwargs["description"])
        super().__init__(*args, **kwargs)


_ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|exc|obj):`~?\.?([^`]+)`")


def plain_text(doc: str) -> str:
    """A module docstring as a terminal shows it: reST roles (``:class:`a.B```) as their name,
    double backquotes dropped, ``::`` before an example as ``:``; lines and indentation kept."""
    text = _ROLE.sub(lambda match: match.group(1), doc)
    text = text.replace("``", "")
    return re.sub(r"::$", ":", text, flags=re.MULTILINE).strip("\n")


def add_cell_options(parser: argparse.ArgumentParser) -> None:
    """One ``--option`` per CellSpec parameter, with its default, so the trainer and the bench
    take exactly the arguments :meth:`CellSpec.cli_args` writes."""
    group = parser.add_argument_group("the cell (every parameter of a study's matrix)")
    for field in dataclasses.fields(CellSpec):
        default = None if field.default is dataclasses.MISSING else field.default
        shown = (
            "none"
            if default is None
            else str(default).lower()
            if default in (True, False)
            else default
        )
        help_text = HELP.get(field.name, "")
        if "default" not in help_text:
            help_text += f" (default: {shown})"
        option_type = _model_name if field.name == "model" else _option_type(field.type)
        group.add_argument(
            f"--{field.name.replace('_', '-')}",
            type=option_type,
            default=default,
            choices=CHOICES.get(field.name),
            help=help_text.strip(),
        )


def cell_from_args(args: argparse.Namespace, *, dataset: str | None = None) -> CellSpec:
    """The CellSpec the parsed options describe (``dataset`` fills a missing --dataset), each
    value checked by the schema's rule for it, as the config's are
    (:func:`nettebench.study.schema_rules.check_value`: ``--epochs 0``, ``--lr 0``); a bad one ends
    the command in one line naming the option. What a device
    cannot run is no error here: the trainer records it as the cell's result."""
    values = {field.name: getattr(args, field.name) for field in dataclasses.fields(CellSpec)}
    values["dataset"] = values["dataset"] or dataset
    try:
        for key, value in values.items():
            # builds and environments are folders under --builds-dir, checked when activated
            if key not in (*LIBRARY_PARAMETERS, "environment", "dataset", "machine"):
                schema_rules.check_value(key, value, where="options." + key)
    except ConfigError as error:
        print(f"error: {_as_option(str(error))}", file=sys.stderr)
        raise SystemExit(2) from None
    return CellSpec(**values)


def _as_option(message: str) -> str:
    """``options.batch_size: ...`` (the config's wording) as ``--batch-size: ...``."""
    option = re.sub(r"^options\.(\w+)", lambda m: "--" + m.group(1).replace("_", "-"), message)
    return option.replace(" or null (", " or none (")


def _model_name(text: str) -> str:
    try:
        model_names.check_model_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _option_type(annotation: str):
    """Argument type from a CellSpec annotation (``int | str`` tries int first; ``none``
    stands for None where allowed; booleans read true/false)."""
    kinds = annotation.split(" | ")

    def parse(text: str):
        if "None" in kinds and text.lower() == "none":
            return None
        if kinds[0] == "bool":
            if text.lower() in ("true", "false"):
                return text.lower() == "true"
            if "str" not in kinds:
                raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
        for kind in kinds:
            try:
                return {"int": int, "float": float, "str": str}[kind](text)
            except (KeyError, ValueError):
                continue
        raise argparse.ArgumentTypeError(f"expected {annotation}, got {text!r}")

    return parse

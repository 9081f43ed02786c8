"""Expand the config's matrix into the table of cells that every rule reads.

The matrix works like a CI matrix:

- every key except ``include``/``exclude`` is an axis: a value or a list of values, crossed;
- ``exclude:`` entries drop every crossed cell that matches all of an entry's keys (an entry's
  value may be a list, meaning "any of these");
- ``include:`` entries are small matrices of their own: their listed values are crossed, and
  every axis an entry does not name takes all of the main matrix's values. So
  ``{model: resnet50, batch_size: 128}`` adds resnet50 at batch 128 in every precision and seed.

Parameters no axis names take the defaults of :class:`nettebench.vocabulary.cell.CellSpec`.
Duplicate cells collapse into one. The schema (schemas/config.schema.yaml, applied by
:mod:`.schema` before any section is expanded) owns each value's own rule: types, enums, ranges.
Here are only the rules that look past one key: a value names something configured elsewhere
(:func:`check_names`: datasets, builds, environments, and the model catalog) or a combination
of values cannot run together (:func:`check_combination`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nettebench.study import crossing
from nettebench.study.crossing import ConfigError
from nettebench.vocabulary import model_names, precision
from nettebench.vocabulary.cell import (
    INSTALLED,
    LIBRARY_PARAMETERS,
    PARAMETER_NAMES,
    RUN_PARAMETERS,
    CellSpec,
    field_defaults,
)

# What the matrix's axes may name: every cell parameter but the run's labels, which are refused
# with where they go instead.
_RUN_LEVEL = (
    "{key} labels a whole run, not a cell; set it once at the top level of the config "
    "({key}: t4) or on the command line (--config {key}=t4), and run the study once per machine"
)
AXES = crossing.Axes(
    allowed=[k for k in PARAMETER_NAMES if k not in RUN_PARAMETERS],
    refused={key: _RUN_LEVEL.format(key=key) for key in RUN_PARAMETERS},
)


def expand(
    matrix: Mapping[str, Any],
    *,
    section: str,
    datasets: Sequence[str],
    overrides: Mapping[str, Any] | None = None,
    builds: Mapping[str, Sequence[str]] | None = None,
) -> list[CellSpec]:
    """All cells of one matrix section (``matrix`` or ``cpu_baseline``), validated.

    ``overrides`` are parameter values that hold for the whole section unless an axis names
    them (the CPU baseline's ``device: cpu``). ``datasets`` are the configured dataset names; a
    section without a ``dataset`` axis runs on all of them. ``builds`` are the values each
    library parameter may take (``installed`` and the names under the config's ``builds:``),
    and under the key ``environment`` the package environments (``installed`` and the names
    under ``environments:``).
    """
    base = {"dataset": list(datasets), **dict(overrides or {})}
    combos = crossing.cross(matrix, where=section, axes=AXES, base=base, defaults=field_defaults())
    cells: dict[str, CellSpec] = {}
    for combo in combos:
        cell = build_cell(combo, section=section, datasets=datasets, builds=builds)
        cells.setdefault(cell.path(), cell)
    return list(cells.values())


def build_cell(
    values: Mapping[str, Any],
    *,
    section: str,
    datasets: Sequence[str],
    builds: Mapping[str, Sequence[str]] | None = None,
) -> CellSpec:
    """One cell of values the schema passed: their names checked, defaults filled in."""
    check_names(values, section=section, datasets=datasets, builds=builds)
    cell = CellSpec(**values)
    check_combination(cell, section=section)
    cell.path()  # raises on values that cannot be a path component
    return cell


def check_names(
    values: Mapping[str, Any],
    *,
    section: str,
    datasets: Sequence[str],
    builds: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Values that name something listed elsewhere: a dataset under ``datasets:``, a model of
    :mod:`nettebench.vocabulary.model_names`, a build under ``builds:``, an environment under
    ``environments:`` (the inference section's cells too)."""
    for key, value in values.items():
        if key == "dataset":
            crossing.one_of(f"{section}.{key}", value, datasets, what="configured datasets")
        elif key == "model":
            try:
                model_names.check_model_name(value)
            except ValueError as error:
                raise ConfigError(f"{section}.{key}: {error}") from None
        elif key in LIBRARY_PARAMETERS:
            _check_build(key, value, section=section, builds=builds)
        elif key == "environment":
            _check_environment(value, section=section, builds=builds)


def check_combination(cell: CellSpec, *, section: str) -> None:
    """Values that cannot run together (each value alone passed the schema)."""
    if cell.device != "auto":
        reason = precision.unsupported_reason(cell.precision, cell.device)
        if reason:
            raise ConfigError(f"{section}: {reason}")
    if cell.amp_backend == "apex":
        levels = precision.APEX_OPT_LEVELS
        if cell.precision not in levels:
            raise ConfigError(
                f"{section}: amp_backend apex takes precision {', '.join(levels)} "
                f"(apex's opt-levels), got {cell.precision!r}"
            )
        if cell.device == "cpu" or cell.batch_size == "auto":
            raise ConfigError(
                f"{section}: amp_backend apex needs a CUDA device and a fixed batch_size "
                "(apex's amp.initialize runs once per process)"
            )
    if cell.compile and cell.amp_backend == "apex":
        raise ConfigError(f"{section}: compile needs amp_backend native (apex patches the model)")
    if cell.store_placement != "auto" and cell.loader != "cached":
        raise ConfigError(
            f"{section}: store_placement {cell.store_placement} needs loader cached "
            f"(the {cell.loader} loader has no decoded store to place)"
        )
    if cell.processes > 1 and cell.batch_size != "auto" and cell.batch_size % cell.processes:
        raise ConfigError(
            f"{section}: batch_size {cell.batch_size} does not split over {cell.processes} "
            "processes (it is the global batch: use a multiple of processes)"
        )


def _check_build(
    key: str, value: Any, *, section: str, builds: Mapping[str, Sequence[str]] | None
) -> None:
    """A library parameter names ``installed`` or a build configured under ``builds:``."""
    allowed = list((builds or {}).get(key) or [INSTALLED])
    if value not in allowed:
        raise ConfigError(
            f"{section}.{key}: {value!r} is not allowed; {INSTALLED} or a build named under "
            f"`builds.{key}` in the config: {', '.join(allowed)}"
        )


def _check_environment(
    value: Any, *, section: str, builds: Mapping[str, Sequence[str]] | None
) -> None:
    """``environment`` names ``installed`` or a package environment under ``environments:``."""
    allowed = list((builds or {}).get("environment") or [INSTALLED])
    if value not in allowed:
        raise ConfigError(
            f"{section}.environment: {value!r} is not allowed; {INSTALLED} or a package "
            f"environment named under `environments:` in the config: {', '.join(allowed)}"
        )

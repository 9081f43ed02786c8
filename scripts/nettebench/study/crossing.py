"""Crossing axes into cells: the one engine of the matrix, the CPU baseline and inference cells.

A section names axes (a value or a list of values per parameter), plus ``include:`` (entries,
each crossed with every axis it does not name, added) and ``exclude:`` (entries whose matching
combinations are dropped; a key no axis names matches its default), like a CI matrix.
:mod:`.grid` crosses training cells with it, :mod:`.inference_cells` inference cells; each says
which parameters its axes may name (:class:`Axes`) and checks the values of a combination.

Torch-free, like the rest of :mod:`nettebench.study`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


class ConfigError(ValueError):
    """A config value the workflow cannot run; the message names the key and what is allowed."""


@dataclasses.dataclass(frozen=True)
class Axes:
    """The parameters a section's axes may name.

    ``allowed``: the names (in the order an error lists them); ``also``: further keys of the
    section an error lists as allowed (run settings); ``refused``: names that are parameters but
    no axis (a message per name says where they go instead).
    """

    allowed: Sequence[str]
    also: Sequence[str] = ()
    refused: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def check(self, mapping: Mapping[str, Any], where: str) -> dict[str, list[Any]]:
        """The mapping's axes, each a non-empty list; unknown or refused keys are errors."""
        for key in sorted(set(mapping) & set(self.refused)):
            raise ConfigError(f"{where}.{key}: {self.refused[key]}")
        unknown = sorted(set(mapping) - set(self.allowed))
        if unknown:
            listed = ", ".join([*self.allowed, *self.also, "include", "exclude"])
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {listed}")
        axes = {key: as_list(value) for key, value in mapping.items()}
        for key, values in axes.items():
            if not values:
                raise ConfigError(f"{where}.{key} is an empty list; give at least one value")
        return axes


def cross(
    section: Mapping[str, Any],
    *,
    where: str,
    axes: Axes,
    base: Mapping[str, Any],
    defaults: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Every combination of the section's axes (over ``base``, the axes it holds unless it
    names them), less the excluded, plus the included; values are not checked here."""
    section = dict(section or {})
    include = entries(section.pop("include", None), f"{where}.include", axes)
    exclude = entries(section.pop("exclude", None), f"{where}.exclude", axes)
    crossed = {**{key: as_list(value) for key, value in base.items()}, **axes.check(section, where)}
    combos = [c for c in product(crossed) if not any(matches(c, e, defaults) for e in exclude)]
    for index, entry in enumerate(include):
        combos.extend(product({**crossed, **axes.check(entry, f"{where}.include[{index}]")}))
    return combos


def entries(value: Any, where: str, axes: Axes) -> list[Mapping[str, Any]]:
    """An ``include:`` or ``exclude:`` list, each entry's keys checked."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(e, Mapping) for e in value):
        raise ConfigError(f"{where} must be a list of mappings like {{model: resnet50}}")
    for index, entry in enumerate(value):
        axes.check(entry, f"{where}[{index}]")
    return value


def matches(combo: Mapping[str, Any], entry: Mapping[str, Any], defaults: Mapping[str, Any]):
    """Whether a combination matches an entry (a key the combination lacks holds its default)."""
    return all(combo.get(key, defaults.get(key)) in as_list(v) for key, v in entry.items())


def one_of(where: str, value: Any, allowed: Iterable[str], what: str = "allowed") -> None:
    """``value`` is one of ``allowed``, or an error listing them."""
    allowed = list(allowed)
    if value not in allowed:
        raise ConfigError(f"{where}: {value!r} is not allowed; {what}: {', '.join(allowed)}")


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def product(axes: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    keys = list(axes)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*axes.values())]

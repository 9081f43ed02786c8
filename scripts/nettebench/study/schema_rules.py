"""The config schema's rules read without jsonschema: the schema file, a rule in words, and one
cell parameter's value checked against its rule.

The jobs that run a cell (trainer, ceiling, profiler, inference) check their options by the
schema's rule for each parameter, as the config's are, but run where jsonschema may be missing
(the H200's image has none). A cell parameter's rule (``$defs/<name>``) uses a handful of
keywords (type, enum, const, bounds, oneOf/anyOf, ``$ref``, pattern, items), which
:func:`fits` applies; the workflow validates whole configs with jsonschema
(:mod:`.schema`), and ``tests/test_config_file.py`` checks that the two agree on every cell
parameter's rule.

Imports PyYAML and the standard library only.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from nettebench.study import inference_cells
from nettebench.study.crossing import ConfigError
from nettebench.vocabulary import precision
from nettebench.vocabulary.cell import RUN_PARAMETERS, field_defaults

# In the package, so the commands that check their options with it (the trainer, ...) find it
# wherever the package is installed or copied; schemas/config.schema.yaml, where Snakemake's
# validate() and a config author look for it, is a link to this file.
SCHEMA_FILE = Path(__file__).resolve().with_name("config.schema.yaml")


_TYPES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "a list",
    "object": "a mapping",
    "null": "null",
    "boolean": "true or false",
}

BOUNDS = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}

# libyaml's loader where PyYAML has it: the schema in 7 ms instead of 66 (every command that
# checks its options reads it at start-up), the same data.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _loaded(path: str) -> dict[str, Any]:
    return with_facts_from_code(yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_LOADER))


def with_facts_from_code(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with what the code owns written in, so each fact is kept once: the precision
    names (the precision table), each cell parameter's ``x-default`` and the run label's
    ``default`` (:class:`~nettebench.vocabulary.cell.CellSpec`), and the inference section's
    axis defaults and settings (:mod:`.inference_cells`). The YAML file leaves them out."""
    defs = schema["$defs"]
    defs["precision"]["enum"] = list(precision.PRECISION_NAMES)
    cell = field_defaults()
    for name, rule in defs["cell_parameters"]["properties"].items():
        if name in cell:
            rule["x-default"] = cell[name]
    for name in RUN_PARAMETERS:
        schema["properties"][name]["default"] = cell[name]
    served = inference_cells.field_defaults()
    for name, rule in defs["inference_axes"]["properties"].items():
        if name in served and name not in RUN_PARAMETERS:
            rule["x-default"] = served[name]
    settings = schema["properties"]["inference"]["oneOf"][1]["properties"]
    for name, value in inference_cells.SETTINGS.items():
        settings[name]["default"] = value
    return schema


def load_schema(path: str | Path = SCHEMA_FILE) -> dict[str, Any]:
    """The schema (read once; do not change it)."""
    return _loaded(str(path))


def check_value(key: str, value: Any, where: str) -> None:
    """One value of the cell parameter ``key`` (its rule in the schema's ``$defs``); an error
    names ``where`` and what the rule allows."""
    schema = load_schema()
    rule = schema["$defs"][key]
    if not fits(value, rule, schema):
        raise ConfigError(
            f"{where}: {show_value(value)} is not allowed; allowed: {describe(rule, schema)}"
        )


def enum_of(key: str) -> tuple[str, ...]:
    """The values the schema allows a cell parameter with a fixed list (``device``, ...)."""
    return tuple(load_schema()["$defs"][key]["enum"])


_KINDS = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),  # YAML's integers
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, Mapping),
}
_LIMITS = {
    "minimum": lambda v, bound: v >= bound,
    "exclusiveMinimum": lambda v, bound: v > bound,
    "maximum": lambda v, bound: v <= bound,
    "exclusiveMaximum": lambda v, bound: v < bound,
}
KEYWORDS = frozenset(
    {*_LIMITS, "type", "enum", "const", "oneOf", "anyOf", "allOf", "not", "$ref", "pattern"}
    | {"minLength", "items", "minItems", "description", "default", "x-allowed", "x-default"}
)


def fits(value: Any, rule: Mapping[str, Any], schema: Mapping[str, Any]) -> bool:
    """Whether ``value`` satisfies ``rule`` as JSON Schema says (integers as YAML has them).
    A keyword outside :data:`KEYWORDS` is an error: a rule this function cannot read must not
    pass every value."""
    unknown = set(rule) - KEYWORDS
    if unknown:
        raise ValueError(f"schema_rules.fits cannot apply {sorted(unknown)}")
    if "$ref" in rule and not fits(value, _resolve(str(rule["$ref"]), schema), schema):
        return False
    kinds = rule.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else kinds
        if not any(_KINDS[name](value) for name in names):
            return False
    if "enum" in rule and not any(_same(value, option) for option in rule["enum"]):
        return False
    if "const" in rule and not _same(value, rule["const"]):
        return False
    if _KINDS["number"](value):
        for key, within in _LIMITS.items():
            if key in rule and not within(value, rule[key]):
                return False
    if isinstance(value, str):
        if len(value) < rule.get("minLength", 0):
            return False
        if "pattern" in rule and not re.search(rule["pattern"], value):
            return False
    if isinstance(value, list):
        if len(value) < rule.get("minItems", 0):
            return False
        if "items" in rule and not all(fits(item, rule["items"], schema) for item in value):
            return False
    if "oneOf" in rule and sum(fits(value, option, schema) for option in rule["oneOf"]) != 1:
        return False
    if "anyOf" in rule and not any(fits(value, option, schema) for option in rule["anyOf"]):
        return False
    if "allOf" in rule and not all(fits(value, option, schema) for option in rule["allOf"]):
        return False
    return not ("not" in rule and fits(value, rule["not"], schema))


def _same(value: Any, option: Any) -> bool:
    """JSON Schema's equality: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(value, bool) or isinstance(option, bool):
        return isinstance(value, bool) and isinstance(option, bool) and value == option
    return value == option


def describe(rule: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """What a (sub)schema allows, in words: ``an integer >= 1, auto, or a list of them``."""
    return _either(_alternatives(rule, schema))


def _alternatives(rule: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    if "x-allowed" in rule:  # the schema's own words for what a key allows
        return [str(text) for text in rule["x-allowed"]]
    if "$ref" in rule:
        return _alternatives(_resolve(str(rule["$ref"]), schema), schema)
    for key in ("oneOf", "anyOf"):
        if key in rule:
            return [text for option in rule[key] for text in _alternatives(option, schema)]
    if "const" in rule:
        return [show_value(rule["const"], quote=False)]
    if "enum" in rule:
        return [show_value(v, quote=False) for v in rule["enum"]]
    kinds = rule.get("type")
    if kinds is None:
        return ["anything"]
    bounds = " and ".join(
        f"{sign} {show_value(rule[key])}"
        for key, sign in BOUNDS.items()
        if key in rule and rule[key] != sys.float_info.max  # refuses infinity: no bound to name
    )
    texts = []
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        if kind == "array" and "items" in rule:
            texts.append("a list of them")
        elif kind == "boolean":
            texts += ["true", "false"]
        elif kind in ("integer", "number") and bounds:
            texts.append(f"{_TYPES[kind]} {bounds}")
        else:
            texts.append(_TYPES.get(kind, kind))
    return texts


def _resolve(ref: str, schema: Mapping[str, Any]) -> Mapping[str, Any]:
    target: Any = schema
    for part in ref.lstrip("#/").split("/"):
        target = target.get(part, {}) if isinstance(target, Mapping) else {}
    return target


def _either(options: list[str]) -> str:
    """``a``, ``a or b``, ``a, b, or c``."""
    if len(options) <= 2:
        return " or ".join(options)
    return ", ".join(options[:-1]) + ", or " + options[-1]


def show_value(value: Any, *, quote: bool = True) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return repr(value) if quote else value
    return str(value)

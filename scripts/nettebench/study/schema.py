"""The config schema (``config.schema.yaml`` here, linked from schemas/) applied, each error in one
line.

The schema owns every rule of one key: types, enums, ranges, required and unknown keys, and the
values each axis may take (one value or a list). jsonschema, given ``profile: {backend:
nvprof2}`` or ``matrix.batch_size: lots``, opens with "... is not valid under any of the given
schemas" and names the key and the allowed values only deep in a long dump; :func:`schema_problem`
says ``profile.backend: 'nvprof2' is not allowed; allowed: torch, nsys, nvprof``, looking inside
``oneOf``/``anyOf`` for the alternative the value was meant to be. :func:`check_value` applies
one cell parameter's rule to one value (the commands' options, :mod:`.cell_options`).

Imports PyYAML and jsonschema (both come with Snakemake), nothing heavy.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from nettebench.study.crossing import ConfigError

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


@functools.cache  # one class per validator kind: extending costs ~1.5 ms, paid once per process
def _strict_integers(validator_class: Any) -> Any:
    """The validator, with YAML's integers: ``256.0`` is a float in YAML (and would be a cell
    ``batch~256.0``), where JSON schema's ``integer`` admits any number with no fraction."""

    def is_integer(checker: Any, instance: Any) -> bool:
        return isinstance(instance, int) and not isinstance(instance, bool)

    checker = validator_class.TYPE_CHECKER.redefine("integer", is_integer)
    return jsonschema.validators.extend(validator_class, type_checker=checker)


# libyaml's loader where PyYAML has it: the schema in 7 ms instead of 66 (every command that
# checks its options reads it at start-up), the same data.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _loaded(path: str) -> dict[str, Any]:
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_LOADER)


def load_schema(path: str | Path = SCHEMA_FILE) -> dict[str, Any]:
    """The schema (read once; do not change it)."""
    return _loaded(str(path))


def schema_problem(config: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """None when ``config`` fits ``schema``; else one line naming the key and what is allowed."""
    validator = _strict_integers(jsonschema.validators.validator_for(schema))(schema)
    errors = list(validator.iter_errors(config))
    if not errors:
        return None
    top = jsonschema.exceptions.best_match(errors)
    # One line: jsonschema's own account (str(top)) would follow it with the whole schema.
    return _summary(_meant_alternative(top), schema)


def check_schema(config: Mapping[str, Any], schema_path: str | Path = SCHEMA_FILE) -> None:
    """Raise :class:`ConfigError` with the schema's most relevant error, in one line."""
    problem = schema_problem(config, load_schema(schema_path))
    if problem:
        raise ConfigError(problem)


def check_value(key: str, value: Any, where: str) -> None:
    """One value of the cell parameter ``key`` (its rule in the schema's ``$defs``); an error
    names ``where``."""
    schema = load_schema()
    rule = {**schema["$defs"][key], "$defs": schema["$defs"]}
    problem = schema_problem(value, rule)
    if problem:
        raise ConfigError(problem.replace("the config", where, 1))


def enum_of(key: str) -> tuple[str, ...]:
    """The values the schema allows a cell parameter with a fixed list (``device``, ...)."""
    return tuple(load_schema()["$defs"][key]["enum"])


def _mismatched(error: jsonschema.ValidationError) -> bool:
    """An alternative the value does not even have the shape of: a wrong type, const or enum at
    the value itself (or a oneOf/anyOf of only such)."""
    if error.relative_path:
        return False
    if error.validator in ("oneOf", "anyOf"):
        return all(_mismatched(sub) for sub in error.context or ())
    return error.validator in ("type", "const", "enum")


def _meant_alternative(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """Inside a oneOf/anyOf, the error of the one alternative the value has the shape of (say
    the mapping in ``null | {backend: ...}``, or the integer in ``an integer >= 1 | a list``);
    the oneOf itself when none or several fit."""
    while error.validator in ("oneOf", "anyOf") and error.context:
        by_alternative: dict[Any, list[jsonschema.ValidationError]] = {}
        for sub in error.context:
            by_alternative.setdefault(sub.relative_schema_path[0], []).append(sub)
        shaped = [
            subs for subs in by_alternative.values() if not all(_mismatched(sub) for sub in subs)
        ]
        if len(shaped) != 1:
            break
        error = jsonschema.exceptions.best_match(shaped[0])
    return error


def _summary(error: jsonschema.ValidationError, schema: Mapping[str, Any]) -> str:
    where = _where(error)
    kind = error.validator
    rule = error.schema if isinstance(error.schema, Mapping) else {}
    if kind == "additionalProperties" and isinstance(error.instance, Mapping):
        known = list(rule.get("properties") or ())
        unknown = sorted(str(key) for key in error.instance if key not in known)
        allowed = ", ".join(known) if known else "none"
        if not error.absolute_path:
            return f"unknown config key(s) {', '.join(unknown)}; allowed: {allowed}"
        return f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {allowed}"
    if kind == "minItems" and error.validator_value == 1:
        return f"{where} is an empty list; give at least one value"
    if kind in ("minProperties", "minItems"):
        what = "entries" if kind == "minProperties" else "items"
        return f"{where} is empty; give at least {error.validator_value} {what}"
    if kind == "required":
        return f"{where}: {error.message.replace(' is a required property', '')} is missing"
    if "x-allowed" in rule or kind in ("oneOf", "anyOf") or kind in _BOUNDS or kind == "not":
        allowed = describe(rule, schema)  # the whole rule: "an integer >= 1", not ">= 1"
    else:
        allowed = _constraint(error, schema)
    return f"{where}: {_show(error.instance)} is not allowed; allowed: {allowed}"


_BOUNDS = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}


def _constraint(error: jsonschema.ValidationError, schema: Mapping[str, Any]) -> str:
    kind, value = error.validator, error.validator_value
    if kind == "enum":
        return ", ".join(_show(v, quote=False) for v in value)
    if kind == "const":
        return _show(value, quote=False)
    if kind == "type":
        return describe({"type": value}, schema)
    if kind == "pattern":
        return f"a string matching {value}"
    if kind == "minLength":
        return "a non-empty string"
    return error.message


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
        return [_show(rule["const"], quote=False)]
    if "enum" in rule:
        return [_show(v, quote=False) for v in rule["enum"]]
    kinds = rule.get("type")
    if kinds is None:
        return ["anything"]
    bounds = " and ".join(
        f"{sign} {_show(rule[key])}"
        for key, sign in _BOUNDS.items()
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


def _where(error: jsonschema.ValidationError) -> str:
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the config"


def _show(value: Any, *, quote: bool = True) -> str:
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

"""The config schema (``config.schema.yaml`` here, linked from schemas/) applied, each error in one
line.

The schema owns every rule of one key: types, enums, ranges, required and unknown keys, and the
values each axis may take (one value or a list). jsonschema, given ``profile: {backend:
nvprof2}`` or ``matrix.batch_size: lots``, opens with "... is not valid under any of the given
schemas" and names the key and the allowed values only deep in a long dump; :func:`schema_problem`
says ``profile.backend: 'nvprof2' is not allowed; allowed: torch, nsys, nvprof``, looking inside
``oneOf``/``anyOf`` for the alternative the value was meant to be. The schema's file, its
the rules' words and one value's check without jsonschema are :mod:`.schema_rules`.

Imports jsonschema (it comes with Snakemake): the workflow and ``python -m nettebench study
config`` use this module, no job does (a GPU node's image need not have jsonschema).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema

from nettebench.study.crossing import ConfigError
from nettebench.study.schema_rules import (
    BOUNDS,
    SCHEMA_FILE,
    describe,
    load_schema,
    show_value,
)


@functools.cache  # one class per validator kind: extending costs ~1.5 ms, paid once per process
def _strict_integers(validator_class: Any) -> Any:
    """The validator, with YAML's integers: ``256.0`` is a float in YAML (and would be a cell
    ``batch~256.0``), where JSON schema's ``integer`` admits any number with no fraction."""

    def is_integer(checker: Any, instance: Any) -> bool:
        return isinstance(instance, int) and not isinstance(instance, bool)

    checker = validator_class.TYPE_CHECKER.redefine("integer", is_integer)
    return jsonschema.validators.extend(validator_class, type_checker=checker)


@functools.cache
def _filling_defaults(validator_class: Any) -> Any:
    """The validator, also writing each property's ``default`` into the mapping it checks where
    the key is missing (jsonschema's recipe, as Snakemake's ``validate`` does it)."""
    check_properties = validator_class.VALIDATORS["properties"]

    def properties(validator: Any, rules: Any, instance: Any, schema: Any) -> Any:
        if isinstance(instance, dict):
            for key, rule in rules.items():
                if isinstance(rule, Mapping) and "default" in rule:
                    instance.setdefault(key, rule["default"])
        yield from check_properties(validator, rules, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": properties})


def schema_problem(
    config: Mapping[str, Any], schema: Mapping[str, Any], *, fill_defaults: bool = False
) -> str | None:
    """None when ``config`` fits ``schema``; else one line naming the key and what is allowed.
    ``fill_defaults``: the schema's ``default`` values are written into ``config`` as it is
    checked, in the same pass."""
    validator_class = _strict_integers(jsonschema.validators.validator_for(schema))
    if fill_defaults:
        validator_class = _filling_defaults(validator_class)
    errors = list(validator_class(schema).iter_errors(config))
    if not errors:
        return None
    top = jsonschema.exceptions.best_match(errors)
    # One line: jsonschema's own account (str(top)) would follow it with the whole schema.
    return _summary(_meant_alternative(top), schema)


def apply_schema(config: dict[str, Any], schema_path: str | Path = SCHEMA_FILE) -> None:
    """The schema applied to a config, once: its ``default`` values written in where keys are
    missing, and the most relevant error raised as :class:`ConfigError`, in one line."""
    problem = schema_problem(config, load_schema(schema_path), fill_defaults=True)
    if problem:
        raise ConfigError(problem)


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
    if "x-allowed" in rule or kind in ("oneOf", "anyOf") or kind in BOUNDS or kind == "not":
        allowed = describe(rule, schema)  # the whole rule: "an integer >= 1", not ">= 1"
    else:
        allowed = _constraint(error, schema)
    return f"{where}: {show_value(error.instance)} is not allowed; allowed: {allowed}"


def _constraint(error: jsonschema.ValidationError, schema: Mapping[str, Any]) -> str:
    kind, value = error.validator, error.validator_value
    if kind == "enum":
        return ", ".join(show_value(v, quote=False) for v in value)
    if kind == "const":
        return show_value(value, quote=False)
    if kind == "type":
        return describe({"type": value}, schema)
    if kind == "pattern":
        return f"a string matching {value}"
    if kind == "minLength":
        return "a non-empty string"
    return error.message


def _where(error: jsonschema.ValidationError) -> str:
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the config"

"""Every threshold the report or the docs state comes from the constant that decides it (issue
[3/5], item 2).

A literal "10 %" or "a tenth" in a table's note goes stale the day its constant changes, and the
reader is told one rule while the code applies another. So:

- in the report's code, no string a reader sees (docstrings and comments aside) spells a
  threshold's value: it is formatted from the constant (``f"{UNSTABLE_CV:.0%}"``);
- in the docs, the README and the report's captions, a paragraph that states a threshold's
  value names its constant, and the constant has that value.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from nettebench.records import conditions, nvml, spread
from nettebench.report import stats
from tests.workflow_helpers import REPO

# Every threshold a reader is told, by the name the docs cite it with.
THRESHOLDS = {
    "OTHER_CPU_SHARE_LIMIT": conditions.OTHER_CPU_SHARE_LIMIT,
    "STEAL_SHARE_LIMIT": conditions.STEAL_SHARE_LIMIT,
    "THROTTLED_SHARE_LIMIT": conditions.THROTTLED_SHARE_LIMIT,
    "GPU_OTHER_UTIL_LIMIT": conditions.GPU_OTHER_UTIL_LIMIT / 100,  # percent of SM
    "UNSTABLE_CV": spread.UNSTABLE_CV,
    "AT_POWER_LIMIT_SHARE": nvml.AT_POWER_LIMIT_SHARE,
    "THROTTLED_READINGS_SHARE": nvml.THROTTLED_READINGS_SHARE,
    "CONFIDENCE": stats.CONFIDENCE,
    "ALPHA": stats.ALPHA,
}
WORDS = {0.1: "a tenth", 0.05: "a twentieth", 0.2: "a fifth", 0.25: "a quarter", 0.5: "half"}
REPORT_CODE = REPO / "scripts" / "nettebench" / "report"
# Prose a reader meets: the README, the docs (measurements.md holds measured numbers, not
# rules) and the report's captions.
PROSE = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "report").rglob("*.rst")),
]
PROSE = [path for path in PROSE if path.name != "measurements.md"]


def _pattern(share: float) -> re.Pattern[str]:
    """A share's literal spellings: ``10 %``, ``10%``, ``a tenth``."""
    number = f"{100 * share:g}"
    spellings = [rf"(?<![\d.\-]){re.escape(number)}\s?%"]
    if share in WORDS:
        spellings.append(rf"\b{WORDS[share]}\b")
    if share == stats.ALPHA:  # a level is also written as a p value: "p < 0.05"
        spellings.append(rf"\bp\s*(?:[<>=]=?|≥|≤|below|above)\s*{share:g}(?![\d])")
    return re.compile("|".join(spellings), re.IGNORECASE)


PATTERNS = {name: _pattern(value) for name, value in THRESHOLDS.items()}


def _reader_strings(source: str) -> list[tuple[int, str]]:
    """The literal text of every string a module's code builds (an f-string's literal parts,
    not what it formats), docstrings left out."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    # an f-string's format spec (the ".0%" of "{CV:.0%}") is how a value is formatted, not text
    specs = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None
        for part in ast.walk(node.format_spec)
    }
    found = []
    for node in ast.walk(tree):
        is_text = isinstance(node, ast.Constant) and isinstance(node.value, str)
        if is_text and id(node) not in docstrings | specs:
            found.append((node.lineno, node.value))
    return found


def test_the_report_formats_every_threshold_from_its_constant():
    literal = [
        f"{path.relative_to(REPO)}:{line}: {name} spelled out in {text!r}"
        for path in sorted(REPORT_CODE.rglob("*.py"))
        for line, text in _reader_strings(path.read_text(encoding="utf-8"))
        for name, pattern in PATTERNS.items()
        if pattern.search(text)
    ]
    assert not literal, "\n".join(literal)


def _paragraphs(path: Path) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")) if p.strip()]


@pytest.mark.parametrize("path", PROSE, ids=lambda p: str(p.relative_to(REPO)))
def test_prose_that_states_a_threshold_names_its_constant(path):
    unnamed = []
    for paragraph in _paragraphs(path):
        stated = {m.group(0) for pattern in PATTERNS.values() for m in pattern.finditer(paragraph)}
        for spelling in stated:
            # the constants with that value, any of which the paragraph must name
            owners = [n for n, p in PATTERNS.items() if p.fullmatch(spelling)]
            if not any(f"`{n}`" in paragraph or f".{n}`" in paragraph for n in owners):
                unnamed.append(f"{spelling!r} (one of {owners}) in: {paragraph[:100]!r}")
    assert not unnamed, "\n".join(unnamed)


def test_the_scan_finds_a_literal_and_accepts_a_named_one():
    """The rule itself: a literal threshold is found, a named one passes, a measured number that
    is no threshold's value is left alone."""
    assert PATTERNS["UNSTABLE_CV"].search("spread by a tenth of their mean")
    assert PATTERNS["UNSTABLE_CV"].search("sd >= 10 % of the mean")
    assert not PATTERNS["UNSTABLE_CV"].search("110 % of the ceiling")
    assert not PATTERNS["CONFIDENCE"].search("86.3 % top-1")
    assert PATTERNS["ALPHA"].search("p >= 0.05") and PATTERNS["ALPHA"].search("p below 0.05")
    assert not PATTERNS["ALPHA"].search("checkpoints 0.05-0.06 s")
    assert [t for _, t in _reader_strings('x = f"{CV:.0%} of the mean"')] == [" of the mean"]

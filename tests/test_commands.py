"""Every command the README and docs/ show: a --help a user can read (no reST markup, the allowed
values of every choice, the defaults, examples on their own lines), bad values that end in one
line, and no abbreviated options; every relative link in them leads to a file and heading.

Through each command's real entry point (its ``main``); the list of commands is read from the
pages themselves, so a command they start to show is checked too.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nettebench.vocabulary.commands import COMMANDS as GROUPED

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# The pages a user reads: the README and one page a topic under docs/.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def _shown(text: str) -> set[str]:
    """The commands a page shows: ``python -m nettebench.x`` or, for a subpackage with grouped
    commands (vocabulary.commands.COMMANDS), ``python -m nettebench.x <command>``; a
    placeholder (``nettebench.<subpackage>``, ``nettebench.benchmarks.{ceiling,...}``) is none."""
    found = set()
    for package, word in re.findall(
        r"python -m (nettebench(?:\.\w+)*)(?!\w|\.[<{\w])(?: ([a-z][\w-]*))?", text
    ):
        grouped = GROUPED.get(package.removeprefix("nettebench."))
        found.add(f"{package} {word}" if grouped and word in grouped else package)
    return found


# Every `python -m nettebench...` the pages show (and the trainer's extension, cell_job).
COMMANDS = sorted(
    set().union(*(_shown(page.read_text()) for page in PAGES)) | {"nettebench.benchmarks.cell_job"}
)


def entry_point(name: str):
    """The ``main(argv)`` that ``python -m name`` runs: a grouped command's module's (with the
    arguments it puts first), the module's own, or for a package run through its ``__main__``,
    its ``cli`` module's."""
    package, _, command = name.partition(" ")
    if name == "nettebench":  # python -m nettebench: the groups

        def top(argv):
            from nettebench.vocabulary.commands import top_level

            sys.exit(top_level(argv))

        return top
    if command:
        module, first = GROUPED[package.removeprefix("nettebench.")][command]
        run = importlib.import_module(f"{package}.{module}").main
        return lambda argv: run([*first, *argv])
    module = importlib.import_module(name)
    if hasattr(module, "main"):
        return module.main
    return importlib.import_module(f"{name}.cli").main


# Commands that take a cell: their precision, device and loader list the allowed values.
CELL_COMMANDS = ("nettebench.training", "nettebench.benchmarks.ceiling", "nettebench.profiling")
_MARKUP = re.compile(r"``|:(class|func|mod|meth|attr):`")


def help_text(name: str, capsys) -> str:
    with pytest.raises(SystemExit) as stopped:
        entry_point(name)(["--help"])
    assert stopped.value.code == 0
    return capsys.readouterr().out


def test_the_readmes_commands_are_found():
    assert "nettebench.training" in COMMANDS and len(COMMANDS) >= 8
    for name in COMMANDS:
        assert callable(entry_point(name)), name


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_no_markup(name, capsys):
    text = help_text(name, capsys)
    assert not _MARKUP.search(text), _MARKUP.search(text)
    assert text.startswith("usage: python -m " + name)


@pytest.mark.parametrize("name", CELL_COMMANDS)
def test_help_lists_allowed_values_and_defaults(name, capsys):
    text = help_text(name, capsys)
    assert "--precision {O0,tf32,O1,O2,O3,bf16,fp32}" in text
    assert "--device {auto,cpu,cuda}" in text and "--loader {pil,cached}" in text
    assert re.search(r"--warmup-steps WARMUP_STEPS\s+.*\(default: \d+\)", text)
    assert re.search(r"training epochs \(default: 10\)", text)
    assert "(default: false)" in text and "(default: False)" not in text


def test_the_ceilings_example_is_a_command_on_its_own_lines(capsys):
    text = help_text("nettebench.benchmarks.ceiling", capsys)
    assert re.search(r"\n    python -m nettebench\.benchmarks\.ceiling .* \\\n        --out", text)
    assert re.search(r"--steps STEPS\s+timed steps \(default: 30\)", text)


BAD_VALUES = [
    ("nettebench.training", ["--precision", "o1"], "argument --precision: invalid choice: 'o1'"),
    ("nettebench.training", ["--model", "resnt18"], "did you mean resnet18"),
    ("nettebench.benchmarks.ceiling", ["--model", "resnt18"], "unknown model 'resnt18'"),
    # the schema's rule for the parameter, its sentence read whole (schemas/config.schema.yaml)
    (
        "nettebench.benchmarks.ceiling",
        ["--epochs", "0"],
        "error: --epochs: 0 is not allowed; allowed: an integer >= 1",
    ),
    (
        "nettebench.benchmarks.ceiling",
        ["--lr", "0"],
        "error: --lr: 0.0 is not allowed; allowed: a number > 0 or none (the reference: 0.1 x "
        "batch_size / 256)",
    ),
    ("nettebench.profiling", ["--loader", "fast"], "argument --loader: invalid choice"),
    ("nettebench.benchmarks.cell_job", ["--device", "gpu"], "argument --device: invalid choice"),
]


@pytest.mark.parametrize(("name", "argv", "expected"), BAD_VALUES, ids=lambda v: str(v)[:24])
def test_a_bad_value_ends_in_one_line(name, argv, expected, tmp_path):
    """The real command, as a user types it: its whole output is the one line."""
    required = ["--data", str(tmp_path), "--out-dir", str(tmp_path), "--ceiling", "c.json"]
    if name == "nettebench.benchmarks.ceiling":
        required = ["--out", str(tmp_path / "c.json")]
    result = subprocess.run(
        [sys.executable, "-m", name, *required, *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = (result.stdout + result.stderr).strip()
    assert result.returncode != 0
    assert "Traceback" not in output and "usage:" not in output, output
    assert len(output.splitlines()) == 1 and expected in output, output


# Links: [text](target) outside code; a target with a scheme (https:, mailto:) is not checked.
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated heading numbered (-1, -2, ...)."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for line in _FENCE.sub("", page.read_text()).splitlines():
        heading = re.match(r"#{1,6} +(.*?) *#*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def relative_links(page: Path) -> list[str]:
    text = _CODE.sub("", _FENCE.sub("", page.read_text()))
    return [t for t in _LINK.findall(text) if not re.match(r"[a-z][a-z+.-]*:", t)]


def test_the_anchor_rule_is_githubs():
    page = ROOT / "docs" / "honest-numbers.md"
    assert "spread-every-timing-is-a-distribution" in heading_anchors(page)
    assert "timing-conditions-and-caveats" in heading_anchors(page)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    """Every relative link of README.md and docs/*.md names a file that exists, and its
    #anchor a heading of that file (or of the page itself, for a bare #anchor)."""
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT)}")
        elif anchor and anchor not in heading_anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, broken


def test_every_page_of_docs_is_in_the_readmes_contents():
    listed = {Path(t.partition("#")[0]).name for t in relative_links(README)}
    assert {page.name for page in PAGES[1:]} <= listed


def test_an_abbreviated_option_is_refused(tmp_path, capsys):
    """argparse's default reads `--epoch 2` as `--epochs 2` (and then trains a default cell);
    every command refuses it instead."""
    argv = ["--data", str(tmp_path), "--out-dir", str(tmp_path), "--epoch", "2"]
    with pytest.raises(SystemExit) as stopped:
        entry_point("nettebench.training")(argv)
    assert stopped.value.code == 2
    assert "unrecognized arguments: --epoch 2" in capsys.readouterr().err


def _parser_calls(path: Path):
    """Every ArgumentParser(...) and add_parser(...) call of a module, with its keywords."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name in {"ArgumentParser", "add_parser"}:
                yield name, node.lineno, {kw.arg: kw.value for kw in node.keywords}


def test_every_parser_refuses_abbreviations():
    """CommandParser sets allow_abbrev=False; any other parser of the package (or a subcommand
    parser not made by CommandParser) says so itself."""
    open_to_prefixes = []
    for path in sorted((ROOT / "scripts" / "nettebench").rglob("*.py")):
        text = path.read_text()
        for name, line, keywords in _parser_calls(path):
            refused = isinstance(keywords.get("allow_abbrev"), ast.Constant) and (
                keywords["allow_abbrev"].value is False
            )
            inherited = name == "add_parser" and "parser_class=CommandParser" in text
            if not (refused or inherited):
                open_to_prefixes.append(f"{path.relative_to(ROOT)}:{line} {name}")
    assert not open_to_prefixes, open_to_prefixes


def test_every_grouped_command_runs_a_main():
    """Each line of vocabulary.commands.COMMANDS names a module of its subpackage with a main."""
    for package, commands in GROUPED.items():
        for command, (module, _) in commands.items():
            found = importlib.import_module(f"nettebench.{package}.{module}")
            assert callable(getattr(found, "main", None)), f"{package} {command}"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["-m", "nettebench.benchmarks.ceiling", "--out", "c.json"],
            "nettebench.benchmarks.ceiling",
        ),
        (
            ["-m", "nettebench.benchmarks", "ceiling", "--out", "c.json"],
            "nettebench.benchmarks ceiling",
        ),
        (["-m", "nettebench.benchmarks", "cell-job"], "nettebench.benchmarks cell-job"),
        (["-m", "nettebench.benchmarks", "loader"], None),
        (["-m", "nettebench.report", "tables"], None),
    ],
)
def test_a_cell_command_knows_itself_by_either_name(argv, expected, monkeypatch):
    """A cell command restarts itself (builds.activate) whether run as its module or grouped."""
    from nettebench.builds import activate

    monkeypatch.setattr(sys, "orig_argv", [sys.executable, *argv], raising=False)
    assert activate._cell_command() == expected


def test_the_top_level_help_lists_every_group_and_each_runs(capsys):
    from nettebench.vocabulary import commands

    assert commands.top_level(["--help"]) == 0
    listed = capsys.readouterr().out
    assert set(commands.GROUPS) == set(GROUPED) | set(commands.SINGLE)
    for group in commands.GROUPS:
        assert f"\n  {group} " in listed, group
    with pytest.raises(SystemExit) as done:  # a group's command, through the top level
        commands.top_level(["study", "config", "--help"])
    assert done.value.code == 0 and "python -m nettebench.study config" in capsys.readouterr().out
    assert commands.top_level(["trainer"]) == 2
    assert "unknown group 'trainer'; choose from datasets" in capsys.readouterr().err


def test_a_command_module_run_by_its_path_names_the_command_form():
    """``python -m nettebench.datasets.synthetic`` ran, printed nothing and exited 0. Every
    grouped command's module either runs (its own main block) or ends in ``moved``; one of
    them is started for real (the others would only repeat the same two lines)."""
    for package, commands in GROUPED.items():
        for inner, _ in commands.values():
            module = f"nettebench.{package}.{inner}"
            text = (ROOT / "scripts" / Path(*module.split("."))).with_suffix(".py").read_text()
            assert '__name__ == "__main__"' in text, f"{module} runs silently by its path"
    done = subprocess.run(
        [sys.executable, "-m", "nettebench.builds.build"],
        capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "scripts")},
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr == (
        "nettebench.builds.build is not run by its path: use python -m nettebench builds "
        "clone|wheel|install (see --help)\n"
    )

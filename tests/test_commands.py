"""Every command the README and docs/ show: a --help a user can read (no reST markup, the allowed
values of every choice, the defaults, examples on their own lines), bad values that end in one
line, and no abbreviated options; every relative link in them leads to a file and heading.

Through the package's one entry point, ``python -m nettebench <group> [<command>]``
(:func:`nettebench.vocabulary.commands.top_level`); the list of commands is the command table's
and what the pages show, so a command they start to show is checked too. Every old way in (a
subpackage or a command's module run by its path) ends in one line naming the new form.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import re
import runpy
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from nettebench.vocabulary.commands import COMMANDS as GROUPED
from nettebench.vocabulary.commands import SINGLE, top_level

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# The pages a user reads: the README and one page a topic under docs/.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def _shown(text: str) -> set[str]:
    """The commands a page shows, as the words after ``python -m``: ``nettebench``, ``nettebench
    training``, ``nettebench report tables`` (a group's command only where the table has it; a
    placeholder, ``nettebench <group>``, is the top level)."""
    found = set()
    for group, word in re.findall(
        r"python -m nettebench(?: ([a-z][\w-]*))?(?: ([a-z][\w-]*))?", text
    ):
        words = ["nettebench"]
        if group in GROUPED or group in SINGLE:
            words.append(group)
            if word in GROUPED.get(group, {}):
                words.append(word)
        found.add(" ".join(words))
    return found


# Every command of the table, and every `python -m nettebench ...` the pages show.
TABLE = {f"nettebench {group}" for group in SINGLE} | {
    f"nettebench {group} {command}" for group, commands in GROUPED.items() for command in commands
}
COMMANDS = sorted(set().union(*(_shown(page.read_text()) for page in PAGES)) | TABLE)


def entry_point(name: str):
    """What ``python -m <name> ARGV`` runs, as ``main(argv)``: the package's ``__main__``,
    :func:`top_level`, with the command's words first."""
    words = name.split()[1:]

    def run(argv):
        sys.exit(top_level([*words, *argv]))

    return run


# Commands that take a cell: their precision, device and loader list the allowed values.
CELL_COMMANDS = ("nettebench training", "nettebench benchmarks ceiling", "nettebench profiling")
_MARKUP = re.compile(r"``|:(class|func|mod|meth|attr):`")


def help_text(name: str, capsys) -> str:
    with pytest.raises(SystemExit) as stopped:
        entry_point(name)(["--help"])
    assert stopped.value.code == 0
    return capsys.readouterr().out


def test_the_pages_commands_are_found():
    shown = set().union(*(_shown(page.read_text()) for page in PAGES))
    assert {"nettebench training", "nettebench report tables", "nettebench"} <= shown
    assert shown <= TABLE | {"nettebench"}, shown - TABLE


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
    text = help_text("nettebench benchmarks ceiling", capsys)
    assert re.search(r"\n    python -m nettebench benchmarks ceiling .* \\\n        --out", text)
    assert re.search(r"--steps STEPS\s+timed steps \(default: 30\)", text)


BAD_VALUES = [
    ("nettebench training", ["--precision", "o1"], "argument --precision: invalid choice: 'o1'"),
    ("nettebench training", ["--model", "resnt18"], "did you mean resnet18"),
    ("nettebench benchmarks ceiling", ["--model", "resnt18"], "unknown model 'resnt18'"),
    # the schema's rule for the parameter, its sentence read whole (schemas/config.schema.yaml)
    (
        "nettebench benchmarks ceiling",
        ["--epochs", "0"],
        "error: --epochs: 0 is not allowed; allowed: an integer >= 1",
    ),
    (
        "nettebench benchmarks ceiling",
        ["--lr", "0"],
        "error: --lr: 0.0 is not allowed; allowed: a number > 0 or none (the reference: 0.1 x "
        "batch_size / 256)",
    ),
    ("nettebench profiling", ["--loader", "fast"], "argument --loader: invalid choice"),
    ("nettebench benchmarks cell-job", ["--device", "gpu"], "argument --device: invalid choice"),
]


def _bad_value_argv(name: str, argv: list[str], folder: Path) -> list[str]:
    """The options a command requires (so only the bad value is wrong), then the bad value."""
    required = ["--data", str(folder), "--out-dir", str(folder), "--ceiling", "c.json"]
    if name == "nettebench benchmarks ceiling":
        required = ["--out", str(folder / "c.json")]
    return [*required, *argv]


def _assert_one_line(output: str, expected: str) -> None:
    """The whole output is one line saying what was wrong: no traceback, no usage block."""
    assert "Traceback" not in output and "usage:" not in output, output
    assert len(output.splitlines()) == 1 and expected in output, output


@pytest.mark.parametrize(("name", "argv", "expected"), BAD_VALUES, ids=lambda v: str(v)[:24])
def test_a_bad_value_ends_in_one_line(name, argv, expected, tmp_path, capsys):
    """Through the package's entry point in this process: the whole output is the one line,
    and the exit status says it failed (the real process, as a user types it, is the test
    below)."""
    with pytest.raises(SystemExit) as stopped:
        entry_point(name)(_bad_value_argv(name, argv, tmp_path))
    captured = capsys.readouterr()
    output = (captured.out + captured.err).strip()
    assert stopped.value.code not in (0, None)
    _assert_one_line(output, expected)


@pytest.mark.parametrize("command", sorted({name for name, _, _ in BAD_VALUES}))
def test_a_bad_value_typed_as_a_user_types_it_ends_in_one_line(command, tmp_path):
    """The real command in a process of its own, one bad value each: nothing its imports
    print (a warning, a notice) joins the one line."""
    name, argv, expected = next(case for case in BAD_VALUES if case[0] == command)
    result = subprocess.run(
        [sys.executable, "-m", *name.split(), *_bad_value_argv(name, argv, tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = (result.stdout + result.stderr).strip()
    assert result.returncode != 0
    _assert_one_line(output, expected)


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
        entry_point("nettebench training")(argv)
    assert stopped.value.code == 2
    assert "unrecognized arguments: --epoch 2" in capsys.readouterr().err


def _parser_calls(path: Path):
    """Every ArgumentParser(...), add_parser(...) and add_subparsers(...) call of a module, with
    its keywords."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name in {"ArgumentParser", "add_parser", "add_subparsers"}:
                yield name, node.lineno, {kw.arg: kw.value for kw in node.keywords}


def _inherits_the_refusal(calls) -> bool:
    """A subcommand parser is its parent's class unless add_subparsers names another
    (argparse's default): in a module whose parsers are all commands.Parser (no plain
    ArgumentParser) and whose add_subparsers name no class or CommandParser, it refuses
    abbreviations as its parent does."""
    named = [
        keywords["parser_class"]
        for name, _, keywords in calls
        if name == "add_subparsers" and "parser_class" in keywords
    ]
    plain = any(name == "ArgumentParser" for name, _, _ in calls)
    return not plain and all(ast.unparse(cls) == "CommandParser" for cls in named)


def test_every_parser_refuses_abbreviations():
    """commands.Parser sets allow_abbrev=False; any other parser of the package says so itself,
    and a subcommand parser inherits it only from a commands.Parser parent."""
    open_to_prefixes = []
    for path in sorted((ROOT / "scripts" / "nettebench").rglob("*.py")):
        calls = list(_parser_calls(path))
        for name, line, keywords in calls:
            refused = isinstance(keywords.get("allow_abbrev"), ast.Constant) and (
                keywords["allow_abbrev"].value is False
            )
            inherited = name == "add_parser" and _inherits_the_refusal(calls)
            if name != "add_subparsers" and not (refused or inherited):
                open_to_prefixes.append(f"{path.relative_to(ROOT)}:{line} {name}")
    assert not open_to_prefixes, open_to_prefixes


def test_a_subcommand_refuses_an_abbreviation_as_its_parent_does(capsys):
    """The rule the static check above relies on, run: builds' steps are commands.Parser."""
    from nettebench.builds.build import build_parser

    argv = ["install", "--wheel-manifest", "w", "--wheel-dir", "d", "--prefix", "p", "--manif", "m"]
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(argv)
    assert stopped.value.code == 2
    assert "required: --manifest" in capsys.readouterr().err  # `--manif` is not `--manifest`


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
            ["-m", "nettebench", "benchmarks", "ceiling", "--out", "c.json"],
            "nettebench benchmarks ceiling",
        ),
        (["-u", "-m", "nettebench", "benchmarks", "cell-job"], "nettebench benchmarks cell-job"),
        (["-m", "nettebench", "training", "--data", "d"], "nettebench training"),
        (["-m", "nettebench", "profiling"], "nettebench profiling"),
        (["-m", "nettebench", "benchmarks", "loader"], None),
        (["-m", "nettebench", "report", "tables"], None),
        (["-m", "nettebench.benchmarks.ceiling"], None),  # the old form runs no cell now
    ],
)
def test_a_cell_command_knows_itself_by_its_words(argv, expected, monkeypatch):
    """A cell command restarts itself (builds.activate) by the words it was run as, also in a
    process torchrun started (``python -u -m nettebench benchmarks cell-job ...``)."""
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
    assert done.value.code == 0 and "python -m nettebench study config" in capsys.readouterr().out
    assert commands.top_level(["trainer"]) == 2
    assert "unknown group 'trainer'; choose from datasets" in capsys.readouterr().err


def old_forms() -> dict[str, str]:
    """Every old way in, from the command table: each group's package (``python -m
    nettebench.report``) and each command's module (``python -m nettebench.benchmarks.ceiling``,
    ``nettebench.training.cli``) -> the start of the form its one line must name."""
    forms = {}
    for group, commands in GROUPED.items():
        forms[f"nettebench.{group}"] = f"python -m nettebench {group} "
        for inner, _ in commands.values():
            forms[f"nettebench.{group}.{inner}"] = f"python -m nettebench {group} "
    for group, (inner, _) in SINGLE.items():
        forms[f"nettebench.{group}"] = f"python -m nettebench {group} "
        forms[f"nettebench.{inner}"] = f"python -m nettebench {group} "
    return forms


def run_as_main(module: str, argv: list[str]) -> tuple[object, str, str]:
    """``python -m module ARGV`` in this process (runpy, as ``-m`` runs it): the exit status,
    standard output, standard error."""
    err, out = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = [module, *argv]
    try:
        # warnings: runpy's "found in sys.modules" (other tests imported the module)
        with (
            contextlib.redirect_stderr(err),
            contextlib.redirect_stdout(out),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore", RuntimeWarning)
            runpy.run_module(module, run_name="__main__")
        code = None
    except SystemExit as stop:
        code = stop.code
    finally:
        sys.argv = saved
    return code, out.getvalue(), err.getvalue()


def test_every_old_way_in_ends_in_one_line_naming_the_new_form():
    """Each module that once ran a command (``python -m nettebench.benchmarks.ceiling`` timed
    the ceiling, ``python -m nettebench.report tables`` wrote the tables), run as ``__main__``
    with a command's arguments: exit status 2, nothing on standard output, one line on standard
    error naming the command's form (a group's package: the command its argument names). One
    of them is started for real below."""
    wrong = []
    for module, form in sorted(old_forms().items()):
        group = module.split(".")[1]
        argv = ["--help"]
        if module == f"nettebench.{group}" and group in GROUPED:
            command = next(iter(GROUPED[group]))
            argv, form = [command, "--help"], f"{form}{command} "
        code, out, err = run_as_main(module, argv)
        lines = err.splitlines()
        one_line = len(lines) == 1 and f"use {form}" in lines[0] + " "
        if not (code == 2 and out == "" and one_line):
            wrong.append(f"{module}: exit {code}, {lines[:2]} {out[:80]!r}")
    assert not wrong, wrong


def test_no_page_or_rule_shows_an_old_form():
    """The README, docs/, the rules and the Makefile show the one form only (an old form there
    would end in the moved line: this reads what a user copies)."""
    places = [*PAGES, ROOT / "Makefile", ROOT / "Snakefile", *sorted(ROOT.glob("rules/*.smk"))]
    old = re.compile(r"python3? -m nettebench\.[a-z]|-m nettebench\.(?:benchmarks|training)\b")
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in places
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if old.search(line)
    ]
    assert not found, found


def test_an_old_form_run_for_real_names_the_new_form(tmp_path):
    """``python -m nettebench.report tables``, started as a user would: the one line, exit
    status 2."""
    done = subprocess.run(
        [sys.executable, "-m", "nettebench.report", "tables", "--out-dir", str(tmp_path / "t")],
        capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "scripts")}, timeout=120,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert not (tmp_path / "t").exists()
    assert done.stderr == (
        "nettebench.report is not run by its path: use python -m nettebench report tables "
        "(see --help)\n"
    )


# What a user gets: everything but the developers' pages (development, measurements) and tests.
_PRODUCT = ("README.md", "config.yaml", "Snakefile", "Makefile", "docs", "rules", "scripts")
_PRODUCT += ("report", "profiles", "schemas", "envs")
_DEVELOPERS_PAGES = {"development.md", "measurements.md"}


def test_nothing_in_the_product_points_outside_the_project():
    """A user's clone holds no ../shared: no user-facing file may cite it."""
    pointing = []
    for name in _PRODUCT:
        top = ROOT / name
        for path in [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()):
            if path.name in _DEVELOPERS_PAGES or path.suffix in {".pyc", ".png"}:
                continue
            if "../shared" in path.read_text(errors="ignore"):
                pointing.append(str(path.relative_to(ROOT)))
    assert not pointing, pointing


def test_the_nettebench_console_command_runs_the_same_commands():
    """pyproject's [project.scripts]: ``nettebench <group> ...`` is ``python -m nettebench``."""
    command = Path(sys.executable).with_name("nettebench")
    assert command.is_file(), f"{command} missing: the package is installed without its scripts"
    typed = subprocess.run([command, "--help"], capture_output=True, text=True, timeout=60)
    module = subprocess.run(
        [sys.executable, "-m", "nettebench", "--help"], capture_output=True, text=True, timeout=60
    )
    assert typed.returncode == module.returncode == 0, typed.stderr
    assert typed.stdout == module.stdout and "groups" in typed.stdout
    wrong = subprocess.run([command, "no-such-group"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "unknown group 'no-such-group'" in wrong.stderr

"""The mutation tool's operators (tests/mutate.py), on small snippets: each site is listed once
and applying it writes the expected source. No pytest runs of mutants here."""

from __future__ import annotations

import textwrap

import mutate as M

SNIPPET = textwrap.dedent(
    '''
    """The module's docstring: 2 words."""
    from __future__ import annotations


    def f(xs: list[int], label: str = "total") -> str:
        """A docstring with 3 in it."""
        best = max(xs)
        if any(x < 0 for x in xs):
            return ""
        return f"{label}: {best:.1f}"
    '''
)


def _mutants(source: str) -> dict[str, str]:
    """{site description: mutant source} for every site of ``source``."""
    return {s.what: M.mutant(source, i) for i, s in enumerate(M.sites(source))}


def test_sites_and_mutants_are_numbered_alike():
    found = M.sites(SNIPPET)
    unmutated = M.mutant(SNIPPET, None)
    assert "docstring" not in unmutated and "def f(" in unmutated
    for index in range(len(found)):  # each site changes the code, each in its own way
        assert M.mutant(SNIPPET, index) != unmutated
    assert len({M.mutant(SNIPPET, i) for i in range(len(found))}) == len(found)


def test_statement_deletion_replaces_one_statement_with_pass_and_skips_docstrings():
    mutants = _mutants(SNIPPET)
    assert "delete `best = max(xs)`" in mutants
    assert "    pass\n    if any(" in mutants["delete `best = max(xs)`"]
    assert "delete `if any((x < 0 for x in xs)):`" in mutants
    assert "delete `return ''`" in mutants
    kinds = [s.what for s in M.sites(SNIPPET) if s.kind == "stmt"]
    # no docstring, import or def is deleted
    assert not [k for k in kinds if "docstring" in k or "import" in k or "def " in k]
    assert len(kinds) == 4  # the assignment, the if, its return, the last return


def test_string_constants_are_emptied_or_filled_but_not_docstrings_or_format_specs():
    found = [s for s in M.sites(SNIPPET) if s.kind == "str"]
    assert [s.what for s in found] == ["'total' -> ''", "'' -> 'XX'", "': ' -> ''"]
    mutants = _mutants(SNIPPET)
    assert 'label: str=""' in mutants["'total' -> ''"].replace("''", '""')
    assert "return 'XX'" in mutants["'' -> 'XX'"]
    assert "{best:.1f}" in mutants["': ' -> ''"] and ": {" not in mutants["': ' -> ''"]


def test_numbers_change_and_annotations_and_docstrings_do_not():
    assert [s.what for s in M.sites(SNIPPET) if s.kind == "const"] == ["0 -> 1"]
    source = "def g(n: int = 3) -> float:\n    return n * 0.5 + 1\n"
    mutants = _mutants(source)
    assert set(mutants) >= {"3 -> 6", "0.5 -> 1.0", "1 -> 0", "Mult -> Div", "Add -> Sub"}
    assert "return n / 0.5 + 1" in mutants["Mult -> Div"]


def test_any_all_and_min_max_calls_swap_by_name():
    mutants = _mutants(SNIPPET)
    assert "best = min(xs)" in mutants["max() -> min()"]
    assert "if all((x < 0 for x in xs))" in mutants["any() -> all()"]
    source = "y = all(a) or min(b, c)\nz = obj.max(d)\n"
    mutants = _mutants(source)
    assert "y = any(a) or min(b, c)" in mutants["all() -> any()"]
    assert "y = all(a) or max(b, c)" in mutants["min() -> max()"]
    assert not [w for w in mutants if w.startswith("max")]  # a method named max is not a call


def test_a_function_that_is_only_a_docstring_keeps_a_body():
    source = 'def h():\n    """Only a docstring."""\n\n\nx = h()\n'
    assert [s.what for s in M.sites(source)] == ["delete `x = h()`"]
    assert "def h():\n    pass" in M.mutant(source, None)


def test_a_site_knows_its_statements_lines_for_the_coverage_filter():
    source = "x = (1 +\n     2)\nif x:\n    y = 3\n"
    by_what = {s.what: s for s in M.sites(source)}
    assert by_what["Add -> Sub"].lines == (1, 2)
    assert by_what["3 -> 6"].lines == (4, 4)
    assert by_what["delete `if x:`"].lines == (3, 4)


def test_the_tables_show_the_counts_and_the_survivors_source_line():
    site = M.Site("op", 2, "Add -> Sub", (2, 2))
    outcome = M.Outcome("m.py", total=4, killed=3, timeouts=1, survivors=[(site, "survived")])
    outcome.lines = ["a = 1", "b = a + 1"]
    assert "| m.py | 4 | 3 | 1 | 0 | 1 | 75% |" in M.table([outcome])
    assert "| m.py | 2:0 | Add -> Sub | survived | `b = a + 1` | |" in M.survivors_markdown(
        [outcome]
    )


# The four kinds of intent the audit of issue [4/5] found surviving, each on the line it hit.


def test_a_mark_dropped_keyword_dict_entry_and_added_text():
    source = (
        "found.update(gpu=name, driver=version)\n"
        "row = {'status': s, 'note': n}\n"
        "text = value + f' ({k}/{n})'\n"
    )
    mutants = _mutants(source)
    assert "found.update(gpu=name)" in mutants["drop `driver=` from found.update()"]
    assert "row = {'status': s}" in mutants["drop the entry 'note'"]
    assert mutants["drop the mark `+ f' ({k}/{n})'`"].endswith("\ntext = value")


def test_the_first_element_standing_for_all():
    source = "ok = 'ok' if 'ok' in statuses else statuses[0]\ntotal = [f(x) for x in xs]\n"
    mutants = _mutants(source)
    assert "'ok' in list(statuses)[:1]" in mutants["only the first of `statuses`"]
    assert "for x in list(xs)[:1]]" in mutants["only the first of `xs`"]
    loop = _mutants("for name in names:\n    write(name)\n")
    assert "for name in list(names)[:1]:" in loop["only the first of `names`"]


def test_a_rounding_before_a_comparison():
    source = "supported = not low <= 1 <= high\n"
    mutants = _mutants(source)
    assert "not round(low, 2) <= 1 <= high" in mutants["round `low` before comparing"]
    assert "1 <= round(high, 2)" in mutants["round `high` before comparing"]
    assert not [w for w in mutants if w.startswith("round `1`")]  # a constant is left alone
    assert not [w for w in _mutants("same = a == b\n") if w.startswith("round")]
    assert not [w for w in _mutants("few = len(xs) < len(ys)\n") if w.startswith("round")]


def test_an_order_swapped_arguments_and_displays():
    source = "r = ratio_interval(found, base, 0.95)\nfor n in [*extras, *RESULT]:\n    w(n)\n"
    mutants = _mutants(source)
    assert (
        "ratio_interval(base, found, 0.95)"
        in mutants["swap the first two arguments of ratio_interval()"]
    )
    assert "for n in [*RESULT, *extras]:" in mutants["swap the first two of `[*extras, *RESULT]`"]
    assert not [w for w in _mutants("f(a, a)\nx, y = y, x\n") if "first two of `x, y`" in w]

"""Every table row names what tells it apart from its neighbours (fake cells, no training).

Two seeds, two machines (labelled, identical hardware) and two loaders of one model and
precision, aggregated together: in every table a row's label must differ from every other
row's of that table, and the timing-conditions rows name their seed and machine.
"""

from __future__ import annotations

import pytest
import record_factory as rf
from test_aggregate import md_tables

from nettebench.report import aggregate as agg

# Tables whose rows other helpers own (their grouping is being rebuilt there).
_OWNED_ELSEWHERE = ("cpu_vs_gpu",)


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    root = tmp_path_factory.mktemp("merged")
    paths = []
    for machine in ("m1", "m2"):
        for loader in ("pil", "cached"):
            for seed in (0, 1):
                extra = {"machine": machine, **({"loader": loader} if loader != "pil" else {})}
                paths.append(
                    rf.make_cell(
                        root / machine,
                        model="resnet18",
                        precision="O0",
                        seed=seed,
                        extra_cell=extra,
                        conditions=rf.window(started_at=1_700_000_000.0 + 1000 * len(paths)),
                    )
                )
    return agg.aggregate(paths, root / "tables")


@pytest.mark.parametrize("name", [n for n in agg.MARKDOWN_TABLES if n not in _OWNED_ELSEWHERE])
def test_no_two_rows_of_a_table_read_alike(merged, name):
    for heading, rows in md_tables(merged[name].read_text()):
        labels = [row[0] for row in rows[1:]]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        assert not repeated, f"{name}, table {heading!r}: rows {repeated} read alike"


def test_timing_conditions_rows_name_seed_and_machine(merged):
    (_, rows), *_ = md_tables(merged["timing_conditions"].read_text())
    labels = [row[0] for row in rows[1:] if row[1] == "epochs"]
    assert len(labels) == 8
    for machine in ("m1", "m2"):
        for seed in (0, 1):
            assert sum(f"seed {seed}" in x and f"machine {machine}" in x for x in labels) == 2


def _profile(path, precision, seed=0, machine=None, gpu="NVIDIA H200"):
    cell = {"dataset": "d", "model": "resnet18", "precision": precision, "batch_size": 256}
    cell.update(seed=seed, machine=machine)
    record = {
        "status": "ok",
        "cell": cell,
        "backend": "torch",
        "window": {"steps_profiled": 20},
        "device": {"type": "cuda", "name": gpu},
    }
    return {"record": record, "path": path}


def test_top_kernels_labels_read_one_way_and_never_as_a_results_path():
    """Five profiles (two seeds of bf16, two machines' O0, one O3): every label says what
    tells it apart, in one form, and none falls back to a results path."""
    from nettebench.report.frames.kernels import cells_frame

    profiles = [
        _profile("results/profiles/d/model~resnet18/precision~bf16/seed~0", "bf16", seed=0),
        _profile("results/profiles/d/model~resnet18/precision~bf16/seed~1", "bf16", seed=1),
        _profile("imports/m1/profiles/d/model~resnet18/precision~O0", "O0", machine="m1"),
        _profile("imports/m2/profiles/d/model~resnet18/precision~O0", "O0", machine="m2"),
        _profile("results/profiles/d/model~resnet18/precision~O3", "O3"),
    ]
    labels = list(cells_frame(profiles)["label"])
    assert len(set(labels)) == 5
    assert not [label for label in labels if "profiles/" in label or "results" in label]
    assert "resnet18 (machine default) bf16 · seed 1" in labels
    assert "resnet18 (machine m2) O0 · seed 0" in labels


def test_profiles_alike_in_everything_but_their_folder_name_only_what_differs():
    from nettebench.report.frames.kernels import cells_frame

    profiles = [_profile(f"imports/{name}/profiles/d/x", "O3") for name in ("copy-a", "copy-b")]
    assert sorted(cells_frame(profiles)["label"]) == [
        "resnet18 O3 · copy-a/profiles/d/x",
        "resnet18 O3 · copy-b/profiles/d/x",
    ]


def test_a_merged_front_page_sets_the_machines_side_by_side(merged, tmp_path):
    headline = merged["headline"].read_text()
    assert "Machines side by side" in headline and "<h1>" not in headline
    single = agg.aggregate([rf.make_cell(tmp_path, seed=s) for s in (0, 1)], tmp_path / "t")
    assert "Machines side by side" not in single["headline"].read_text()


def test_the_caveats_line_is_red_on_its_strong_text_too():
    """Snakemake's report styles the page with Tailwind's `prose`, which colours every
    <strong> (--tw-prose-bold): a colour on the <p> alone left the line black."""
    from nettebench.report import front_page

    rules = [rule.strip() for rule in front_page.REPORT_CSS.split("}") if "caveats" in rule]
    assert any("p.caveats strong" in rule and "color" in rule for rule in rules), rules

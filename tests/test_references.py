"""Published references beside the study's cells (report.tables.references): matched by model,
precision and GPU name only, as a percentage of the published number, every recipe difference
named; a study on a CPU says that no reference matches its device."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import record_factory as F

from nettebench.report.aggregate import aggregate
from nettebench.report.references import REFERENCES

H100 = "NVIDIA H100 80GB HBM3"  # torch's name for an H100 SXM5
A100 = "NVIDIA A100-SXM4-80GB"
BUSY = ("other processes used 48% of the job's 16 CPUs (460.8 CPU-s in 60.0 s)",)


def _published(gpu: str, precision: str) -> float:
    """The number as the source published it (copied here from the source, not the module)."""
    return {("H100", "O1"): 2616, ("H100", "tf32"): 1753, ("A100", "O1"): 2470,
            ("A100", "tf32"): 938}[(gpu, precision)]  # fmt: skip


def _table(tmp_path, paths) -> str:
    """The section that sets references beside the cells (the list of references follows)."""
    text = aggregate(paths, tmp_path / "tables")["published_references"].read_text()
    beside, listed = text.split("## The references (version ")
    assert "| resnet50 O1, H100 80GB SXM5 | 2,616 |" in listed  # the list is always there
    return beside


def _row(table: str, start: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(f"| {start}"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_versioned_references_carry_the_numbers_their_sources_published():
    found = {(r.gpu.split()[0], r.precision): r.img_s for r in REFERENCES}
    assert found == {
        ("A100", "tf32"): 938,
        ("A100", "O1"): 2470,
        ("H100", "O1"): 2616,
        ("H100", "tf32"): 1753,
    }
    assert all(r.source and r.date and r.framework and r.data for r in REFERENCES)


def test_an_h100_cell_is_set_beside_lambdas_number_through_its_compute_ceiling(tmp_path):
    """Lambda measured on synthetic batches: the cell's ceiling (batches on the device) is the
    like-for-like number, 2,800 of 2,616 = 107 %; the batch and framework differ and say so."""
    cell = F.make_cell(
        tmp_path, model="resnet50", precision="O1", device_name=H100, train_img_s=2000.0,
        conditions=F.window(),
    )  # fmt: skip
    F.make_ceiling(cell, img_s=2800.0, conditions=F.window())
    other = F.make_cell(tmp_path, model="resnet18", precision="O1", device_name=H100)
    table = _table(tmp_path, [cell, other])
    row = _row(table, "resnet50 O1, H100 80GB SXM5")
    assert row[1] == "2,616"
    assert row[2].startswith("2,800") and "(compute ceiling)" in row[2]
    assert row[3] == f"{100 * 2800 / _published('H100', 'O1'):.0f} %"
    assert "batch: theirs 1280, ours 256" in row[4]
    assert "framework: theirs PyTorch 1.13.0a0" in row[4]
    assert "data:" not in row[4]  # both on batches already on the GPU
    assert "A100" not in _row(table, "resnet50 O1")[0]  # the A100 numbers are not this GPU's
    assert sum(line.startswith("| resnet50 O1, ") for line in table.splitlines()) == 1


def test_without_a_ceiling_the_trained_rate_is_compared_and_the_pipeline_named(tmp_path):
    busy = F.window(0.48, reasons=BUSY)
    cell = F.make_cell(
        tmp_path, model="resnet50", precision="tf32", device_name=A100, train_img_s=700.0,
        conditions=busy,
    )  # fmt: skip
    row = _row(_table(tmp_path, [cell]), "resnet50 tf32, A100")
    assert row[2] == "700‡ (trained)"
    assert row[3] == f"{100 * 700 / _published('A100', 'tf32'):.0f} %"
    assert f"data: theirs ImageNet through DALI, ours {F.DATASET} through the pil loader" in row[4]
    assert "batch:" not in row[4]  # 256 on both sides


def test_a_cpu_study_is_told_no_reference_matches_its_device(tmp_path):
    cells = [
        F.make_cell(tmp_path, model="resnet50", precision=p, device_type="cpu")
        for p in ("fp32", "bf16")
    ]
    table = _table(tmp_path, cells)
    assert "No published reference matches this device" in table
    assert f"cpu ({F.CPU_MODEL})" in table
    assert "ours / published" not in table
    runs = pd.read_csv(tmp_path / "tables" / "runs.csv")
    assert set(runs["device_type"]) == {"cpu"}


def test_the_reference_profile_replays_the_closest_recipe_in_one_cell():
    """profiles/reference: ResNet-50, AMP (O1), channels_last, batch 256 (DeepLearningExamples'
    batch), 224 px, one GPU, with its compute ceiling (the synthetic-data number)."""
    import yaml
    from snakemake.utils import validate

    from nettebench.study.workflow import Study

    root = Path(__file__).resolve().parent.parent
    config = yaml.safe_load((root / "profiles" / "reference" / "study.yaml").read_text())
    validate(config, str(root / "schemas" / "config.schema.yaml"))
    study = Study.from_config(config)
    (metrics,) = study.metrics_files()
    assert study.ceiling_files() == [metrics.replace("metrics.json", "ceiling.json")]
    _, _, dataset, *path, _ = metrics.split("/")
    cell = study.cell("matrix", dataset, "/".join(path))
    amp = next(r for r in REFERENCES if r.precision == "O1" and "DeepLearningExamples" in r.source)
    assert (cell.model, cell.precision, cell.batch_size) == (amp.model, amp.precision, 256)
    assert amp.batch_size == 256
    assert cell.uses_channels_last() and cell.image_size == 224 and cell.processes == 1
    profile = yaml.safe_load((root / "profiles" / "reference" / "config.yaml").read_text())
    assert profile["configfile"] == "profiles/reference/study.yaml"

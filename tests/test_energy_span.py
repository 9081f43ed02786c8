"""Energy per image over the steady training steps (nettebench.records.energy.SpanMeter, its
hooks in training.loop and training.fit, steady_totals, energy_columns): validation, the
warm-up and the loader's start-up draw other powers, and none of it is counted.

A real trainer run on this CPU, with a simulated energy source that every forward pass of
the model drives: each step or validation batch lasts 0.1 s of the source's own clock at the
power of its phase, and the source is read as NVML (counter and readings, through the probe's
sampler) or as RAPL (``energy_uj`` files). The expected numbers are written out by hand from the
powers and the step counts below, not from the module's formulas.
"""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from nettebench.records import conditions as C
from nettebench.records import energy as E
from nettebench.records import nvml
from nettebench.records.nvml import Reading
from nettebench.training import runner as runners
from nettebench.training.cli import run_cell
from nettebench.training.loop import train_epoch
from nettebench.training.step import TrainingStep
from nettebench.vocabulary import precision
from nettebench.vocabulary.cell import CellSpec

STEP_S = 0.1  # each training step and validation batch, on the simulated source's clock
BATCH = 6
TRAIN_PER_CLASS, VAL_PER_CLASS, CLASSES = 16, 4, 3  # 48 training images: 8 steps of 6
# With warmup_steps=2 the first epoch's steady steps are 2..7; the second epoch has no warm-up
# and its steady steps are 1..7 (step 0 holds the loader's start-up).
FIRST_STEADY = (2, 1)
STEADY_STEPS = (6, 7)
VAL_BATCHES = 2  # 12 validation images


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("span")
    colours = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]
    for split, count in (("train", TRAIN_PER_CLASS), ("val", VAL_PER_CLASS)):
        for index, colour in enumerate(colours):
            folder = root / split / f"class{index}"
            folder.mkdir(parents=True)
            for i in range(count):
                Image.new("RGB", (40, 36), colour).save(folder / f"{i}.JPEG")
    return root


class Source:
    """An energy source whose clock and counter advance with the model's forward passes: a
    training step at ``warm`` W before the epoch's first steady step and ``steady`` W after,
    a validation batch at ``val`` W, each lasting :data:`STEP_S`. Answers as an NVML device
    (the probe's ``device``) and, given ``powercap``, writes RAPL's ``energy_uj``."""

    def __init__(self, warm: float, steady: float, val: float, powercap=None) -> None:
        self.powers = {"warm": warm, "steady": steady, "val": val}
        self.unix, self.joules, self.power = 1_790_000_000.0, 1000.0, 0.0
        self.epoch, self.step, self.validating = 0, 0, False
        self.powercap = powercap
        if powercap is not None:
            domain = powercap / "intel-rapl:0"
            domain.mkdir()
            (domain / "name").write_text("package-0\n")
            (domain / "max_energy_range_uj").write_text("262143328850\n")
            self._write()

    def _write(self) -> None:
        if self.powercap is not None:
            (self.powercap / "intel-rapl:0" / "energy_uj").write_text(f"{self.joules * 1e6:.0f}")

    def forward(self, module, args) -> None:
        if module.training:
            if self.validating:  # the next epoch's first step
                self.epoch, self.step, self.validating = self.epoch + 1, 0, False
            phase = "warm" if self.step < FIRST_STEADY[self.epoch] else "steady"
            self.step += 1
        else:
            self.validating, phase = True, "val"
        self.power = self.powers[phase]
        self.unix += STEP_S
        self.joules += self.power * STEP_S
        self._write()

    # ---- what nvml.Device answers
    def reading(self) -> Reading:
        return Reading(unix=self.unix, sm_mhz=1980, mem_mhz=2619, power_w=self.power, temp_c=50,
                       reasons=0)  # fmt: skip

    def energy_mj(self) -> int:
        return round(self.joules * 1000)

    def processes(self):
        return []

    def utilisation(self, since_unix):
        return {}

    def identity(self):
        return {"name": "NVIDIA H200", "mig": False}


def _train(tmp_path, monkeypatch, tree, source: Source, **probe) -> dict:
    """A real two-epoch run of the trainer whose probe reads ``source``; its record."""
    build = runners.build_model

    def hooked(*args, **kwargs):
        model = build(*args, **kwargs)
        model.register_forward_pre_hook(source.forward)
        return model

    real = C.Probe
    monkeypatch.setattr(runners, "build_model", hooked)
    monkeypatch.setattr(C, "Probe", lambda **kw: real(pid=kw.get("pid"), sample_s=3600, **probe))
    cell = CellSpec(dataset="span", model="resnet18", batch_size=BATCH, epochs=2, image_size=32,
                    workers=0)  # fmt: skip
    record = run_cell(cell, tree, tmp_path / "cell", warmup_steps=2, threads=1)
    assert record["status"] == "ok", record["message"]
    return record


def test_a_gpus_energy_per_image_is_its_steady_steps_counter_not_the_epochs_window(
    tmp_path, monkeypatch, tree
):
    """400 W steady, 250 W warm-up and start-up, 150 W validation. The steady steps: 6 + 7 of
    6 images at 40 J each = 520 J for 78 images; the epochs' window also holds 3 steps at 25 J
    and 4 validation batches at 15 J: 655 J. (The old rule, the window's mean power over the
    steady img/s, gave 655 J / 2.0 s / 60 img/s = 5.46 J per image on the source's clock, and
    on the machine's clock whatever its speed made it.)"""
    source = Source(warm=250.0, steady=400.0, val=150.0)
    record = _train(tmp_path, monkeypatch, tree, source, gpu=C.GpuTarget("GPU-aaaa", 0),
                    device=source)  # fmt: skip
    found = record["conditions"]
    assert found["gpu_energy_j"] == pytest.approx(655.0)  # the window: warm-up, validation too
    record["device"]["type"] = "cuda"  # read as the GPU cell this CPU run stands in for
    columns = E.energy_columns(record)
    assert columns["energy_source"] == nvml.ENERGY_COUNTER
    assert columns["energy_j"] == pytest.approx(520.0)
    assert columns["j_per_img"] == pytest.approx(520.0 / 78)
    assert columns["energy_images"] == 78
    assert columns["power_w"] == pytest.approx(400.0)
    assert columns["img_s_per_w"] == pytest.approx(78 / 520.0)

    spans = found["steady_energy_epochs"]  # the record says which steps the energy covers
    assert [(s["epoch"], list(s["steps"]), s["images"]) for s in spans] == [
        (1, [2, 8], 36),
        (2, [1, 8], 42),
    ]
    assert [s["energy_j"] for s in spans] == [pytest.approx(6 * 40.0), pytest.approx(7 * 40.0)]
    assert [s["seconds"] for s in spans] == [pytest.approx(0.6), pytest.approx(0.7)]
    assert found["steady_energy_span"] == E.STEADY_SPAN
    summary = record["summary"]
    if summary["train_img_s_low"] is not None:  # 13 steady steps: the median has its interval
        each = 520.0 / 78
        assert columns["j_per_img_low"] == pytest.approx(
            each * summary["train_img_s"] / summary["train_img_s_high"]
        )
        assert columns["j_per_img_low"] <= each <= columns["j_per_img_high"]


def test_a_cpus_energy_per_image_is_its_steady_steps_rapl_not_the_epochs_window(
    tmp_path, monkeypatch, tree
):
    """RAPL: 120 W steady (12 J a step), 60 W warm-up, 30 W validation: 13 x 12 = 156 J for
    78 images; the epochs' window holds 3 x 6 + 4 x 3 J more: 186 J (the old rule: 1.55 J per
    image on the source's clock)."""
    powercap = tmp_path / "powercap"
    powercap.mkdir()
    source = Source(warm=60.0, steady=120.0, val=30.0, powercap=powercap)
    record = _train(tmp_path, monkeypatch, tree, source, powercap=str(powercap))
    found = record["conditions"]
    assert found["cpu_energy_j"] == pytest.approx(186.0)
    columns = E.energy_columns(record)
    assert columns["energy_source"] == E.RAPL_SOURCE
    assert columns["energy_j"] == pytest.approx(156.0)
    assert columns["j_per_img"] == pytest.approx(2.0)
    assert columns["energy_images"] == 78
    assert [s["energy_j"] for s in found["steady_energy_epochs"]] == [
        pytest.approx(72.0),
        pytest.approx(84.0),
    ]


def test_without_a_counter_the_power_readings_are_clipped_to_the_span():
    """Readings each second: 250 W to 1 s, 400 W from 2 s to 8 s, 150 W from 9 s. From 1.5 s
    to 8.5 s the edges interpolate to 325 W and 275 W: 0.5 x (325 + 400) / 2 + 6 x 400
    + 0.5 x (400 + 275) / 2 = 2,750 J; from 2.5 s to 7.5 s, 5 x 400 = 2,000 J."""
    powers = [250, 250, 400, 400, 400, 400, 400, 400, 400, 150, 150]
    readings = [Reading(unix=float(t), power_w=float(p)) for t, p in enumerate(powers)]
    wide = E.within(readings, 1.5, 8.5)
    assert [r.unix for r in wide] == [1.5, 2, 3, 4, 5, 6, 7, 8, 8.5]
    assert nvml.energy_j(wide, None, None)[0] == pytest.approx(2750.0)
    assert nvml.energy_j(E.within(readings, 2.5, 7.5), None, None)[0] == pytest.approx(2000.0)


def test_a_gpu_without_a_counter_takes_the_spans_readings_and_no_interval():
    """No counter: the readings at the span's edges and between them (400 W over 1 s)."""
    from nvml_replay import Replay

    replay = Replay(
        readings=[Reading(unix=100.0 + t / 2, power_w=400.0) for t in range(3)], energy=[None]
    )
    probe = C.Probe(gpu=C.GpuTarget("GPU-aaaa", 0), device=replay, sample_s=3600)
    meter = E.SpanMeter(probe, "cuda")
    meter.open()
    probe.sampler.read()  # the sampling thread's reading halfway
    meter.close()
    span = {"epoch": 1, "steps": [1, 5], **meter.measured(24)}
    assert span["energy_j"] == pytest.approx(400.0)
    assert span["source"].startswith(nvml.ENERGY_FROM_POWER)
    record = {"device": {"type": "cuda"}, "conditions": E.steady_totals([span]),
              "summary": {"train_img_s": 24.0, "train_img_s_low": 20.0,
                          "train_img_s_high": 30.0}}  # fmt: skip
    columns = E.energy_columns(record)
    assert columns["j_per_img"] == pytest.approx(400.0 / 24)
    assert columns["j_per_img_low"] is None  # readings 0.1 s apart: no interval claimed


def test_a_cuda_job_without_nvml_is_not_measured_even_where_rapl_reads(tmp_path):
    """The packages' energy is not the GPU's: without NVML a CUDA job's span says why."""
    source = Source(warm=1.0, steady=1.0, val=1.0, powercap=tmp_path)
    probe = C.Probe(powercap=str(tmp_path))
    meter = E.SpanMeter(probe, "cuda")
    meter.open()
    source.forward(torch.nn.Linear(1, 1), ())
    meter.close()
    found = meter.measured(6)
    assert found["energy_j"] is None and found["source"] == E.NO_NVML_ENERGY


def test_an_epoch_that_ends_before_its_steady_steps_is_not_measured():
    """A loader shorter than its length says: the span (planned after 3 warm-up steps) never
    opens, and the epoch says so rather than counting the warm-up."""
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    runner = TrainingStep(model, precision.get("fp32"), torch.device("cpu"), lr=0.1,
                          momentum=0.9, weight_decay=0)  # fmt: skip
    batches = [(torch.randn(4, 3, 2, 2), torch.randint(3, (4,))) for _ in range(2)]
    meter = E.SpanMeter(C.Probe(), "cpu")
    found = train_epoch(
        runner, batches, steps_per_epoch=8, max_steps=None, warmup_steps=3, span=meter
    )
    assert found.steps_run == 2 and found.span_steps is None and found.span_images == 0
    assert meter.measured(found.span_images)["source"] == E.NOT_OPENED


def test_the_totals_count_the_measured_epochs_and_say_how_many():
    spans = [
        {"epoch": 1, "steps": [5, 10], "seconds": 2.0, "images": 20, "energy_j": 100.0,
         "source": E.RAPL_SOURCE},
        None,  # an epoch resumed from a checkpoint written before spans were measured
        {"epoch": 3, "steps": [1, 10], "seconds": 3.0, "images": 36, "energy_j": 180.0,
         "source": E.RAPL_SOURCE},
    ]  # fmt: skip
    found = E.steady_totals(spans)
    assert found["steady_energy_j"] == 280.0 and found["steady_energy_images"] == 56
    assert found["steady_energy_s"] == 5.0
    assert found["steady_energy_source"] == f"{E.RAPL_SOURCE} (2 of 3 epochs)"
    columns = E.energy_columns({"device": {"type": "cpu"}, "conditions": found, "summary": {}})
    assert columns["j_per_img"] == pytest.approx(280.0 / 56)
    assert columns["power_w"] == pytest.approx(280.0 / 5.0)


def test_a_record_without_the_steady_steps_energy_is_not_measured_never_the_window():
    """A record written before the spans were measured: its window mixes validation in."""
    window = {"gpu_energy_j": 530.0, "gpu_energy_source": nvml.ENERGY_COUNTER, "wall_s": 10.0}
    columns = E.energy_columns({"device": {"type": "cuda"}, "conditions": window,
                                "summary": {"train_img_s": 1000.0}})  # fmt: skip
    assert columns["j_per_img"] is None and columns["energy_j"] is None
    assert columns["energy_source"] == E.NO_SPAN

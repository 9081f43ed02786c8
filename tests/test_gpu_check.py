"""``python -m nettebench check``, the GPU user's check, where no GPU is: it ends at once in one
line naming why; ``--stack`` reads every TF32 getter of both torch APIs as the process starts
(what a fresh interpreter reads) and after each precision's TF32 set-up (each reads, and says
the setting); the stack's lines say a driver too old for torch's CUDA and a getter that raises;
and the check's run, end to end in this process with its training cases replaced by quick ones
(the real ones run in the device twin's smoke, ``tests/device/run.py --smoke``): the plan, the
stack, the goal table, its files, the work folder removed, and one line when a goal cell was
not measured."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nettebench.check import cases, cli, stack

ROOT = Path(__file__).resolve().parents[1]
NO_GPU = not torch.cuda.is_available()


def _check(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "scripts")}
    return subprocess.run(
        [sys.executable, "-m", "nettebench", "check", *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
    )  # fmt: skip


@pytest.mark.skipif(not NO_GPU, reason="a CUDA GPU is here")
def test_without_a_gpu_the_check_ends_at_once_in_one_line(tmp_path):
    done = _check("--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"))
    assert done.returncode == 1 and done.stdout == ""  # vocabulary.commands.FAILED
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: no CUDA GPU: ")
    cuda = torch.version.cuda
    assert (f"built for CUDA {cuda}" if cuda else "without CUDA") in line
    assert not (tmp_path / "work").exists() and not (tmp_path / "out").exists()  # nothing begun


MATMUL, CUDNN, PRECISION = (
    "torch.backends.cuda.matmul.allow_tf32",
    "torch.backends.cudnn.allow_tf32",
    "torch.get_float32_matmul_precision()",
)
FRESH = (  # what a fresh interpreter reads, beside the stack's own reading
    "import json, torch\n"
    "b = torch.backends\n"
    "print(json.dumps({'m': b.cuda.matmul.allow_tf32, 'c': b.cudnn.allow_tf32, "
    "'p': torch.get_float32_matmul_precision(), 'mf': b.cuda.matmul.fp32_precision, "
    "'cf': b.cudnn.conv.fp32_precision}))\n"
)


def test_the_stack_reads_every_tf32_getter_after_each_set_up(tmp_path):
    done = _check("--stack", "--json", str(tmp_path / "stack.json"))
    assert done.returncode == 0, done.stderr
    found = json.loads((tmp_path / "stack.json").read_text())
    fresh = json.loads(subprocess.run([sys.executable, "-c", FRESH], capture_output=True,
                                      text=True, check=True, timeout=120).stdout)  # fmt: skip
    started = found["tf32"][stack.STARTED]
    assert {
        "m": started[MATMUL]["value"],
        "c": started[CUDNN]["value"],
        "p": started[PRECISION]["value"],
        "mf": started["torch.backends.cuda.matmul.fp32_precision"]["value"],
        "cf": started["torch.backends.cudnn.conv.fp32_precision"]["value"],
    } == fresh
    on, off = found["tf32"]["after tf32's set-up"], found["tf32"]["after O0's set-up"]
    for getters in (on, off):  # issue 56, item 2: every getter reads after the set-up
        assert set(getters) == set(stack.TF32_GETTERS)
        assert all("value" in read for read in getters.values()), getters
    assert (on[MATMUL]["value"], on[CUDNN]["value"], on[PRECISION]["value"]) == (True, True, "high")
    assert (off[MATMUL]["value"], off[CUDNN]["value"], off[PRECISION]["value"]) == (
        False, False, "highest"
    )  # fmt: skip
    printed = done.stdout.splitlines()
    for path in stack.TF32_GETTERS:  # one line a getter in each of the three settings
        assert sum(line.strip().startswith(f"{path} = ") for line in printed) == 3, path
    assert [line[:8].strip() for line in printed[:7]] == [
        "GPU", "driver", "CUDA", "torch", "cuDNN", "NVML", "apex"
    ]  # fmt: skip
    assert found["torch"] == torch.__version__ and found["cuda"] == torch.version.cuda
    if NO_GPU:
        assert found["gpu"] is None and printed[0].startswith("GPU      none: ")
        package = importlib.metadata.version("nvidia-ml-py")  # a dependency (issue 56, item 9)
        assert found["nvml"] == {"package": package, "answers": False}


H200 = {
    "gpu": {"name": "NVIDIA H200", "capability": "9.0", "memory_gib": 139.8, "count": 1},
    "no_gpu": None,
    "driver": "575.57.08",
    "cuda": "13.0",
    "driver_needed": 580,
    "torch": "2.11.0+cu130",
    "torchvision": "0.26.0",
    "python": "3.12.3",
    "cudnn": 91900,
    "nvml": {"package": "13.580.82", "answers": True},
    "apex": None,
    "apex_kernels": None,
    "tf32": {
        stack.STARTED: {
            MATMUL: {"error": "RuntimeError: mix of the legacy and new APIs"},
            CUDNN: {"value": True},
        }
    },
}


def test_the_stack_says_a_driver_too_old_and_a_getter_that_raises():
    text = "\n".join(stack.lines(H200))
    assert "driver   575.57.08 (CUDA 13.0 needs >= 580 on Linux: TOO OLD)" in text
    assert f"{MATMUL} RAISES RuntimeError: mix of the legacy and new APIs" in text
    assert f"{CUDNN} = True" in text
    assert "GPU      NVIDIA H200, compute capability 9.0, 139.8 GiB (1 device(s))" in text
    assert "cuDNN    9.19.0" in text and "NVML     nvidia-ml-py 13.580.82: answers" in text
    assert stack.summary(H200).endswith("TF32 getters: 1 reading(s) raise")
    new_enough = "\n".join(stack.lines({**H200, "driver": "580.65.06"}))
    assert "driver   580.65.06 (CUDA 13.0 needs >= 580 on Linux: ok)" in new_enough


@pytest.mark.parametrize(
    ("driver", "cuda", "old"),
    [("575.57.08", "13.0", True), ("580.65.06", "13.0", False), ("570.86.10", "12.8", False),
     ("520.61.05", "12.0", True), (None, "13.0", False), ("550.54.15", None, False)],
)  # fmt: skip
def test_a_driver_is_too_old_below_nvidias_minimum_for_the_cuda_major(driver, cuda, old):
    """NVIDIA's minor version compatibility table (Linux): CUDA 13.x >= 580, 12.x >= 525."""
    assert stack.driver_too_old(driver, cuda) is old


@pytest.mark.parametrize(
    ("number", "text"), [(91900, "9.19.0"), (90100, "9.1.0"), (8902, "8.9.2"), (8600, "8.6.0")]
)
def test_cudnn_numbers_read_as_their_releases(number, text):
    assert stack.cudnn_text(number) == text


def test_the_check_prints_the_stack_and_the_goal_table(tmp_path, monkeypatch, capsys):
    """The real stack case (a process of its own) and two goal cells that report numbers."""
    measured = {"result": "ok", "wall_s": 11.0, "train_img_s": 9000.0, "ceiling_img_s": 1e4}
    quick = [[sys.executable, "-c", ""]]
    goals = [
        cases.Case(name, 1, lambda s: quick, lambda s: dict(measured)) for name in cases.GOAL_CASES
    ]
    [stack_case] = [case for case in cases.CASES if case.name == "stack"]
    monkeypatch.setattr(cli, "CASES", [stack_case, *goals])
    out, work = tmp_path / "out", tmp_path / "work"
    argv = ["--smoke", "--out", str(out), "--work", str(work)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("planned on one H200: 10 s; each case stopped at 10x its estimate")
    assert "TF32     after O0's set-up:" in printed and "| case | status |" in printed
    rows = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert [(r["case"], r["status"]) for r in rows] == [
        ("stack", "ok"), *((name, "ok") for name in cases.GOAL_CASES)
    ]  # fmt: skip
    assert rows[0]["note"].startswith("no GPU; driver" if NO_GPU else "NVIDIA")
    assert "the goal rows were measured; every case ended with its result" in printed
    assert "TF32     as the process started:" in (out / "table.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["cases.jsonl", "records.tar.gz", "table.md"]
    assert not work.exists()

    failing = cases.Case(cases.GOAL_CASES[0], 1, lambda s: [[sys.executable, "-c", "exit(1)"]])
    monkeypatch.setattr(cli, "CASES", [failing])
    assert cli.main(argv) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: goal row(s) not measured: resnet18-O1-cached-10ep")

"""torch.optim without torch._dynamo (training/dynamo_stand_in.py), each case in a fresh Python,
since what is under test is what a fresh training process imports."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from nettebench.training import dynamo_stand_in
from tests.fresh_python import run_fresh

CONSTRAINTS = Path(__file__).resolve().parents[1] / "envs" / "constraints.txt"

pytestmark = pytest.mark.skipif(
    not dynamo_stand_in.TORCH_VERIFIED,
    reason="this torch is not among VERIFIED_TORCH: the stand-in is off, dynamo imported as usual",
)

# Trains with the trainer's own step and with SGD's foreach and fused (+ GradScaler: the CUDA
# path's logic) implementations, saves and restores each mid-way, and prints a digest of every
# weight and momentum buffer, then whether dynamo was ever loaded.
TRAIN = """
    import hashlib, sys
    import torch
    from torch import nn
    from nettebench.training.dynamo_stand_in import optimizer_calls
    from nettebench.training.step import TrainingStep
    from nettebench.vocabulary.precision import get as precision_mode

    def digest(tensors):
        return hashlib.sha256(b"".join(t.detach().contiguous().numpy().tobytes()
                                       for t in tensors)).hexdigest()[:16]

    def model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                             nn.Linear(4 * 6 * 6, 5))

    torch.manual_seed(1)
    images, targets = torch.randn(6, 3, 8, 8), torch.randint(0, 5, (6,))
    step = TrainingStep(model(), precision_mode("O0"), torch.device("cpu"), lr=0.1,
                        momentum=0.9, weight_decay=1e-4)
    for _ in range(3):
        step.step(images, targets)
    saved = step.state_dict()
    step = TrainingStep(model(), precision_mode("O0"), torch.device("cpu"), lr=0.1,
                        momentum=0.9, weight_decay=1e-4)
    step.load_state_dict(saved)
    step.step(images, targets)
    buffers = [s["momentum_buffer"] for s in step.optimizer.state.values()]
    print("trainer", digest([*step.model.parameters(), *buffers]))

    for name, options in (("foreach", {"foreach": True}), ("fused", {"fused": True})):
        net = model()
        with optimizer_calls():
            sgd = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, **options)
        scaler = torch.amp.GradScaler("cpu", init_scale=128.0)
        for index in range(4):
            scaler.scale(nn.functional.cross_entropy(net(images), targets)).backward()
            with optimizer_calls():
                scaler.step(sgd)
                scaler.update()
                if index == 1:
                    state = sgd.state_dict()
                    sgd = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, **options)
                    sgd.load_state_dict(state)
            net.zero_grad()
        buffers = [s["momentum_buffer"] for s in sgd.state.values()]
        print(name, digest([*net.parameters(), *buffers]))
    print("dynamo loaded", "torch._dynamo" in sys.modules)
"""


def _run(code: str) -> list[str]:
    return run_fresh(code).splitlines()


def test_training_under_the_stand_in_loads_no_dynamo_and_ends_on_the_same_weights():
    """The same steps, saves and restores once with the stand-in and once with the real dynamo
    imported first (the stand-in then stays out): every weight and buffer equal, to the bit."""
    stand_in = _run(TRAIN)
    real = _run("import torch._dynamo\n" + textwrap.dedent(TRAIN))
    assert stand_in[-1] == "dynamo loaded False" and real[-1] == "dynamo loaded True"
    assert [line.split()[0] for line in stand_in[:-1]] == ["trainer", "foreach", "fused"]
    assert stand_in[:-1] == real[:-1]


def test_once_the_real_dynamo_is_imported_torch_wraps_its_functions_in_it():
    """Whoever imports dynamo (here a plain import, as DDP or a compiled model does), the
    functions the stand-in let through are forgotten, and torch's next call wraps them in the
    real ``disable``; the stand-in stays out from then on. Its finder stays on the path and
    hides no finder after it."""
    out = _run(
        """
        import sys
        import torch
        from torch.optim import Optimizer
        from nettebench.training import dynamo_stand_in as si
        net = torch.nn.Linear(2, 1)
        with si.optimizer_calls():
            sgd = torch.optim.SGD(net.parameters(), lr=0.1)
            print(sys.modules["torch._dynamo"] is si.STAND_IN, si.FINDER in sys.meta_path)
        add = Optimizer.add_param_group.__wrapped__
        print("torch._dynamo" in sys.modules, getattr(add, si.CACHE_ATTRIBUTE) is add)
        seen = []  # a finder after the stand-in's: it still sees the import
        class Probe:
            def find_spec(self, name, path, target=None):
                seen.append(name)
        sys.meta_path.insert(sys.meta_path.index(si.FINDER) + 1, Probe())
        import torch._dynamo
        print("torch._dynamo" in seen)
        print(hasattr(add, si.CACHE_ATTRIBUTE), si.STAND_IN.disabled, si.FINDER in sys.meta_path)
        sgd.add_param_group({"params": [torch.nn.Parameter(torch.ones(1))]})
        print(getattr(add, si.CACHE_ATTRIBUTE) is not add)
        with si.optimizer_calls():
            print(sys.modules["torch._dynamo"] is torch._dynamo)
        """
    )
    assert out == ["True True", "False True", "True", "False [] True", "True", "True"]


def test_any_other_name_asked_of_the_stand_in_is_the_real_dynamos():
    out = _run(
        """
        import sys
        import torch
        from nettebench.training import dynamo_stand_in as si
        with si.optimizer_calls():
            torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)
            quiet = hasattr(si.STAND_IN, "__file__"), "torch._dynamo" in sys.modules
            config = torch._dynamo.config
        import torch._dynamo.config as real_config
        print(quiet, config is real_config, sys.modules["torch._dynamo"] is not si.STAND_IN)
        print(si.STAND_IN.disabled, torch._dynamo.disable is not si.STAND_IN.disable)
        """
    )
    assert out == ["(False, True) True True", "[] True"]


def test_the_pinned_torch_is_one_the_stand_in_was_verified_with():
    pin = re.search(r"^torch==(\S+)", CONSTRAINTS.read_text(), re.MULTILINE)
    assert pin, "no torch pin in envs/constraints.txt"
    assert dynamo_stand_in.torch_release(pin[1]) in dynamo_stand_in.VERIFIED_TORCH
    assert dynamo_stand_in.torch_release("2.14.1+cu130") == "2.14"

"""Each precision mode does what its name promises: dtypes, loss scaling, master weights.

The mechanics are checked on the CPU for every mode (torch runs fp16 kernels on a CPU, slowly),
with a tiny conv net; which device may *benchmark* a mode is the table's separate concern.
"""

import pytest
import torch
from torch import nn

from nettebench.training.step import TrainingStep
from nettebench.vocabulary import precision

CPU = torch.device("cpu")

# mode -> (conv weight dtype, batch-norm weight dtype, conv activation dtype, scaler, master)
EXPECTED = {
    "O0": (torch.float32, torch.float32, torch.float32, False, False),
    "fp32": (torch.float32, torch.float32, torch.float32, False, False),
    "tf32": (torch.float32, torch.float32, torch.float32, False, False),
    "O1": (torch.float32, torch.float32, torch.float16, True, False),
    "O2": (torch.float16, torch.float32, torch.float16, True, True),
    "O3": (torch.float16, torch.float16, torch.float16, False, False),
    "bf16": (torch.float32, torch.float32, torch.bfloat16, False, False),
}


def tiny_net():
    return nn.Sequential(
        nn.Conv2d(3, 4, 3),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 3),
    )


def make_runner(name):
    torch.manual_seed(0)
    mode = precision.get(name)
    return TrainingStep(tiny_net(), mode, CPU, lr=0.1, momentum=0.9, weight_decay=1e-4)


def test_every_mode_has_expectations():
    assert set(EXPECTED) == set(precision.PRECISION_NAMES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_mode_dtypes_scaling_and_master_weights(name):
    conv_dtype, bn_dtype, activation_dtype, scaled, master = EXPECTED[name]
    runner = make_runner(name)
    conv, bn = runner.model[0], runner.model[1]
    assert conv.weight.dtype == conv_dtype
    assert bn.weight.dtype == bn_dtype
    assert (runner.scaler is not None) == scaled
    assert (runner.master_params is not None) == master
    if master:
        assert all(p.dtype == torch.float32 for p in runner.master_params)

    seen = []
    conv.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    images = runner.prepare_inputs(torch.randn(8, 3, 8, 8))
    targets = torch.randint(0, 3, (8,))
    before = conv.weight.detach().float().clone()
    loss = runner.step(images, targets)
    assert seen == [activation_dtype]
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert not torch.equal(before, conv.weight.detach().float()), "the step must update weights"


def test_o2_copies_master_weights_back_and_does_not_accumulate_gradients():
    runner = make_runner("O2")
    images = runner.prepare_inputs(torch.randn(8, 3, 8, 8))
    targets = torch.randint(0, 3, (8,))
    runner.step(images, targets)
    first_grad = runner.model[0].weight.grad.detach().clone()
    runner.step(images, targets)
    for master, param in zip(runner.master_params, runner.model_params, strict=True):
        assert torch.equal(master.detach().to(param.dtype), param.detach())
    # a fresh gradient every step, not the sum of two
    assert not torch.allclose(runner.model[0].weight.grad.float(), 2 * first_grad.float())


@pytest.mark.parametrize(
    ("name", "device", "supported"),
    [
        ("O0", "cpu", True),
        ("fp32", "cpu", True),
        ("bf16", "cpu", True),
        ("O1", "cpu", False),
        ("O2", "cpu", False),
        ("O3", "cpu", False),
        ("tf32", "cpu", False),
        ("O1", "cuda", True),
        ("tf32", "cuda", True),
    ],
)
def test_device_support_table(name, device, supported):
    reason = precision.unsupported_reason(name, device)
    assert (reason is None) == supported
    if reason:
        assert "cpu" in reason and "`fp32`" in reason


def test_unknown_precision_names_the_allowed_ones():
    with pytest.raises(ValueError, match="allowed: O0, tf32, O1, O2, O3, bf16, fp32"):
        precision.get("O4")


def test_o2_moves_gradients_and_weights_in_foreach_kernels_not_one_per_parameter():
    """Each per-parameter copy is a kernel launch on a GPU (161 a step each way for resnet50);
    O2's copies between the model and its fp32 masters are two foreach ops."""
    from tests.op_log import OpLog

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), *[nn.Linear(12, 12) for _ in range(8)], nn.Linear(12, 3))
    runner = TrainingStep(model, precision.get("O2"), CPU, lr=0.1, momentum=0.9, weight_decay=0)
    images = runner.prepare_inputs(torch.randn(4, 3, 2, 2))
    targets = torch.randint(0, 3, (4,))
    runner.step(images, targets)  # buffers made on the first step
    with OpLog() as log:
        runner.step(images, targets)
    names = log.names()
    assert names.count("aten._foreach_copy_.default") == 2
    per_parameter = [n for n in names if n.startswith(("aten._to_copy", "aten.copy_"))]
    assert len(per_parameter) < len(runner.model_params)
    for master, param in zip(runner.master_params, runner.model_params, strict=True):
        assert torch.equal(master.detach().to(param.dtype), param.detach())
        assert master.grad.dtype == torch.float32 and master.grad.shape == param.shape


def test_o2_copies_in_dtype_homogeneous_foreach_groups():
    """O2 keeps batch norm fp32 beside fp16 weights: each ``_foreach_copy_`` list is one dtype
    pair (a mixed list takes the slow path at best), and every parameter is in one group."""
    from tests.op_log import OpLog

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(16, 3))
    runner = TrainingStep(model, precision.get("O2"), CPU, lr=0.1, momentum=0.9, weight_decay=0)
    groups = runner.copy_back
    assert len(groups) == 2
    for targets, sources in groups:
        assert len({t.dtype for t in targets}) == 1 and len({s.dtype for s in sources}) == 1
    assert {targets[0].dtype for targets, _ in groups} == {torch.float16, torch.float32}
    assert sum(len(targets) for targets, _ in groups) == len(runner.model_params)
    images = runner.prepare_inputs(torch.randn(4, 3, 2, 2))
    targets = torch.randint(0, 3, (4,))
    runner.step(images, targets)
    with OpLog() as log:
        runner.step(images, targets)
    assert log.names().count("aten._foreach_copy_.default") == 4  # two groups, each way
    for master, param in zip(runner.master_params, runner.model_params, strict=True):
        assert torch.equal(master.detach().to(param.dtype), param.detach())


def test_sgd_is_fused_on_cuda_only():
    """Fused SGD takes GradScaler's scale and inf flag on the device (no per-step sync)."""
    from nettebench.training.step import optimizer_options

    assert optimizer_options(torch.device("cuda", 0)) == {"fused": True}
    assert optimizer_options(torch.device("cpu")) == {}

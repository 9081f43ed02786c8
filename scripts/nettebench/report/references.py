"""Published training throughputs to set beside a study's own: the data, versioned.

Each entry names its source (a URL, and the file and commit where it is a repository's), its
recipe (model, precision, batch, data, framework, GPU count) and its date, and the GPU names
torch reports for its GPU (``device_name`` in runs.csv), so that the report matches a cell by
model, precision and GPU name only where the same GPU ran it. Numbers are copied as published,
never derived; where a publisher gave none (Lambda's H200: none found in its benchmark
repository's throughput tables or on its benchmark page, December 2026), there is no entry.

Bump :data:`VERSION` with any change; the table prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

VERSION = "2026-12-05.1"


@dataclass(frozen=True)
class Reference:
    source: str  # who published it, where
    date: str  # when (the publication, or the container it names)
    gpu: str  # as the publisher names it
    gpu_names: tuple[str, ...]  # torch's device names that are this GPU
    model: str  # nettebench's model name
    precision: str  # nettebench's precision name
    img_s: float  # training images per second, one GPU
    batch_size: int | None  # per GPU; None: not stated
    data: str  # "synthetic" (batches made on the GPU) or the real dataset and its loader
    framework: str
    gpus: int = 1
    notes: str = ""


DLE = (
    "NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md "
    "(https://github.com/NVIDIA/DeepLearningExamples), training performance, DGX A100 (8x A100 "
    "80GB), 1 GPU"
)
LAMBDA = (
    "Lambda, https://github.com/lambdal/deeplearning-benchmark pytorch/pytorch-train-"
    "throughput-{}.csv at 0551cb70 (row 'H100 80GB SXM5', column resnet50), the numbers behind "
    "https://lambdalabs.com/gpu-benchmarks (PyTorch Training GPU Benchmarks 2023)"
)
A100_80GB_SXM = ("NVIDIA A100-SXM4-80GB",)
H100_SXM5 = ("NVIDIA H100 80GB HBM3",)

REFERENCES: tuple[Reference, ...] = (
    Reference(
        source=DLE, date="2021 (NGC 21.03)", gpu="A100 80GB SXM4 (DGX A100)",
        gpu_names=A100_80GB_SXM, model="resnet50", precision="tf32", img_s=938, batch_size=256,
        data="ImageNet through DALI", framework="PyTorch (NGC 21.03 container)",
        notes="ResNet-50 v1.5",
    ),
    Reference(
        source=DLE, date="2021 (NGC 21.03)", gpu="A100 80GB SXM4 (DGX A100)",
        gpu_names=A100_80GB_SXM, model="resnet50", precision="O1", img_s=2470, batch_size=256,
        data="ImageNet through DALI", framework="PyTorch (NGC 21.03 container), AMP",
        notes="ResNet-50 v1.5",
    ),
    Reference(
        source=LAMBDA.format("fp16"), date="2023 (NGC PyTorch 22.10)", gpu="H100 80GB SXM5",
        gpu_names=H100_SXM5, model="resnet50", precision="O1", img_s=2616, batch_size=1280,
        data="synthetic", framework="PyTorch 1.13.0a0 (NGC 22.10), DeepLearningExamples' "
        "ConvNets (Lambda's fork), --amp --static-loss-scale 256",
        notes="ResNet-50 v1.5; batch from the repository's 80 GB config (pytorch/scripts/"
        "config_v1/config_pytorch_80GB.sh at 357c49a7): the throughput table does not name it",
    ),
    Reference(
        source=LAMBDA.format("fp32"), date="2023 (NGC PyTorch 22.10)", gpu="H100 80GB SXM5",
        gpu_names=H100_SXM5, model="resnet50", precision="tf32", img_s=1753, batch_size=640,
        data="synthetic", framework="PyTorch 1.13.0a0 (NGC 22.10), DeepLearningExamples' "
        "ConvNets (Lambda's fork), fp32 with TF32 on by default",
        notes="ResNet-50 v1.5; batch from the same 80 GB config",
    ),
)  # fmt: skip

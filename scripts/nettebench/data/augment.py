"""Batched augmentation on the training device: the reference transforms, one kernel per batch.

The reference pipeline (:mod:`nettebench.data.pil`) augments one PIL image at a time in loader
workers. Here a whole uint8 batch ``(B, H, W, 3)`` (NHWC, as the decoded store holds it) is
augmented where it already lives (CPU or CUDA):

* :class:`TrainTransform` (one per split; :func:`random_resized_crop_flip` for one batch) crops
  and resizes the batch with one call of torchvision's ``roi_align`` kernel on boxes drawn by
  :func:`nettebench.data.crop_boxes.sample_crop_boxes` (torchvision's sampler, batched), flips a
  random half and normalises.
* :class:`ValTransform` (:func:`center_crop_resize`) is the validation transform (resize to
  ``out / 0.875``, centre crop ``out``) expressed as one box per image.

A split's transform builds its constants on the device once and reuses its scratch buffers, so a
batch costs no host synchronisation (no tensor made from Python data, no list index, no value
read back) and few passes over memory: see :class:`TrainTransform`.

Random numbers are drawn from ``generator`` in a fixed order (crop attempts' areas, their
aspect ratios, the offsets, then one flip draw per image), always the same amount whatever
``flip_p`` is, so a seed fixes the boxes and the flips independently of each other's settings.

Resampling: ``roi_align`` with ``aligned=True`` treats pixel ``k`` as the unit square
``[k, k + 1)`` (its value sits at ``k + 0.5``), so the box ``(x, y, x + w, y + h)`` covers exactly
the integer crop ``img[y:y + h, x:x + w]``. Each output pixel averages a ``s x s`` grid of
bilinear samples; with the default ``sampling_ratio=-1`` roi_align picks
``s = ceil(box side / out_size)`` per box: one sample (plain bilinear, like torchvision's
resize) when upscaling, and a box filter over the footprint when downscaling (an antialias
filter, like PIL's). A fixed ``sampling_ratio=2`` also works but blurs upscaled crops: it
averages two bilinear taps a quarter pixel either side of the centre, so even an identity-sized
crop becomes ``[1/8, 3/4, 1/8]`` of its neighbours.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence

import torch
import torchvision  # noqa: F401 - registers torch.ops.torchvision

from nettebench.data.crop_boxes import sample_crop_boxes
from nettebench.data.pil import IMAGENET_MEAN, IMAGENET_STD, VAL_RESIZE_RATIO
from nettebench.vocabulary import commands


class TrainTransform:
    """The training transform of one split, its constants built once on the device.

    RandomResizedCrop(out_size) + RandomHorizontalFlip(flip_p) + Normalize(mean, std) on uint8
    NHWC batches; see :func:`random_resized_crop_flip`. Built once per split, it keeps what
    every batch would otherwise rebuild: the normalisation constants, the flip indices and the
    rois' batch-index column live on the device (a ``torch.tensor(..., device="cuda")`` per
    batch is a pageable host-to-device copy, which synchronises), and the float input and the
    transposition buffers are reused from batch to batch. A batch it returns is a fresh tensor,
    so a consumer may hold as many as it likes.

    Per batch it writes: the normalised float input (one pass from uint8, ``roi_align`` wants
    float32 NCHW), the ``roi_align`` output, the transposition (full frames only: one ``where``)
    and the output, flipped by a ``gather`` along the width straight into the output's memory
    format. The normalisation rides on the first pass: ``roi_align`` averages samples whose
    weights sum to 1 for a box inside the image, so normalising before resampling is
    resampling before normalising.
    """

    def __init__(
        self,
        out_size: int,
        *,
        device: torch.device | str,
        flip_p: float = 0.5,
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3 / 4, 4 / 3),
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        dtype: torch.dtype = torch.float32,
        channels_last: bool = False,
        sampling_ratio: int = -1,
    ) -> None:
        self.device = torch.device(device)
        self.out_size, self.flip_p, self.sampling_ratio = out_size, flip_p, sampling_ratio
        self.scale, self.ratio = tuple(scale), tuple(ratio)
        self.dtype, self.channels_last = dtype, channels_last
        self.affine = _Affine(mean, std, self.device)
        forward = torch.arange(out_size, device=self.device)
        self.flip_index = torch.stack([forward, forward.flip(0)])  # row 1: reversed
        self.buffers = _Buffers()

    def __call__(
        self,
        images: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        sizes: torch.Tensor | None = None,
    ) -> torch.Tensor:
        _check_batch(images)
        batch, height, width, _ = images.shape
        if sizes is not None:
            height, width = sizes[:, 0], sizes[:, 1]
        boxes = sample_crop_boxes(
            batch, height, width, scale=self.scale, ratio=self.ratio, generator=generator,
            device=images.device,
        )  # fmt: skip
        flip = torch.rand(batch, generator=generator, device=images.device) < self.flip_p
        transposed = None
        if sizes is not None:
            # A portrait image lies transposed in its slot: its box too, x and y swapped.
            transposed = sizes[:, 0] > sizes[:, 1]
            swapped = torch.stack([boxes[:, 1], boxes[:, 0], boxes[:, 3], boxes[:, 2]], dim=1)
            boxes = torch.where(transposed[:, None], swapped, boxes)
        out = _crop_resize(
            images, boxes, self.out_size, self.sampling_ratio, affine=self.affine,
            buffers=self.buffers, rois=self.buffers.rois(boxes),
        )  # fmt: skip
        if self.dtype != out.dtype:
            out = out.to(self.dtype)
        if transposed is not None:
            upright = self.buffers.get("upright", out.shape, out.dtype, out.device)
            out = torch.where(transposed[:, None, None, None], out.mT, out, out=upright)
        index = self.flip_index.index_select(0, flip.long())  # (B, out): forward or reversed
        result = _empty_batch(out.shape, out.dtype, out.device, self.channels_last)
        index = index[:, None, None, :].expand(out.shape)
        return torch.gather(out, 3, index, out=result)


class ValTransform:
    """The validation transform of one split (inputs of one size), built once.

    Resize(round(out_size / resize_ratio)) + CenterCrop(out_size) + Normalize: one box per
    image, the same for all (see :func:`center_crop_resize`). When the input already has the
    resized size (the store keeps val images at 256 for 224 crops) the crop is an exact pixel
    crop, and the batch is normalised straight from the uint8 crop into the output's memory
    format in one pass; otherwise one ``roi_align`` resizes it.
    """

    def __init__(
        self,
        out_size: int,
        height: int,
        width: int,
        *,
        device: torch.device | str,
        resize_ratio: float = VAL_RESIZE_RATIO,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        dtype: torch.dtype = torch.float32,
        channels_last: bool = False,
        sampling_ratio: int = -1,
    ) -> None:
        self.device = torch.device(device)
        self.out_size, self.height, self.width = out_size, height, width
        self.dtype, self.channels_last, self.sampling_ratio = dtype, channels_last, sampling_ratio
        self.affine = _Affine(mean, std, self.device)
        resized = round(out_size / resize_ratio)
        # Resize(R) maps the shorter side to R; torchvision truncates the longer side's length.
        if height <= width:
            r_h, r_w = resized, int(resized * width / height)
        else:
            r_h, r_w = int(resized * height / width), resized
        self.exact = (r_h, r_w) == (height, width)
        self.top = int(round((r_h - out_size) / 2.0))
        self.left = int(round((r_w - out_size) / 2.0))
        top, left = self.top * height / r_h, self.left * width / r_w
        self.box = torch.tensor(
            [[left, top, left + out_size * width / r_w, top + out_size * height / r_h]],
            dtype=torch.float32,
        ).to(self.device)
        self.buffers = _Buffers()

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        _check_batch(images)
        batch, height, width, _ = images.shape
        if (height, width) != (self.height, self.width):
            raise ValueError(
                f"this transform was built for {self.height} x {self.width} inputs, "
                f"got {height} x {width}"
            )
        side = self.out_size
        shape = (batch, 3, side, side)
        if self.exact:
            crop = images[:, self.top : self.top + side, self.left : self.left + side]
            out = _empty_batch(shape, torch.float32, images.device, self.channels_last)
            self.affine.apply(crop, out=out)
        else:
            boxes = self.box.expand(batch, 4)
            resized = _crop_resize(
                images, boxes, side, self.sampling_ratio, affine=self.affine,
                buffers=self.buffers, rois=self.buffers.rois(boxes),
            )  # fmt: skip
            out = _empty_batch(shape, torch.float32, images.device, self.channels_last)
            out.copy_(resized)
        return out if out.dtype == self.dtype else out.to(self.dtype)


def random_resized_crop_flip(
    images: torch.Tensor,
    out_size: int,
    *,
    generator: torch.Generator | None = None,
    flip_p: float = 0.5,
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3 / 4, 4 / 3),
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    dtype: torch.dtype = torch.float32,
    channels_last: bool = False,
    sampling_ratio: int = -1,
    sizes: torch.Tensor | None = None,
) -> torch.Tensor:
    """The training transform on a uint8 NHWC batch: ``(B, 3, out_size, out_size)``, normalised.

    RandomResizedCrop(out_size) + RandomHorizontalFlip(flip_p) + Normalize(mean, std), batched:
    boxes from :func:`sample_crop_boxes`, then one flip draw per image, all from ``generator``
    (which must live on ``images.device``).

    ``sizes`` ``(B, 2)``: each image's (height, width) when it fills only the top-left part of
    its slot (the store's full frames); height > width means it is stored transposed, so its
    box is sampled in its own orientation, transposed onto the slot, and the crop transposed
    back.

    One call builds a :class:`TrainTransform` for this batch; a loader builds one per split.
    """
    transform = TrainTransform(
        out_size, device=images.device, flip_p=flip_p, scale=scale, ratio=ratio, mean=mean,
        std=std, dtype=dtype, channels_last=channels_last, sampling_ratio=sampling_ratio,
    )  # fmt: skip
    return transform(images, generator=generator, sizes=sizes)


def center_crop_resize(
    images: torch.Tensor,
    out_size: int,
    *,
    resize_ratio: float = VAL_RESIZE_RATIO,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    dtype: torch.dtype = torch.float32,
    channels_last: bool = False,
    sampling_ratio: int = -1,
) -> torch.Tensor:
    """The validation transform on a uint8 NHWC batch: ``(B, 3, out_size, out_size)``.

    The reference resizes the shorter side to ``R = round(out_size / resize_ratio)`` and crops
    the centre ``out_size`` square at offset ``round((R - out_size) / 2)``. Mapped back onto the
    ``H x W`` input that is one box per image, resized in one ``roi_align``; when ``H == R``
    (a store pre-resized as the reference does) it is an exact pixel crop.

    One call builds a :class:`ValTransform` for this batch; a loader builds one per split.
    """
    _check_batch(images)
    transform = ValTransform(
        out_size, images.shape[1], images.shape[2], device=images.device,
        resize_ratio=resize_ratio, mean=mean, std=std, dtype=dtype, channels_last=channels_last,
        sampling_ratio=sampling_ratio,
    )  # fmt: skip
    return transform(images)


def _check_batch(images: torch.Tensor) -> None:
    if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[-1] != 3:
        raise ValueError(
            "expected a uint8 batch shaped (B, H, W, 3) (NHWC, as the decoded store holds it); "
            f"got {images.dtype} {tuple(images.shape)}"
        )


class _Affine:
    """``(x / 255 - mean) / std`` as ``x * scale + shift``, its constants on the device."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], device: torch.device):
        std_t = torch.tensor(std, dtype=torch.float32)[None, :, None, None]
        mean_t = torch.tensor(mean, dtype=torch.float32)[None, :, None, None]
        self.scale = (1.0 / (255.0 * std_t)).to(device)
        self.shift = (-mean_t / std_t).to(device)

    def apply(self, images: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        """Normalise a uint8 NHWC batch into ``out`` (float, NCHW shape, any memory format)."""
        return torch.addcmul(self.shift, images.permute(0, 3, 1, 2), self.scale, out=out)


class _Buffers:
    """Scratch tensors reused from batch to batch while their shape stays the same.

    Only intermediates live here, never a batch handed out. On a GPU the reuse is stream
    ordered: the next batch's writes queue behind the kernels that read the last one.
    """

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self.index: torch.Tensor | None = None

    def nbytes(self) -> int:
        """What the scratch holds now (device memory on a GPU: loader memory, not training's)."""
        extra = [] if self.index is None else [self.index]
        return sum(tensor.nbytes for tensor in [*self.tensors.values(), *extra])

    def get(self, name: str, shape, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        tensor = self.tensors.get(name)
        if tensor is None or tensor.shape != shape or tensor.dtype != dtype:
            tensor = self.tensors[name] = torch.empty(shape, dtype=dtype, device=device)
        return tensor

    def rois(self, boxes: torch.Tensor) -> torch.Tensor:
        """``roi_align``'s (B, 5) rois: image index, then the box."""
        if self.index is None or len(self.index) != len(boxes):
            self.index = torch.arange(len(boxes), device=boxes.device, dtype=boxes.dtype)[:, None]
        return torch.cat([self.index, boxes], dim=1)


def _empty_batch(shape, dtype: torch.dtype, device, channels_last: bool) -> torch.Tensor:
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    return torch.empty(shape, dtype=dtype, device=device, memory_format=memory_format)


def _crop_resize(
    images: torch.Tensor,
    boxes: torch.Tensor,
    out_size: int,
    sampling_ratio: int,
    *,
    affine: _Affine | None = None,
    buffers: _Buffers | None = None,
    rois: torch.Tensor | None = None,
) -> torch.Tensor:
    """One roi_align over the batch: box ``b`` of image ``b`` -> float32 (B, 3, out, out).

    The uint8 NHWC batch becomes the float32 NCHW input roi_align wants in one pass (into a
    reused buffer when ``buffers`` is given), normalised on the way when ``affine`` is given.
    """
    batch, height, width, _ = images.shape
    shape = (batch, 3, height, width)
    if buffers is None:
        x = torch.empty(shape, dtype=torch.float32, device=images.device)
    else:
        x = buffers.get("input", shape, torch.float32, images.device)
    if affine is None:
        x.copy_(images.permute(0, 3, 1, 2))
    else:
        affine.apply(images, out=x)
    if rois is None:
        index = torch.arange(len(boxes), device=boxes.device, dtype=boxes.dtype)
        rois = torch.cat([index[:, None], boxes], dim=1)
    # torchvision's roi_align kernel itself, not ``torchvision.ops.roi_align``: that one sends a
    # CUDA input to a pure-Python version when deterministic algorithms are on (the kernel's
    # backward uses atomics), which for ``sampling_ratio=-1`` materialises a [boxes, channels,
    # out, out, height, width] tensor: 59 GB for one 224 crop of a 256 x 384 frame
    # (tests/test_augment.py). The forward kernel is deterministic; no crop needs a gradient.
    return torch.ops.torchvision.roi_align(x, rois, 1.0, out_size, out_size, sampling_ratio, True)


def bench_augment(
    batch: int = 256,
    resolution: int = 256,
    out: int = 224,
    device: str = "cpu",
    iters: int = 5,
) -> float:
    """Images per second through :func:`random_resized_crop_flip` (one warm-up call untimed)."""
    device = torch.device(device)
    generator = torch.Generator(device=device).manual_seed(0)
    images = torch.randint(
        0,
        256,
        (batch, resolution, resolution, 3),
        dtype=torch.uint8,
        device=device,
        generator=generator,
    )

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    random_resized_crop_flip(images, out, generator=generator)
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        random_resized_crop_flip(images, out, generator=generator)
    sync()
    return batch * iters / (time.perf_counter() - start)


def main(argv: Sequence[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench data augment",
        description="Throughput of the batched train transform.",
    )
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--resolution", type=int, default=256)
    parser.add_argument("--out", type=int, default=224)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--iters", type=int, default=5)
    return commands.run(parser, _bench, argv, stream=sys.stdout)


def _bench(args: argparse.Namespace) -> Iterator[str]:
    rate = bench_augment(args.batch, args.resolution, args.out, args.device, args.iters)
    yield (
        f"random_resized_crop_flip: {rate:,.0f} img/s (batch {args.batch}, "
        f"{args.resolution}->{args.out}, {args.device}, {torch.get_num_threads()} threads)"
    )


if __name__ == "__main__":  # run as python -m nettebench data augment
    sys.exit(commands.moved(__spec__.name))

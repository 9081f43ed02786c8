"""Batched augmentation on the training device: the reference transforms, one kernel per batch.

The reference pipeline (:mod:`nettebench.data.pil`) augments one PIL image at a time in loader
workers. Here a whole uint8 batch ``(B, H, W, 3)`` (NHWC, as the decoded store holds it) is
augmented where it already lives (CPU or CUDA):

* :func:`sample_crop_boxes` draws ``RandomResizedCrop.get_params``'s distribution for every
  image at once (same 10 attempts, same integer rounding, same centre-crop fallback), with no
  host synchronisation, so it never stalls a CUDA stream.
* :func:`random_resized_crop_flip` crops and resizes the batch with one
  ``torchvision.ops.roi_align`` call, flips a random half and normalises.
* :func:`center_crop_resize` is the validation transform (resize to ``out / 0.875``, centre
  crop ``out``) expressed as one box per image.

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
import math
import time
from collections.abc import Sequence

import torch
from torchvision.ops import roi_align

from nettebench.data.pil import IMAGENET_MEAN, IMAGENET_STD, VAL_RESIZE_RATIO

# torchvision's RandomResizedCrop.get_params makes this many attempts before falling back.
_ATTEMPTS = 10


def sample_crop_boxes(
    batch: int,
    height: int | torch.Tensor,
    width: int | torch.Tensor,
    *,
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3 / 4, 4 / 3),
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``batch`` crop boxes drawn as ``RandomResizedCrop.get_params`` draws one.

    Per image: up to 10 attempts of (area fraction ~ U(scale), log aspect ~ U(log ratio)),
    ``w = round(sqrt(area * aspect))``, ``h = round(sqrt(area / aspect))``; the first attempt
    with ``0 < w <= width`` and ``0 < h <= height`` wins and its offsets are uniform over the
    valid integer positions. If all ten fail, the centre crop with the aspect ratio clamped
    into ``ratio``. All attempts are drawn for every image (a fixed amount of randomness).
    ``height`` and ``width`` are one size for the batch or one per image (``(batch,)`` tensors).

    Returns a float32 ``(batch, 4)`` tensor of ``(x1, y1, x2, y2)`` pixel-edge coordinates on
    ``device`` (the generator's device by default), ready for ``roi_align(aligned=True)``.
    """
    if device is None:
        device = generator.device if generator is not None else torch.device("cpu")
    device = torch.device(device)
    if min(ratio) <= 0 or scale[0] > scale[1] or ratio[0] > ratio[1]:
        raise ValueError(f"need 0 < ratio[0] <= ratio[1] and scale[0] <= scale[1]: {scale} {ratio}")
    # float64 keeps round() on the same side of .5 as torchvision's Python-float maths; the
    # tensors are tiny (batch x 10). MPS has no float64.
    ftype = torch.float32 if device.type == "mps" else torch.float64
    draw = {"generator": generator, "device": device, "dtype": torch.float32}
    area_frac = torch.rand(batch, _ATTEMPTS, **draw).to(ftype) * (scale[1] - scale[0]) + scale[0]
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    log_aspect = torch.rand(batch, _ATTEMPTS, **draw).to(ftype) * (log_hi - log_lo) + log_lo
    offsets_u = torch.rand(batch, 2, **draw).to(ftype)
    height = torch.as_tensor(height, device=device).to(ftype).expand(batch)
    width = torch.as_tensor(width, device=device).to(ftype).expand(batch)

    target_area = area_frac * (height * width)[:, None]
    aspect = torch.exp(log_aspect)
    w = torch.round(torch.sqrt(target_area * aspect))  # round half to even, as Python's round
    h = torch.round(torch.sqrt(target_area / aspect))
    ok = (w > 0) & (w <= width[:, None]) & (h > 0) & (h <= height[:, None])
    first = ok.to(torch.uint8).argmax(dim=1, keepdim=True)  # first True (0 when none)
    w = w.gather(1, first).squeeze(1)
    h = h.gather(1, first).squeeze(1)
    accepted = ok.any(dim=1)

    fb_w, fb_h = _fallback_size(height, width, ratio)
    w = torch.where(accepted, w, fb_w)
    h = torch.where(accepted, h, fb_h)
    # Uniform integer offsets in [0, size - crop]; the fallback is centred (floor division).
    x = torch.minimum(torch.floor(offsets_u[:, 0] * (width - w + 1)), width - w)
    y = torch.minimum(torch.floor(offsets_u[:, 1] * (height - h + 1)), height - h)
    x = torch.where(accepted, x, torch.floor((width - fb_w) / 2))
    y = torch.where(accepted, y, torch.floor((height - fb_h) / 2))
    return torch.stack([x, y, x + w, y + h], dim=1).to(torch.float32)


def _fallback_size(
    height: torch.Tensor, width: torch.Tensor, ratio: Sequence[float]
) -> tuple[torch.Tensor, torch.Tensor]:
    """torchvision's fallback per image: the whole image, its aspect clamped into ``ratio``."""
    in_ratio = width / height
    narrow, wide = in_ratio < min(ratio), in_ratio > max(ratio)
    fb_w = torch.where(wide, torch.round(height * max(ratio)), width)
    fb_h = torch.where(narrow, torch.round(width / min(ratio)), height)
    return fb_w, fb_h


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
    """
    _check_batch(images)
    batch, height, width, _ = images.shape
    if sizes is not None:
        height, width = sizes[:, 0], sizes[:, 1]
    boxes = sample_crop_boxes(
        batch, height, width, scale=scale, ratio=ratio, generator=generator, device=images.device
    )
    flip = torch.rand(batch, generator=generator, device=images.device) < flip_p
    transposed = None
    if sizes is not None:
        transposed = (sizes[:, 0] > sizes[:, 1]).to(images.device)
        boxes = torch.where(transposed[:, None], boxes[:, [1, 0, 3, 2]], boxes)
    out = _crop_resize(images, boxes, out_size, sampling_ratio)
    if transposed is not None:
        out = torch.where(transposed[:, None, None, None], out.transpose(-1, -2), out)
    out = torch.where(flip[:, None, None, None], out.flip(-1), out)
    return _normalise(out, mean, std, dtype, channels_last)


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
    """
    _check_batch(images)
    batch, height, width, _ = images.shape
    resized = round(out_size / resize_ratio)
    # Resize(R) maps the shorter side to R; torchvision truncates the longer side's length.
    if height <= width:
        r_h, r_w = resized, int(resized * width / height)
    else:
        r_h, r_w = int(resized * height / width), resized
    top = int(round((r_h - out_size) / 2.0)) * height / r_h
    left = int(round((r_w - out_size) / 2.0)) * width / r_w
    box = torch.tensor(
        [left, top, left + out_size * width / r_w, top + out_size * height / r_h],
        dtype=torch.float32,
        device=images.device,
    )
    out = _crop_resize(images, box.expand(batch, 4), out_size, sampling_ratio)
    return _normalise(out, mean, std, dtype, channels_last)


def _check_batch(images: torch.Tensor) -> None:
    if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[-1] != 3:
        raise ValueError(
            "expected a uint8 batch shaped (B, H, W, 3) (NHWC, as the decoded store holds it); "
            f"got {images.dtype} {tuple(images.shape)}"
        )


def _crop_resize(
    images: torch.Tensor, boxes: torch.Tensor, out_size: int, sampling_ratio: int
) -> torch.Tensor:
    """One roi_align over the batch: box ``b`` of image ``b`` -> float32 (B, 3, out, out)."""
    # uint8 NHWC -> float32 NCHW in one pass (roi_align wants a contiguous NCHW float input).
    x = images.permute(0, 3, 1, 2).to(torch.float32, memory_format=torch.contiguous_format)
    index = torch.arange(len(boxes), device=boxes.device, dtype=boxes.dtype)
    rois = torch.cat([index[:, None], boxes], dim=1)
    return roi_align(
        x,
        rois,
        output_size=out_size,
        spatial_scale=1.0,
        sampling_ratio=sampling_ratio,
        aligned=True,
    )


def _normalise(
    out: torch.Tensor,
    mean: Sequence[float],
    std: Sequence[float],
    dtype: torch.dtype,
    channels_last: bool,
) -> torch.Tensor:
    """``(x / 255 - mean) / std`` as one multiply-add (on the output, smaller than the input)."""
    std_t = torch.tensor(std, dtype=torch.float32, device=out.device)[:, None, None]
    mean_t = torch.tensor(mean, dtype=torch.float32, device=out.device)[:, None, None]
    out = torch.addcmul(-mean_t / std_t, out, 1.0 / (255.0 * std_t))
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    return out.to(dtype=dtype, memory_format=memory_format)


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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Throughput of the batched train transform.")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--resolution", type=int, default=256)
    parser.add_argument("--out", type=int, default=224)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args(argv)
    rate = bench_augment(args.batch, args.resolution, args.out, args.device, args.iters)
    print(
        f"random_resized_crop_flip: {rate:,.0f} img/s (batch {args.batch}, "
        f"{args.resolution}->{args.out}, {args.device}, {torch.get_num_threads()} threads)"
    )


if __name__ == "__main__":
    main()

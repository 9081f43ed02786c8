"""torchvision's RandomResizedCrop sampler for a whole batch at once, on its device.

:func:`sample_crop_boxes` draws ``RandomResizedCrop.get_params``'s distribution for every image
of a batch (same 10 attempts, same integer rounding, same centre-crop fallback) with tensor ops
only, so it never reads a value back and never stalls a CUDA stream. The boxes are
``roi_align``'s (:mod:`nettebench.data.augment`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

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
    height = _per_image(height, batch, ftype, device)
    width = _per_image(width, batch, ftype, device)

    target_area = area_frac * (height * width)[:, None]
    # In place, so that it stays float64 under apex O1: apex patches torch.exp and Tensor.exp
    # process-wide to cast a CUDA input to float32, and the float32 aspect would then meet the
    # float64 area in apex's patched __mul__, which refuses {Double, Float} ("Do not know how
    # to handle these types to promote"). apex leaves in-place exp_ alone but for fp16 inputs.
    aspect = log_aspect.exp_()
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


def _per_image(length: int | torch.Tensor, batch: int, ftype, device) -> torch.Tensor:
    """One length per image on ``device``: a tensor converted there, a number filled in (a
    tensor made from a Python number would be copied from the host: a sync on CUDA)."""
    if isinstance(length, torch.Tensor):
        return length.to(device=device, dtype=ftype).expand(batch)
    return torch.full((batch,), float(length), dtype=ftype, device=device)


def _fallback_size(
    height: torch.Tensor, width: torch.Tensor, ratio: Sequence[float]
) -> tuple[torch.Tensor, torch.Tensor]:
    """torchvision's fallback per image: the whole image, its aspect clamped into ``ratio``."""
    in_ratio = width / height
    narrow, wide = in_ratio < min(ratio), in_ratio > max(ratio)
    fb_w = torch.where(wide, torch.round(height * max(ratio)), width)
    fb_h = torch.where(narrow, torch.round(width / min(ratio)), height)
    return fb_w, fb_h

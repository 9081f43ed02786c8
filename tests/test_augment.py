"""The batched device-side transforms match the reference's torchvision transforms."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from torchvision import transforms

from nettebench.data.augment import (
    center_crop_resize,
    random_resized_crop_flip,
    sample_crop_boxes,
)
from nettebench.data.pil import IMAGENET_MEAN, IMAGENET_STD

N = 20_000
# Two-sample Kolmogorov-Smirnov critical value at alpha = 0.001 for n = m = N:
# c(alpha) * sqrt((n + m) / (n * m)) with c(0.001) = sqrt(-ln(0.0005) / 2) = 1.949, i.e. 0.0195.
# Both samples are integer box sizes (ties), which only makes the test more conservative.
KS_CRITICAL = 1.95 * math.sqrt(2 / N)


def ks_statistic(a: torch.Tensor, b: torch.Tensor) -> float:
    """Two-sample KS statistic: the largest gap between the two empirical CDFs (ties handled)."""
    a, b = torch.sort(a.double()).values, torch.sort(b.double()).values
    points = torch.cat([a, b]).unique()
    cdf_a = torch.searchsorted(a, points, right=True).double() / len(a)
    cdf_b = torch.searchsorted(b, points, right=True).double() / len(b)
    return (cdf_a - cdf_b).abs().max().item()


def torchvision_boxes(height: int, width: int, n: int, seed: int = 0) -> torch.Tensor:
    torch.manual_seed(seed)
    img = torch.empty(1, height, width)
    rows = [
        transforms.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3]) for _ in range(n)
    ]
    i, j, h, w = torch.tensor(rows, dtype=torch.float64).unbind(1)
    return torch.stack([j, i, j + w, i + h], dim=1)


def our_boxes(height: int, width: int, n: int, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return sample_crop_boxes(n, height, width, generator=generator).double()


def box_stats(boxes: torch.Tensor, height: int, width: int) -> dict[str, torch.Tensor]:
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    return {
        "area": w * h / (height * width),
        "log_aspect": torch.log(w / h),
        "x_centre": (boxes[:, 0] + boxes[:, 2]) / 2,
        "y_centre": (boxes[:, 1] + boxes[:, 3]) / 2,
    }


def test_ks_detects_a_wrong_distribution():
    """The test has power: a sampler with a wider aspect range fails it."""
    generator = torch.Generator().manual_seed(2)
    wrong = sample_crop_boxes(N, 256, 256, ratio=(1 / 2, 2), generator=generator).double()
    ours = box_stats(our_boxes(256, 256, N), 256, 256)
    assert ks_statistic(box_stats(wrong, 256, 256)["log_aspect"], ours["log_aspect"]) > KS_CRITICAL


@pytest.mark.parametrize(("height", "width"), [(256, 256), (32, 256)])
def test_crop_distribution_matches_random_resized_crop(height, width):
    ours = our_boxes(height, width, N)
    ref = torchvision_boxes(height, width, N)
    assert (ours[:, :2] >= 0).all() and (ours[:, 2] <= width).all() and (ours[:, 3] <= height).all()
    assert (ours == ours.round()).all()  # integer boxes, as torchvision's
    ours_s, ref_s = box_stats(ours, height, width), box_stats(ref, height, width)
    for name in ours_s:
        stat = ks_statistic(ours_s[name], ref_s[name])
        assert stat < KS_CRITICAL, f"{name}: KS {stat:.4f} >= {KS_CRITICAL:.4f}"

    # The fallback (centre crop, aspect clamped) fires as often as torchvision's. A successful
    # attempt can coincide with the fallback box; counting "equals the fallback box" in both
    # samples treats that alike. Two-proportion z-test, |z| < 3.3 (alpha = 0.001).
    fb_w, fb_h = (round(height * 4 / 3), height) if width / height > 4 / 3 else (width, height)
    fallback = torch.tensor(
        [(width - fb_w) // 2, (height - fb_h) // 2, (width - fb_w) // 2 + fb_w, height]
    ).double()
    p_ours = (ours == fallback).all(1).double().mean().item()
    p_ref = (ref == fallback).all(1).double().mean().item()
    pooled = (p_ours + p_ref) / 2
    se = math.sqrt(max(pooled * (1 - pooled) * 2 / N, 1e-12))
    assert abs(p_ours - p_ref) / se < 3.3, (p_ours, p_ref)
    if height == 32:
        assert p_ref > 0.2  # the elongated image really exercises the fallback


def unnormalise(x: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(IMAGENET_MEAN)[:, None, None]
    std = torch.tensor(IMAGENET_STD)[:, None, None]
    return (x * std + mean) * 255


def random_batch(b=4, size=64, seed=0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (b, size, size, 3), dtype=torch.uint8, generator=generator)


def test_shapes_dtypes_and_layout():
    images = random_batch()
    out = random_resized_crop_flip(images, 32, generator=torch.Generator().manual_seed(0))
    assert out.shape == (4, 3, 32, 32) and out.dtype == torch.float32 and out.is_contiguous()
    lo = (0 - max(IMAGENET_MEAN)) / min(IMAGENET_STD)
    hi = (1 - min(IMAGENET_MEAN)) / min(IMAGENET_STD)
    assert lo - 1e-5 <= out.min() and out.max() <= hi + 1e-5
    half = random_resized_crop_flip(images, 32, dtype=torch.bfloat16, channels_last=True)
    assert half.dtype == torch.bfloat16
    assert half.is_contiguous(memory_format=torch.channels_last)
    val = center_crop_resize(images, 48, dtype=torch.float16)
    assert val.shape == (4, 3, 48, 48) and val.dtype == torch.float16
    with pytest.raises(ValueError, match="uint8 batch shaped"):
        random_resized_crop_flip(images.float(), 32)


def test_constant_colour_survives_crop_resize_and_is_normalised():
    colour = torch.tensor([200, 17, 90], dtype=torch.uint8)
    images = colour.expand(8, 64, 64, 3).clone()
    expected = (colour.float() / 255 - torch.tensor(IMAGENET_MEAN)) / torch.tensor(IMAGENET_STD)
    for out in (
        random_resized_crop_flip(images, 40, generator=torch.Generator().manual_seed(3)),
        center_crop_resize(images, 40),
    ):
        torch.testing.assert_close(out, expected[None, :, None, None].expand_as(out))


def test_known_boxes_reproduce_the_pixels():
    """aligned=True: box (x, y, x + w, y + h) covers exactly img[y:y+h, x:x+w].

    With the default adaptive sampling, a full-image box at out_size == H is the identity, and a
    box twice the output size is an exact 2x2 average pool (samples at the 4 pixel centres).
    A fixed sampling_ratio=2 is not the identity (it blurs by [1/8, 3/4, 1/8]).
    """
    from nettebench.data.augment import _crop_resize

    images = random_batch(b=2, size=32)
    nchw = images.permute(0, 3, 1, 2).float()
    full = torch.tensor([[0.0, 0.0, 32.0, 32.0]] * 2)
    torch.testing.assert_close(_crop_resize(images, full, 32, -1), nchw, atol=1e-4, rtol=0)
    blurred = _crop_resize(images, full, 32, 2)
    assert (blurred - nchw).abs().max() > 10

    box = torch.tensor([[4.0, 6.0, 24.0, 26.0], [0.0, 12.0, 20.0, 32.0]])
    expected = torch.stack(
        [
            F.avg_pool2d(nchw[0:1, :, 6:26, 4:24], 2)[0],
            F.avg_pool2d(nchw[1:2, :, 12:32, 0:20], 2)[0],
        ]
    )
    torch.testing.assert_close(_crop_resize(images, box, 10, -1), expected, atol=1e-4, rtol=0)

    # Full-image crops (scale pinned to 1, square ratio) through the public function.
    out = random_resized_crop_flip(images, 32, scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=0.0)
    torch.testing.assert_close(unnormalise(out), nchw, atol=1e-3, rtol=0)


def test_flip_draws_do_not_change_the_boxes():
    images = random_batch(b=6)
    kept = random_resized_crop_flip(
        images, 24, generator=torch.Generator().manual_seed(7), flip_p=0
    )
    flipped = random_resized_crop_flip(
        images, 24, generator=torch.Generator().manual_seed(7), flip_p=1
    )
    torch.testing.assert_close(flipped, kept.flip(-1), atol=0, rtol=0)
    half = random_resized_crop_flip(images, 24, generator=torch.Generator().manual_seed(7))
    is_flipped = [torch.equal(half[i], flipped[i]) for i in range(6)]
    is_kept = [torch.equal(half[i], kept[i]) for i in range(6)]
    assert all(f or k for f, k in zip(is_flipped, is_kept, strict=True))
    assert any(is_flipped) and any(is_kept)  # seed 7 flips some and keeps some of the 6


def test_same_seed_same_output_different_seed_different_output():
    images = random_batch()
    a = random_resized_crop_flip(images, 32, generator=torch.Generator().manual_seed(11))
    b = random_resized_crop_flip(images, 32, generator=torch.Generator().manual_seed(11))
    c = random_resized_crop_flip(images, 32, generator=torch.Generator().manual_seed(12))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize(("size", "out"), [(256, 224), (256, 160), (96, 64)])
def test_center_crop_matches_the_reference_val_transform(size, out):
    """Same geometry as Resize(round(out / 0.875)) + CenterCrop(out) on the PIL image.

    The kernels differ (PIL's antialiased bilinear vs roi_align's box of bilinear taps), so on
    a smooth image they agree to well under 3/255 mean absolute error; 256 -> 224 is an exact
    pixel crop (R == 256).
    """
    yy, xx = np.mgrid[0:size, 0:size] / size
    rgb = np.stack([255 * xx, 255 * yy, 127.5 + 127.5 * np.sin(6 * xx + 4 * yy)], axis=-1)
    array = rgb.round().astype(np.uint8)
    reference = transforms.Compose(
        [
            transforms.Resize(round(out / 0.875)),
            transforms.CenterCrop(out),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )(Image.fromarray(array))
    ours = center_crop_resize(torch.from_numpy(array)[None], out)[0]
    mae = (unnormalise(ours) - unnormalise(reference)).abs().mean().item()
    assert mae < (1e-3 if size == 256 and out == 224 else 3.0), mae


def _fallback_peak_bytes(batch: int, height: int, width: int, out: int) -> int:
    """The largest tensor torchvision's pure-Python roi_align allocates for one crop per image
    with ``sampling_ratio=-1``, measured by running it (uncompiled) on this CPU."""
    import sys

    from tests.op_log import OpLog

    python_roi_align = sys.modules["torchvision.ops.roi_align"]._roi_align.__wrapped__
    x = torch.rand(batch, 3, height, width)
    rois = torch.tensor([[i, 0.0, 0.0, width, height] for i in range(batch)])
    with OpLog() as log:
        python_roi_align(x, rois, 1.0, out, out, -1, True)
    return max(op.fresh for op in log.ops)


def test_the_python_roi_align_would_need_59_gb_for_one_224_crop_of_a_store_frame():
    """Why deterministic cached cells must not reach it: a [K, C, out, out, H, W] float32
    tensor, measured on small shapes, is 59 GB at batch 1 for a 224 crop of a 256 x 384 slot."""
    for batch, height, width, out in [(1, 6, 9, 4), (2, 8, 12, 5)]:
        assert _fallback_peak_bytes(batch, height, width, out) == 4 * batch * 3 * out**2 * (
            height * width
        )
    assert 4 * 1 * 3 * 224**2 * 256 * 384 / 1e9 > 59


def test_with_deterministic_algorithms_the_crops_do_not_take_the_python_roi_align(monkeypatch):
    """torchvision sends a CUDA input to its Python roi_align when deterministic algorithms are
    on; here the same branch is forced on the CPU (the one it takes without compiled ops), with
    a Python version that fails: the transforms call the kernel and never reach it."""
    import sys

    module = sys.modules["torchvision.ops.roi_align"]

    def python_roi_align(*args, **kwargs):
        raise AssertionError("the pure-Python roi_align was called")

    monkeypatch.setattr(module, "_has_ops", lambda: False)
    monkeypatch.setattr(module, "_roi_align", python_roi_align)
    images = torch.randint(0, 256, (3, 40, 60, 3), dtype=torch.uint8)
    generator = torch.Generator().manual_seed(0)
    out = random_resized_crop_flip(images, 16, generator=generator)
    resized = center_crop_resize(images, 16)
    assert out.shape == resized.shape == (3, 3, 16, 16)

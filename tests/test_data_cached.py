"""The ``cached`` loader's CPU path: the same pixels torchvision's transforms give, normalised
like the reference, and a reused batch buffer never overwritten while anything holds it."""

from __future__ import annotations

import pytest
import torch
from torchvision import transforms

from nettebench.data import store as st
from nettebench.data.cached import CachedSplit, _cpu_loaders, _NormalisedBatches, _StoreBatches
from nettebench.data.pil import IMAGENET_MEAN, IMAGENET_STD
from tests.memory_store import OUT, SIDE, MemoryStore


def _reference_normalise(uint8_nhwc: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (uint8_nhwc.permute(0, 3, 1, 2).float() / 255 - mean) / std


def test_train_crops_are_torchvisions_random_resized_crop_and_flip_of_the_whole_image():
    store = MemoryStore()
    assert {h > w for h, w in store.train_sizes} == {True, False}
    batches = _StoreBatches(store.train, store.train_labels, OUT, True, store.train_sizes)
    reference = transforms.Compose(
        [transforms.RandomResizedCrop(OUT, antialias=True), transforms.RandomHorizontalFlip()]
    )
    torch.manual_seed(7)
    ours, labels = batches.__getitems__(list(range(12)))
    torch.manual_seed(7)
    theirs = torch.stack(
        [reference(torch.from_numpy(store.upright[i]).permute(2, 0, 1)) for i in range(12)]
    )
    assert ours.dtype == torch.uint8 and ours.shape == (12, OUT, OUT, 3)
    difference = (ours.permute(0, 3, 1, 2).int() - theirs.int()).abs()
    # The same crop boxes and flips; the vectorised channels-last kernel rounds some pixels
    # the other way (measured: about one in six), never by more than one level.
    assert difference.max() <= 1
    assert (difference == 0).float().mean() > 0.75
    assert labels.tolist() == store.train_labels[:12].tolist()


@pytest.mark.parametrize("stored_side", [SIDE, 80])
def test_val_crop_is_the_reference_resize_and_centre_crop(stored_side):
    store = MemoryStore(side=stored_side)
    batches = _StoreBatches(store.val, store.val_labels, OUT, train=False)
    reference = transforms.Compose(
        [transforms.Resize(round(OUT / 0.875), antialias=True), transforms.CenterCrop(OUT)]
    )
    ours, _ = batches.__getitems__(list(range(len(store.val))))
    theirs = torch.stack(
        [reference(torch.from_numpy(image).permute(2, 0, 1)) for image in store.val]
    )
    difference = (ours.permute(0, 3, 1, 2).int() - theirs.int()).abs()
    if stored_side == SIDE:  # a store pre-resized as the reference does: an exact pixel crop
        assert difference.max() == 0
    else:
        assert difference.max() <= 1


@pytest.mark.parametrize("channels_last", [False, True])
def test_normalised_batches_match_the_reference_and_the_memory_format(channels_last):
    uint8 = [torch.randint(0, 256, (4, OUT, OUT, 3), dtype=torch.uint8) for _ in range(5)]
    loader = [(images, torch.arange(4)) for images in uint8]
    batches = _NormalisedBatches(loader, channels_last=channels_last)
    for (images, targets), source in zip(batches, uint8, strict=True):
        torch.testing.assert_close(images, _reference_normalise(source), rtol=0, atol=1e-5)
        memory_format = torch.channels_last if channels_last else torch.contiguous_format
        assert images.is_contiguous(memory_format=memory_format)
        assert targets.tolist() == [0, 1, 2, 3]


def test_a_held_batch_is_never_overwritten_and_a_dropped_one_is_reused():
    uint8 = [torch.full((2, 8, 8, 3), value, dtype=torch.uint8) for value in range(10)]
    loader = [(images, torch.zeros(2)) for images in uint8]

    held = list(_NormalisedBatches(loader, channels_last=False))  # every batch kept
    assert len({batch.data_ptr() for batch, _ in held}) == len(uint8)
    for (batch, _), source in zip(held, uint8, strict=True):
        torch.testing.assert_close(batch, _reference_normalise(source), rtol=0, atol=1e-5)

    views = []
    for batch, _ in _NormalisedBatches(loader, channels_last=False):
        views.append(batch[0])  # a view keeps its batch alive, though the name moves on
    for view, source in zip(views, uint8, strict=True):
        torch.testing.assert_close(view, _reference_normalise(source)[0], rtol=0, atol=1e-5)

    addresses = [batch.data_ptr() for batch, _ in _NormalisedBatches(loader, False)]
    assert len(set(addresses)) <= _NormalisedBatches.keep  # nothing held: buffers cycle


def test_a_batch_autograd_saved_is_not_overwritten_before_backward():
    uint8 = [torch.full((2, 8, 8, 3), value, dtype=torch.uint8) for value in range(4)]
    loader = [(images, torch.zeros(2)) for images in uint8]
    conv = torch.nn.Conv2d(3, 1, 3)
    losses, inputs = [], []
    for batch, _ in _NormalisedBatches(loader, channels_last=False):
        losses.append(conv(batch).sum())  # the graph saved ``batch``; the name is dropped
        inputs.append(batch.clone())
        del batch
    for loss in losses:
        loss.backward()
    # d(sum conv(x))/d(weight) summed over batches is the sum of input patches: it equals the
    # gradient only if every saved input still held its own batch at backward time.
    patch_sums = sum(
        torch.nn.functional.unfold(x, 3).sum(dim=(0, 2)).view_as(conv.weight) for x in inputs
    )
    torch.testing.assert_close(conv.weight.grad, patch_sums, rtol=1e-5, atol=1e-3)


def test_worker_loaders_give_fixed_shapes_and_repeat_with_the_seed():
    store = MemoryStore(train=20, val=7)
    loaders = _cpu_loaders(store, image_size=OUT, batch_size=8, workers=2, channels_last=False)
    assert len(loaders.train) == 2 and len(loaders.val) == 1  # 20 // 8 and ceil(7 / 8)

    def epoch(seed: int) -> list[torch.Tensor]:
        loaders.generator.manual_seed(seed)
        return [images.clone() for images, _ in loaders.train]

    first, again, other = epoch(3), epoch(3), epoch(4)
    assert [b.shape for b in first] == [(8, 3, OUT, OUT)] * 2
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])
    val = [images for images, _ in loaders.val]
    assert [b.shape[0] for b in val] == [7]


def test_device_path_crops_each_image_upright_and_inside_its_own_frame():
    """The batched (GPU) path on the CPU: a portrait image, dark on top and bright below,
    cropped whole, comes out upright; boxes never reach the slot's padding (black here).

    A crop at an image's right edge reads half a pixel past it (roi_align's bilinear taps):
    the store repeats the last column there (:func:`store_build.full_frame`), and so does this
    slot, once; a box reaching past the image would read the black beyond."""
    side, frame = 16, st.frame_width(16)
    slots = torch.zeros(2, side, frame, 3, dtype=torch.uint8)
    upright = torch.full((20, side, 3), 250, dtype=torch.uint8)
    upright[:10] = 50
    slots[0, :, :20] = upright.transpose(0, 1)  # portrait: stored transposed
    slots[1, :, :18] = 200  # landscape 16 x 18
    slots[0, :, 20], slots[1, :, 18] = slots[0, :, 19], slots[1, :, 17]  # each one's edge
    sizes = torch.tensor([[20, 16], [16, 18]], dtype=torch.int32)
    split = CachedSplit(
        images=slots, labels=torch.tensor([0, 1]), batch_size=2, image_size=8,
        device=torch.device("cpu"), train=True, generator=torch.Generator().manual_seed(0),
        sizes=sizes,
    )  # fmt: skip
    from nettebench.data import augment

    whole = augment.random_resized_crop_flip(
        slots, 8, generator=torch.Generator().manual_seed(0), scale=(1.0, 1.0),
        ratio=(16 / 20, 16 / 20), sizes=sizes, mean=(0, 0, 0), std=(1 / 255,) * 3, flip_p=0,
    )  # fmt: skip
    portrait = whole[0].mean(dim=(0, 2))  # per output row
    assert portrait[:3].max() < 60 and portrait[-3:].min() > 240  # upright, not sideways
    for _ in range(20):  # random crops: none reads the black padding
        images, targets = next(iter(split))  # shuffled: the target says which image
        pixels = images * torch.tensor(IMAGENET_STD).view(1, 3, 1, 1) + torch.tensor(
            IMAGENET_MEAN
        ).view(1, 3, 1, 1)
        by_label = dict(zip(targets.tolist(), pixels, strict=True))
        assert by_label[1].min() > 180 / 255  # the landscape image is 200 throughout
        assert by_label[0].min() > 40 / 255  # the portrait one 50 or 250

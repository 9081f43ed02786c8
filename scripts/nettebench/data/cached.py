"""The ``cached`` input pipeline: batches sampled from the decoded store, never a JPEG again.

The reference pipeline decodes every JPEG every epoch on the CPU, which is what starved the
study's GPU. Here the dataset was decoded once into a uint8 store (:mod:`nettebench.data.store`).

- Training on a GPU: each epoch only shuffles indices, gathers uint8 batches, and runs
  random-resized-crop, flip and normalisation batched on the GPU (:mod:`nettebench.data.augment`).
  Where the store lives is decided once (the cell's ``store_placement``): resident, copied into
  device memory once, when it fits there (or when asked); otherwise streamed, a background
  thread gathering batches from the host memmap into pinned buffers ahead of the GPU
  (:mod:`nettebench.data.streaming`).
- Training on a CPU there is no idle accelerator to hand the work to, and one batched
  ``roi_align`` on the CPU is slower than cropping each uint8 image with torchvision's own
  sampler and resize in the DataLoader's ``workers`` (about 0.2 ms per 224 px crop on one
  core, with no decode): so the CPU path does that, each worker writing whole uint8 batches
  into shared memory (:class:`_StoreBatches`), normalised in the main process into reused
  buffers (:class:`_NormalisedBatches`).

Every training batch has the same shape (the odd last batch is dropped, as fixed shapes keep
cuDNN from autotuning a second shape), as in the ``pil`` loader, so both train the same
``n // batch_size`` batches an epoch; validation keeps every image (the trainer pads the short
last batch to the same shape, :func:`nettebench.training.loop.evaluate`).
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader

from nettebench.data import augment
from nettebench.data.pil import IMAGENET_MEAN, IMAGENET_STD, Loaders, _seed_worker
from nettebench.data.shards import Shard
from nettebench.data.streaming import RING_SLOTS, stream_to_device, upload
from nettebench.vocabulary.cell import VAL_RESIZE_RATIO

# Use at most this share of the free device memory for the store (the rest is for training).
DEVICE_MEMORY_SHARE = 0.5


RESIDENT = "resident"  # the store is in device memory, batches are gathered there
STREAMED = "streamed"  # the store stays in host memory, batches are streamed to the device


@dataclass
class CachedSplit:
    """One split (train or val) as an iterable of (images, targets) batches on ``device``.

    ``placement`` says, once for the whole run, where the store is: ``resident`` (``images``,
    ``labels`` and ``sizes`` on ``device``: each batch is gathered there) or ``streamed`` (they
    stay in host memory and a background thread streams each batch's rows ahead,
    :mod:`nettebench.data.streaming`). Either way the augmentation runs on ``device`` with
    constants built once per split, and the same seed gives the same batches.

    Randomness: ``generator`` (a host generator, re-seeded by the trainer every epoch) draws the
    epoch's order on the host and the seed of a device generator for the epoch's crops and
    flips, so nothing random is read back from the device.
    """

    images: torch.Tensor  # uint8 (N, H, W, 3), on the device (resident) or on the host
    labels: torch.Tensor  # int64 (N,), beside ``images``
    batch_size: int
    image_size: int
    device: torch.device
    train: bool
    placement: str = RESIDENT
    generator: torch.Generator | None = None  # host: order and augmentation seed (train only)
    channels_last: bool = False
    sizes: torch.Tensor | None = None  # (N, 2) full-frame (height, width), train only
    ring_slots: int = RING_SLOTS  # host buffers of a streamed split
    shard: Shard = Shard()  # a data-parallel process's share (data.shards); all of it by default

    def __post_init__(self) -> None:
        if self.placement not in (RESIDENT, STREAMED):
            raise ValueError(f"placement must be {RESIDENT} or {STREAMED}, not {self.placement!r}")
        if self.train:
            self.transform = augment.TrainTransform(
                self.image_size, device=self.device, channels_last=self.channels_last
            )
            self.augment_generator = torch.Generator(device=self.device)
        else:
            height, width = self.images.shape[1:3]
            self.transform = augment.ValTransform(
                self.image_size, height, width, device=self.device,
                channels_last=self.channels_last,
            )  # fmt: skip
        self.gathered = None  # a resident split's batch buffer, reused from batch to batch

    def __len__(self) -> int:
        n = self.images.shape[0]
        if self.train:  # whole global batches (batch_size is the per-process share)
            return n // (self.batch_size * self.shard.count)
        return math.ceil(self.shard.size(n) / self.batch_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = self.images.shape[0]
        if self.train:
            whole = len(self) * self.batch_size * self.shard.count
            order = self.shard.take(torch.randperm(n, generator=self.generator)[:whole])
            seed = int(torch.randint(2**62, (1,), generator=self.generator))
            self.augment_generator.manual_seed(self.shard.seed(seed))
        else:
            order = self.shard.take(torch.arange(n))
        batches = self._resident(order) if self.placement == RESIDENT else self._streamed(order)
        for batch, targets, sizes in batches:
            if self.train:
                images = self.transform(batch, generator=self.augment_generator, sizes=sizes)
            else:
                images = self.transform(batch)
            yield images, targets

    def scratch_bytes(self) -> int:
        """The split's reusable buffers on its device: the gathered batch and the transform's
        intermediates (never a batch handed out)."""
        gathered = 0 if self.gathered is None else self.gathered.nbytes
        return gathered + self.transform.buffers.nbytes()

    def _resident(self, order: torch.Tensor):
        if self.device.type == "cuda":  # one asynchronous upload per epoch, from pinned memory
            order = order.pin_memory().to(self.device, non_blocking=True)
        for start in range(0, len(order), self.batch_size):
            index = order[start : start + self.batch_size]
            if self.gathered is None:
                self.gathered = torch.empty(
                    (self.batch_size, *self.images.shape[1:]), dtype=self.images.dtype,
                    device=self.device,
                )  # fmt: skip
            batch = torch.index_select(self.images, 0, index, out=self.gathered[: len(index)])
            sizes = None if self.sizes is None else self.sizes.index_select(0, index)
            yield batch, self.labels.index_select(0, index), sizes

    def _streamed(self, order: torch.Tensor):
        arrays = [self.images, self.labels] + ([] if self.sizes is None else [self.sizes])
        for rows in stream_to_device(
            arrays, order, self.batch_size, self.device, slots=self.ring_slots
        ):
            # The rows are device buffers refilled two batches on: the targets are kept.
            yield rows[0], rows[1].clone(), rows[2] if len(rows) > 2 else None


class _StoreBatches(torch.utils.data.Dataset):
    """Whole uint8 batches cut from the store in one call (the CPU path's workers).

    The DataLoader hands each worker a batch's indices (``__getitems__``), and the worker writes
    every crop straight into one uint8 NHWC batch it allocated in shared memory: no per-sample
    collation, and a quarter of the pages a float batch would fault in (on a 2-core VM the
    page faults of a fresh float batch per step cost more than the crops themselves).

    Training crops use torchvision's own ``RandomResizedCrop.get_params`` (its exact sampler,
    from the worker's seeded torch RNG) and the antialiased bilinear resize torchvision applies
    to uint8 tensors; validation is the reference's resize-then-centre-crop, an exact pixel
    crop on a store pre-resized to ``round(image_size / VAL_RESIZE_RATIO)``.
    """

    def __init__(self, images, labels, image_size: int, train: bool, sizes=None):
        # Imported here, in the main process, so that workers forked every epoch inherit it
        # instead of each importing torchvision's transforms again (~0.3 s per worker).

        self.crop_params = torchvision.transforms.RandomResizedCrop.get_params
        self.images, self.labels, self.sizes = images, labels, sizes
        self.image_size, self.train = image_size, train

    def __len__(self) -> int:
        return len(self.labels)

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:

        side = self.image_size
        if torch.utils.data.get_worker_info() is None:
            out = torch.empty((len(indices), side, side, 3), dtype=torch.uint8)
        else:  # in shared memory, so that sending it to the main process copies nothing
            storage = torch.UntypedStorage._new_shared(len(indices) * side * side * 3)
            out = torch.tensor([], dtype=torch.uint8).set_(storage).view(-1, side, side, 3)
        for slot, index in enumerate(indices):
            # The store is a read-only memmap shared by the workers; crops only read from it.
            image = _as_tensor(np.asarray(self.images[index]))
            if self.sizes is not None:  # a full frame: the image's part of its slot, upright
                height, width = (int(length) for length in self.sizes[index])
                image = image[: min(height, width), : max(height, width)]
                image = image.transpose(0, 1) if height > width else image
            image = image.permute(2, 0, 1)
            crop = self._train_crop(image) if self.train else self._val_crop(image)
            out[slot].copy_(crop.permute(1, 2, 0))
        return out, torch.as_tensor(np.asarray(self.labels[indices]), dtype=torch.int64)

    def _train_crop(self, image: torch.Tensor) -> torch.Tensor:
        top, left, height, width = self.crop_params(image, (0.08, 1.0), (3 / 4, 4 / 3))
        crop = _resize(image[:, top : top + height, left : left + width], self.image_size)
        return crop.flip(-1) if torch.rand(1).item() < 0.5 else crop

    def _val_crop(self, image: torch.Tensor) -> torch.Tensor:

        resized = round(self.image_size / VAL_RESIZE_RATIO)
        height, width = image.shape[1:]
        if min(height, width) != resized:  # torchvision's Resize(int): shorter side, truncated
            scale = resized / min(height, width)
            image = _resize(image, (int(height * scale), int(width * scale)))
            height, width = image.shape[1:]
        top = int(round((height - self.image_size) / 2.0))
        left = int(round((width - self.image_size) / 2.0))
        return image[:, top : top + self.image_size, left : left + self.image_size]


def _resize(image: torch.Tensor, size) -> torch.Tensor:
    """Antialiased bilinear resize of one uint8 CHW image (torchvision's tensor resize)."""

    size = (size, size) if isinstance(size, int) else size
    # A crop of an HWC image is channels-last but not contiguous; made contiguous first, the
    # resize takes torch's vectorised uint8 channels-last kernel and returns HWC memory, which
    # the batch then takes with a plain copy: 0.10 ms per crop here instead of 0.30 ms.
    crop = image.unsqueeze(0).contiguous(memory_format=torch.channels_last)
    resized = F.interpolate(crop, size=size, mode="bilinear", antialias=True, align_corners=False)
    return resized[0]


def _whole_batches(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The DataLoader's collate step: ``__getitems__`` already returned the batch."""
    return batch


@dataclass
class _NormalisedBatches:
    """Worker batches (uint8 NHWC) as normalised float batches, in the cell's memory format.

    A float batch is written into a buffer that is reused once nothing else references it: a
    fresh 38 MB tensor per 64-image step costs more in page faults than its arithmetic (here
    16 ms against 2 ms). A buffer the consumer still holds (the loop's previous batch, a view,
    a tensor autograd saved) is never overwritten; a new one is allocated instead. "Holds" is
    the buffer's Python reference count, which through PyTorch's PyObject preservation also
    counts views and saved tensors, and, as a second guard, torch's own use counts.
    """

    loader: torch.utils.data.DataLoader
    channels_last: bool
    buffers: list[torch.Tensor] = field(default_factory=list)
    keep: int = 3
    python_refs: int = 0  # sys.getrefcount of a buffer only the list and one name hold

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:

        scale = 1 / (torch.tensor(IMAGENET_STD) * 255)
        shift = -torch.tensor(IMAGENET_MEAN) * 255 * scale
        for images, targets in self.loader:
            batch, side = images.shape[0], images.shape[1]
            out = self._free_buffer(batch, side)
            if self.channels_last:
                # NHWC memory: one row of side x 3 values repeats the channel pattern, so the
                # affine map runs over contiguous rows (4x faster than a (3,) broadcast).
                rows = out.permute(0, 2, 3, 1).view(-1, side * 3)
                rows.copy_(images.view(-1, side * 3))
                torch.addcmul(shift.repeat(side), rows, scale.repeat(side), out=rows)
            else:
                out.copy_(images.permute(0, 3, 1, 2))
                out.mul_(scale.view(1, 3, 1, 1)).add_(shift.view(1, 3, 1, 1))
            yield out, targets

    def _free_buffer(self, batch: int, side: int) -> torch.Tensor:
        memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        for buffer in self.buffers:
            if (
                buffer.shape[0] == batch
                and buffer.shape[-1] == side
                and sys.getrefcount(buffer) <= self.python_refs  # no other Python name
                and _no_views_or_saves(buffer)
            ):
                return buffer
        buffer = torch.empty((batch, 3, side, side), memory_format=memory_format)
        if len(self.buffers) < self.keep and _no_views_or_saves(buffer):
            self.buffers.append(buffer)
            self.python_refs = sys.getrefcount(buffer)  # the list, ``buffer``, the argument
        return buffer


def _no_views_or_saves(buffer: torch.Tensor) -> bool:
    """Whether no view and no autograd-saved tensor shares ``buffer``'s memory, by torch's own
    use counts; on a torch without them (private API), say no and never reuse."""
    storage_uses = getattr(torch._C, "_storage_Use_Count", None)
    if storage_uses is None or not hasattr(buffer, "_use_count"):
        return False
    # One use of the storage by the tensor itself, one by the temporary storage object.
    return buffer._use_count() == 1 and storage_uses(buffer.untyped_storage()._cdata) == 2


def _cpu_loaders(store, *, image_size: int, batch_size: int, workers: int, channels_last: bool):

    generator = torch.Generator()

    def split(images, labels, train: bool, sizes=None) -> _NormalisedBatches:
        loader = DataLoader(
            _StoreBatches(images, labels, image_size, train, sizes),
            batch_size=batch_size,
            shuffle=train,
            drop_last=train,  # fixed batch shapes
            num_workers=workers,
            collate_fn=_whole_batches,
            generator=generator if train else None,
            worker_init_fn=_seed_worker,
        )
        return _NormalisedBatches(loader, channels_last)

    return _store_loaders(store, split, generator, RESIDENT)


def _store_loaders(store, split, generator: torch.Generator, placement: str, device_bytes=0):
    """The trainer's ``Loaders`` over a store, each split made by ``split(images, labels,
    train, sizes)`` (train: the full frames and their sizes; val: square images)."""

    return Loaders(
        train=split(store.train, store.train_labels, True, store.train_sizes),
        val=split(store.val, store.val_labels, False),
        num_classes=len(store.classes),
        classes=list(store.classes),
        generator=generator,
        placement=placement,
        device_bytes=device_bytes,
    )


def loader_device_mb(loaders, device: torch.device) -> float:
    """The device memory the loaders hold apart from the training (MB): a resident store and
    the cached path's scratch buffers (:meth:`CachedSplit.scratch_bytes`), so that peak memory
    less this compares ``pil`` and ``cached`` alike (pil's loader memory is on the host). 0 on a
    CPU, where both are host memory."""
    if device.type != "cuda":
        return 0.0
    splits = (loaders.train, loaders.val)
    scratch = sum(split.scratch_bytes() for split in splits if hasattr(split, "scratch_bytes"))
    return (loaders.device_bytes + scratch) / 2**20


def store_bytes(store) -> int:
    """What the store takes once resident on the device: both splits' images, labels and the
    training frames' sizes."""
    arrays = [store.train, store.train_labels, store.val, store.val_labels, store.train_sizes]
    return sum(array.nbytes for array in arrays if array is not None)


def store_fits(store, device: torch.device) -> bool:
    """Whether both splits fit in DEVICE_MEMORY_SHARE of the device's free memory."""
    if device.type != "cuda":
        return True  # on a CPU the "device" is host memory, where the memmap already is
    free, _ = torch.cuda.mem_get_info(device)
    return store.train.nbytes + store.val.nbytes <= DEVICE_MEMORY_SHARE * free


def resolve_placement(requested: str, store, device: torch.device) -> str:
    """The cell's ``store_placement`` as what the device path does: ``device`` is resident,
    ``host`` streamed, ``auto`` resident when the store fits (:func:`store_fits`)."""
    if requested == "device":
        return RESIDENT
    if requested == "host":
        return STREAMED
    if requested == "auto":
        return RESIDENT if store_fits(store, device) else STREAMED
    raise ValueError(f"store_placement must be auto, device or host, not {requested!r}")


def build_cached_loaders(
    store,
    *,
    image_size: int,
    batch_size: int,
    device: torch.device,
    channels_last: bool,
    workers: int = 0,
    placement: str = "auto",
):
    """Train and val splits over an opened store, as the trainer's ``Loaders``.

    On a CPU: crops in DataLoader workers (the store is host memory already; ``placement`` has
    nothing to choose). On a GPU: :func:`device_loaders`, resident or streamed as ``placement``
    (the cell's ``store_placement``) resolves, decided here once.
    """
    if device.type == "cpu":
        return _cpu_loaders(
            store,
            image_size=image_size,
            batch_size=batch_size,
            workers=workers,
            channels_last=channels_last,
        )
    return device_loaders(
        store,
        image_size=image_size,
        batch_size=batch_size,
        device=device,
        channels_last=channels_last,
        placement=resolve_placement(placement, store, device),
    )


def device_loaders(
    store,
    *,
    image_size: int,
    batch_size: int,
    device: torch.device,
    channels_last: bool,
    placement: str,
    ring_slots: int = RING_SLOTS,
):
    """The GPU path's ``Loaders`` (:class:`CachedSplit`), ``placement`` resident or streamed.

    Runs on any device: on a CPU it is the GPU path's twin in the tests (same gathers, same
    ring, same batched augmentation), which the trainer itself never takes there.
    """
    home = device if placement == RESIDENT else torch.device("cpu")
    generator = torch.Generator()

    def split(images, labels, train: bool, sizes=None) -> CachedSplit:
        return CachedSplit(
            images=upload(_as_tensor(images), home),  # pinned chunks on a GPU
            labels=_as_tensor(labels).to(home),
            batch_size=batch_size,
            image_size=image_size,
            device=device,
            train=train,
            placement=placement,
            generator=generator if train else None,
            channels_last=channels_last,
            sizes=None if sizes is None else _as_tensor(sizes).to(home),
            ring_slots=ring_slots,
        )

    resident = store_bytes(store) if placement == RESIDENT else 0
    return _store_loaders(store, split, generator, placement, resident)


def _as_tensor(array) -> torch.Tensor:
    """A tensor over the store's read-only memmap, without copying it into memory (batches are
    only ever read from it; torch warns about non-writable arrays, which is moot here)."""

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)

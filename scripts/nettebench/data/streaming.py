"""A host-resident store streamed to the training device, batches gathered ahead of the GPU.

When the decoded store does not fit in device memory (an ImageNet-sized dataset), the ``cached``
loader keeps it in host memory (the memmap) and streams each batch's rows to the device. Doing
that in the training loop's thread costs the loop the gather from the memmap and a synchronous
copy every step. Here:

- :class:`HostRing`: a background thread gathers each batch's rows (uint8 images, labels,
  sizes) in the epoch's order into a small ring of host buffers, pinned when the device is a
  GPU, so the copy to the device can be asynchronous. A slot is refilled only once the copy that
  read it has finished (the thread polls the copy's CUDA event: a poll is no synchronisation).
- :func:`stream_to_device`: the loop's side. It copies each filled slot to the device on a
  copy stream, one batch ahead of the batch it hands out, into one of two device buffers, and
  makes the compute stream wait for that copy (an event, not a host wait).

On a CPU the same logic runs with plain (unpinned) buffers, a plain copy and no events: that is
the CPU twin the tests exercise. Everything here only moves rows; the augmentation happens on the
device afterwards, exactly as for a store resident there.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

RING_SLOTS = 3  # host buffers: one being copied, one filled and waiting, one being gathered
POLL_S = 0.0002  # how often the gathering thread looks whether a slot's copy has finished


class HostRing:
    """Batches of rows of ``arrays`` (host tensors, first dimension indexed by ``order``),
    gathered by a background thread into a ring of ``slots`` host buffers.

    :meth:`get` hands out the next filled slot (blocking until it is filled); the consumer gives
    it back with :meth:`release` once it has copied it (with the copy's CUDA event, or None when
    the copy was synchronous). An error in the thread is raised by :meth:`get`. :meth:`close`
    stops and joins the thread (also after an early stop).
    """

    def __init__(
        self,
        arrays: Sequence[torch.Tensor],
        order: torch.Tensor,
        batch_size: int,
        *,
        slots: int = RING_SLOTS,
        pin: bool = False,
    ) -> None:
        if slots < 2:
            raise ValueError(f"a ring needs at least 2 slots, got {slots}")
        self.arrays, self.order, self.batch_size = list(arrays), order, batch_size
        self.steps = math.ceil(len(order) / batch_size)
        self.slots = [
            [
                torch.empty((batch_size, *array.shape[1:]), dtype=array.dtype, pin_memory=pin)
                for array in self.arrays
            ]
            for _ in range(slots)
        ]
        self.free: queue.SimpleQueue = queue.SimpleQueue()
        self.filled: queue.SimpleQueue = queue.SimpleQueue()
        for slot in range(slots):
            self.free.put((slot, None))
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._fill, name="nettebench-host-ring", daemon=True)
        self.thread.start()

    def _fill(self) -> None:
        try:
            for step in range(self.steps):
                slot, copied = self.free.get()
                if slot is None or self.stopping.is_set():
                    return
                while copied is not None and not copied.query():
                    time.sleep(POLL_S)
                index = self.order[step * self.batch_size : (step + 1) * self.batch_size]
                for source, buffer in zip(self.arrays, self.slots[slot], strict=True):
                    torch.index_select(source, 0, index, out=buffer[: len(index)])
                self.filled.put((slot, len(index)))
        except BaseException as error:  # handed to the consumer, raised there
            self.filled.put((None, error))

    def get(self) -> tuple[int, list[torch.Tensor]]:
        """The next batch: its slot and its rows (views of the slot's buffers)."""
        slot, rows = self.filled.get()
        if slot is None:
            raise rows
        return slot, [buffer[:rows] for buffer in self.slots[slot]]

    def release(self, slot: int, copied: torch.cuda.Event | None) -> None:
        """Give ``slot`` back for refilling once ``copied`` (the copy that read it) is done."""
        self.free.put((slot, copied))

    def close(self) -> None:
        self.stopping.set()
        self.free.put((None, None))
        self.thread.join()


@dataclass
class _Staged:
    buffer: int  # which of the two device buffers holds it
    tensors: list[torch.Tensor]  # on the device
    copied: torch.cuda.Event | None  # the copy's event (None: the copy was synchronous)


class _Stager:
    """Copies ring slots into two alternating device buffers, on a copy stream on CUDA."""

    def __init__(self, arrays: Sequence[torch.Tensor], batch_size: int, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.buffers = [
            [
                torch.empty((batch_size, *array.shape[1:]), dtype=array.dtype, device=device)
                for array in arrays
            ]
            for _ in range(2)
        ]
        self.stream = torch.cuda.Stream(device) if self.cuda else None
        # The compute stream's last use of each buffer, which its next copy waits for. At first
        # that is everything queued on it so far: the buffers come from the caching allocator,
        # whose blocks the compute stream may still be reading or writing for their last owner.
        start = torch.cuda.current_stream(device).record_event() if self.cuda else None
        self.consumed: list[torch.cuda.Event | None] = [start, start]
        self.next = 0

    def stage(self, ring: HostRing) -> _Staged:
        slot, rows = ring.get()
        buffer, self.next = self.next, 1 - self.next
        targets = [tensor[: len(rows[0])] for tensor in self.buffers[buffer]]
        copied = None
        if self.cuda:
            with torch.cuda.stream(self.stream):
                # after the compute stream's last use of the buffer (the batch read from it)
                self.stream.wait_event(self.consumed[buffer])
                for target, source in zip(targets, rows, strict=True):
                    target.copy_(source, non_blocking=True)
                copied = self.stream.record_event()
        else:
            for target, source in zip(targets, rows, strict=True):
                target.copy_(source)
        ring.release(slot, copied)
        return _Staged(buffer, targets, copied)

    def ready(self, staged: _Staged) -> None:
        """Make the compute stream wait for ``staged``'s copy (no host wait)."""
        if staged.copied is not None:
            torch.cuda.current_stream(self.device).wait_event(staged.copied)

    def done(self, staged: _Staged) -> None:
        """The compute stream's work on ``staged`` is queued: its buffer may be refilled after."""
        if self.cuda:
            self.consumed[staged.buffer] = torch.cuda.current_stream(self.device).record_event()

    def close(self) -> None:
        """Before the buffers go back to the allocator: later work on the compute stream waits
        for every copy (one may still be in flight when an epoch stops early)."""
        if self.cuda:
            torch.cuda.current_stream(self.device).wait_stream(self.stream)


def stream_to_device(
    arrays: Sequence[torch.Tensor],
    order: torch.Tensor,
    batch_size: int,
    device: torch.device,
    *,
    slots: int = RING_SLOTS,
) -> Iterator[list[torch.Tensor]]:
    """Each batch of ``order``'s rows of ``arrays`` (host tensors), on ``device``.

    A batch's tensors are device buffers that are refilled two batches later: the caller must
    have queued everything that reads them (and copied what it keeps) before it asks for the
    next batch.
    """
    ring = HostRing(arrays, order, batch_size, slots=slots, pin=device.type == "cuda")
    stager = _Stager(arrays, batch_size, device)
    try:
        ahead = stager.stage(ring) if ring.steps else None
        for step in range(ring.steps):
            current = ahead
            if step + 1 < ring.steps:  # the next batch's copy overlaps this batch's step
                ahead = stager.stage(ring)
            stager.ready(current)
            yield current.tensors
            stager.done(current)
    finally:
        stager.close()
        ring.close()


UPLOAD_CHUNK_BYTES = 64 * 2**20  # one pinned staging buffer of a resident store's upload


def upload(
    array: torch.Tensor, device: torch.device, *, chunk_bytes: int = UPLOAD_CHUNK_BYTES
) -> torch.Tensor:
    """``array`` (a tensor over the store's memmap) copied whole to ``device``, for a store
    resident there. On a GPU through two pinned staging buffers of ``chunk_bytes``: the host
    reads chunk k + 1 from the memmap while the copy engine moves chunk k, each copy
    asynchronous from pinned memory (a pageable ``.to(cuda)`` of 3.5 GB is a staged copy the
    driver does chunk by chunk with the CPU waiting on each). Elsewhere ``array.to(device)``,
    unchanged; :func:`staged_copy` is the same logic, which the tests run on a CPU."""
    if device.type != "cuda" or array.numel() == 0:
        return array.to(device)
    return staged_copy(array, device, chunk_bytes=chunk_bytes, pin=True)


def staged_copy(
    array: torch.Tensor, device: torch.device, *, chunk_bytes: int, pin: bool
) -> torch.Tensor:
    """Rows of ``array`` to ``device`` in chunks of about ``chunk_bytes`` through two staging
    buffers (pinned with ``pin``); a buffer is refilled once the copy that read it is done."""
    rows = max(1, chunk_bytes // max(1, array[0].numel() * array.element_size()))
    target = torch.empty(array.shape, dtype=array.dtype, device=device)
    cuda = device.type == "cuda"
    stages = [
        torch.empty((min(rows, len(array)), *array.shape[1:]), dtype=array.dtype, pin_memory=pin)
        for _ in range(2)
    ]
    done: list[torch.cuda.Event | None] = [None, None]
    for index, start in enumerate(range(0, len(array), rows)):
        slot, stop = index % 2, min(start + rows, len(array))
        if done[slot] is not None:
            done[slot].synchronize()  # the copy that last read this buffer has finished
        stage = stages[slot][: stop - start]
        stage.copy_(array[start:stop])  # the host's part: read from the memmap
        target[start:stop].copy_(stage, non_blocking=cuda)
        if cuda:
            done[slot] = torch.cuda.Event()
            done[slot].record()
    if cuda:
        torch.cuda.current_stream(device).synchronize()  # the store is whole before its use
    return target

"""The batches a profile window steps through: every one of the cell's batch shape."""

import torch
from torch.utils.data import DataLoader, TensorDataset

from nettebench.data.pil import Loaders
from nettebench.profiling.window import endless_batches


def _loaders(images: int, batch_size: int) -> Loaders:
    data = TensorDataset(torch.arange(images).float()[:, None], torch.arange(images))
    generator = torch.Generator()
    train = DataLoader(data, batch_size=batch_size, shuffle=True, generator=generator)
    return Loaders(train, train, 2, ["a", "b"], generator)


def test_the_short_last_batch_of_an_epoch_never_enters_the_window():
    """10 images in batches of 4 leave a batch of 2 each epoch (as 3,000 / 256 leave 184):
    a new shape, which makes cuDNN autotune inside the profiled steps."""
    batches = endless_batches(_loaders(10, 4), seed=0, batch_size=4)
    sizes = [len(next(batches)[1]) for _ in range(7)]  # more than three epochs' worth
    assert sizes == [4] * 7


def test_epochs_are_seeded_as_the_trainer_seeds_them():
    first = [t.tolist() for _, t in _take(endless_batches(_loaders(10, 4), 3, 4), 4)]
    again = [t.tolist() for _, t in _take(endless_batches(_loaders(10, 4), 3, 4), 4)]
    assert first == again and first[:2] != first[2:]


def test_an_epoch_without_a_full_batch_still_yields_its_short_ones():
    batches = endless_batches(_loaders(3, 4), seed=0, batch_size=4)
    assert [len(next(batches)[1]) for _ in range(2)] == [3, 3]


def _take(iterator, count: int):
    return [next(iterator) for _ in range(count)]

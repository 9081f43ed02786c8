"""A decoded store in memory, for the ``cached`` loader's tests: what ``store.open_store``
returns, built with the store's own full-frame code."""

from __future__ import annotations

import numpy as np
from PIL import Image

from nettebench.data import store as st
from nettebench.data import store_build as sb

SIDE = 64  # store side for 56 px crops: round(56 / 0.875)
OUT = 56


class MemoryStore:
    """What ``store.open_store`` returns, in memory: full-frame train slots (landscape and
    portrait images of several aspects) and square val images, uint8 NHWC, with labels."""

    def __init__(self, train: int = 24, val: int = 10, side: int = SIDE, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.upright = []  # the train images as files would hold them (already resized)
        frames, sizes = [], []
        for index in range(train):
            long = side + (index * 7) % (st.frame_width(side) - side + 1)
            shape = (long, side, 3) if index % 3 == 0 else (side, long, 3)
            image = rng.integers(0, 256, shape, dtype=np.uint8)
            self.upright.append(image)
            frame, size = sb.full_frame(Image.fromarray(image), side)
            frames.append(frame)
            sizes.append(size)
        self.train = np.stack(frames)
        self.train_sizes = np.array(sizes, dtype=np.int32)
        self.val = rng.integers(0, 256, (val, side, side, 3), dtype=np.uint8)
        self.train_labels = rng.integers(0, 3, train).astype(np.int64)
        self.val_labels = rng.integers(0, 3, val).astype(np.int64)
        self.classes = ["a", "b", "c"]

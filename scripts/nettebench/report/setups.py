"""Which machine and environment a cell ran on: its *setup*, what tables never average across.

Results from two clusters, or from before and after a PyTorch upgrade, are different
measurements of the same cell; averaging them as if they were seeds gives one number that is
true of neither. A setup is the run's machine label (``machine:`` in the config) together with
what the record says about the hardware and the software that decide speed: the device
(the GPU's model, or the CPU's for a CPU cell), the NVIDIA driver, CUDA, cuDNN, torch and
torch's CPU capability (``environment.cpu_capability``: AVX2, AVX512, ...), and a GPU power
limit set below the card's default (a hardware setting, not the GPU's state). Every table and
figure that averages over seeds groups by setup first; two copies of one cell from a T4 and an
A100 stay two numbers even when nobody labelled them.

A setup's label names the machine label and the fields that differ between the setups present,
so it stays short: ``t4``, ``t4 (Tesla T4, driver 535.104)`` or, unlabelled,
``NVIDIA A100-SXM4-80GB``. pandas only.
"""

from __future__ import annotations

import hashlib
import json

import pandas as pd

from nettebench.report import format as T

# runs.csv columns that make up a setup, in the order a label names them.
SETUP_COLUMNS = ("machine", "device_name", "env_driver", "env_cuda", "env_cudnn", "env_torch")
# then the CPU's capability and a GPU power limit set below its default (report.caveats)
SETUP_COLUMNS += ("env_cpu_capability", "gpu_power_limit_lowered_w")
# The hardware part: what a library-version table keeps fixed while its columns vary software.
HARDWARE_COLUMNS = ("machine", "device_name", "env_cpu_capability", "gpu_power_limit_lowered_w")
_NAMES = {"env_driver": "driver", "env_cuda": "CUDA", "env_cudnn": "cuDNN", "env_torch": "torch"}
_NAMES |= {"env_cpu_capability": "CPU", "gpu_power_limit_lowered_w": "power limit (W)"}
# What a missing value means, where not "unknown": a power limit not lowered is the default.
_MISSING = {"gpu_power_limit_lowered_w": "default"}
UNLABELLED = "this machine"  # the label of the only setup when nothing tells setups apart


def _value(value) -> str | None:
    return None if T.is_missing(value) else T.fmt_value(value)


def setup_key(row: pd.Series) -> tuple:
    """The values of a row's setup columns (missing ones as None)."""
    return tuple(_value(row.get(c)) for c in SETUP_COLUMNS)


def setup_ids(frame: pd.DataFrame) -> pd.Series:
    """A short hash of each row's setup (equal setups, equal ids; across runs.csv files too)."""
    return pd.Series(
        [
            hashlib.sha256(json.dumps(setup_key(row)).encode()).hexdigest()[:10]
            for _, row in frame.iterrows()
        ],
        index=frame.index,
        dtype=object,
    )


def varying(frame: pd.DataFrame, columns=SETUP_COLUMNS) -> list[str]:
    """The setup columns that take more than one value in ``frame`` (missing is a value)."""
    present = [c for c in columns if c in frame.columns]
    return [c for c in present if frame[c].map(_value).nunique(dropna=False) > 1]


def describe(
    row: pd.Series, fields: list[str], *, device: bool = True, machine: bool = True
) -> str:
    """``t4 (Tesla T4, driver 535.104)``: the machine label, then ``fields`` of the row."""
    machine = _value(row.get("machine")) if machine else None
    details = []
    for field in fields:
        if field == "machine" or (field == "device_name" and not device):
            continue
        value = _value(row.get(field))
        text = value if value is not None else _MISSING.get(field, "unknown")
        details.append(text if field == "device_name" else f"{_NAMES[field]} {text}")
    if machine:
        return f"{machine} ({', '.join(details)})" if details else machine
    return ", ".join(details)


def setup_labels(frame: pd.DataFrame) -> pd.Series:
    """Each row's setup label: its machine label and the setup fields that vary in ``frame``;
    with nothing to tell setups apart, the device's name."""
    fields = varying(frame)
    labels = [
        describe(row, fields) or _value(row.get("device_name")) or UNLABELLED
        for _, row in frame.iterrows()
    ]
    return pd.Series(labels, index=frame.index, dtype=object)


def title_suffix(group: pd.DataFrame, among: pd.DataFrame) -> str:
    """What a table title adds for ``group`` (one setup) when ``among`` holds several setups:
    `` · machine t4, driver 535.104`` (the device is in the title already); nothing otherwise."""
    fields = [f for f in varying(among) if f != "device_name"]
    if group.empty or not fields:
        return ""
    row = group.iloc[0]
    machine = _value(row.get("machine"))
    rest = describe(row, fields, device=False, machine=False)
    parts = [part for part in (machine and f"machine {machine}", rest) if part]
    return f" · {', '.join(parts)}" if parts else ""

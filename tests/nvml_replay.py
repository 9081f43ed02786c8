"""A recorded NVML stream played back as the job's GPU, for tests that run on a CPU.

:class:`Replay` answers what :class:`nettebench.records.nvml.Device` answers (a reading, the
energy counter, the compute processes, their SM utilisation, the identity) from lists given in
the test or read from ``tests/fixtures/nvml/*.json`` (:func:`stream`), in call order; the last
value repeats once a list runs out. Everything else (which processes count, the window's
summary, the verdict, the record) is the package's own code.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from nettebench.records.gpu_processes import GpuProcess
from nettebench.records.nvml import Reading

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"


class Replay:
    def __init__(
        self,
        readings: list[Reading] | None = None,
        energy: list[int | None] | None = None,
        processes: list[GpuProcess] | None = None,
        util: dict[int, float] | None = None,
        identity: dict[str, Any] | None = None,
        gate: threading.Event | None = None,
    ) -> None:
        self.readings = list(readings or [Reading(unix=time.time())])
        self.energy = list(energy or [None])
        self.listed = processes
        self.util = util  # None: unreadable (NVML NOT_SUPPORTED); {}: no process ran a kernel
        self.ident = identity or {"name": "NVIDIA H200", "mig": False}
        # a slow process listing (the background probe's case): each waits for the gate, or
        # for 30 s, so a caller that waits for it returns late with the listing filled in
        self.gate = gate
        self.asked_util_since: list[float] = []

    @staticmethod
    def _next(values: list) -> Any:
        return values.pop(0) if len(values) > 1 else values[0]

    def reading(self) -> Reading:
        return self._next(self.readings)

    def energy_mj(self) -> int | None:
        return self._next(self.energy)

    def processes(self) -> list[GpuProcess] | None:
        if self.gate is not None:
            self.gate.wait(timeout=30)
        return self.listed

    def utilisation(self, since_unix: float) -> dict[int, float] | None:
        self.asked_util_since.append(since_unix)
        return None if self.util is None else dict(self.util)

    def identity(self) -> dict[str, Any]:
        return dict(self.ident)


def stream(name: str) -> tuple[list[Reading], list[int | None], dict[str, Any]]:
    """A fixture's readings, energy counter values and identity."""
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    fields = ("unix", "sm_mhz", "mem_mhz", "power_w", "temp_c", "reasons")
    readings = [Reading(**dict(zip(fields, row, strict=True))) for row in data["readings"]]
    return readings, data["energy_mj"], data["identity"]

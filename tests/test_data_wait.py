"""Data wait on a CPU: the host's time inside the loader's ``next()``. (On a GPU it is the GPU
time between CUDA events around ``next()``, which only a GPU can show: tests/device.)"""

import time

import pytest
import torch

from nettebench.training.data_wait import DataWait


def test_on_a_cpu_the_wait_is_the_hosts_time_inside_next_and_nothing_else(monkeypatch):
    """The host's clock is the test's own: 20 ms inside each of three ``next()`` calls, 30 ms
    of step after each (a real sleep would make the sum depend on the machine's load)."""
    now = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    wait = DataWait(torch.device("cpu"))
    assert not wait.cuda
    for _ in range(3):
        wait.start()
        now[0] += 0.02  # the loader
        wait.stop()
        now[0] += 0.03  # the step: not data wait
    assert wait.seconds() == pytest.approx(0.06)


def test_a_cuda_device_is_measured_with_events_not_the_host_clock():
    assert DataWait(torch.device("cuda", 0)).cuda
    assert DataWait(torch.device("cuda", 0)).seconds() == 0.0  # no batch yet, nothing read

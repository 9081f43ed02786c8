"""The start-up phase clock (training/startup.py): phases non-negative, in their spans, and the
phases before the first step summing (with ``other``) to the start-to-first-step time."""

from __future__ import annotations

import pytest

from nettebench.training import startup
from nettebench.training.startup import AFTER, BEFORE, DURING, PhaseClock


def test_the_phases_before_the_first_step_sum_to_its_time():
    clock = PhaseClock(100.0)
    clock.mark("imports", 102.5)
    clock.mark("key", 102.6)
    clock.mark("imports", 103.0)  # a second import phase adds to the first
    clock.mark("model", 103.25)
    clock.first_step(103.5)
    clock.add("checkpoints", 0.2)
    clock.last_step(110.0)
    clock.mark("weights", 110.1)
    found = clock.summary()
    before = found[BEFORE]
    assert before == pytest.approx({"imports": 2.9, "key": 0.1, "model": 0.25, "other": 0.25})
    assert sum(before.values()) == pytest.approx(found["to_first_step_s"]) == pytest.approx(3.5)
    assert found[DURING] == {"checkpoints": 0.2}
    assert "first_epoch_autotune_s" not in found  # the summary's first_epoch_overhead_s, once
    assert found[AFTER]["weights"] == pytest.approx(0.1)
    assert sum(found[AFTER].values()) == pytest.approx(found["after_last_step_s"], abs=1e-3)
    assert all(v >= 0 for span in (BEFORE, DURING, AFTER) for v in found[span].values())


def test_a_clock_going_backwards_records_no_negative_phase():
    clock = PhaseClock(100.0)
    clock.mark("imports", 99.0)  # process start read late, say
    clock.first_step(99.5)
    assert clock.summary()[BEFORE] == {"imports": 0.0, "other": 0.5}


def test_without_a_started_clock_every_call_does_nothing(monkeypatch):
    monkeypatch.setattr(startup, "CLOCK", None)
    startup.mark("model")
    startup.first_step()
    startup.add("checkpoints", 1.0)
    assert startup.timed("writing", lambda x: x + 1, 1) == 2
    assert startup.summary() is None


def test_module_calls_mark_the_process_clock(monkeypatch):
    monkeypatch.setattr(startup, "CLOCK", None)
    startup.start(0.0)  # process start long ago: imports is the time until now
    startup.mark("model")
    startup.first_step()
    startup.timed("writing", lambda: None)
    startup.last_step()
    found = startup.summary()
    assert set(found[BEFORE]) == {"imports", "model", "other"}
    assert "writing" in found[DURING] and found["after_last_step_s"] >= 0

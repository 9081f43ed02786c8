"""training.launch in-process: torchrun's command line, and the agent's outcome as the job's.

The agent itself (``elastic_launch``) is replaced by one that ends as the real one would (it
returns, raises ``SignalException`` or ``ChildFailedError``), so what ``launch`` does with each
outcome runs where coverage sees it; the real agent runs in tests/test_distributed.py.
"""

from __future__ import annotations

import signal
import sys
import time

import pytest
from torch.distributed import run as torchrun
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
from torch.distributed.launcher import api as launcher_api

from nettebench.training import launch
from nettebench.vocabulary.cell import CellSpec

COMMAND = ("benchmarks", "cell-job")  # python -m nettebench benchmarks cell-job
MODULE = "nettebench"  # torchrun -m nettebench benchmarks cell-job ...


def cell(**overrides) -> CellSpec:
    values = dict(dataset="dp", model="resnet18", batch_size=8, epochs=1, processes=2)
    return CellSpec(**{**values, **overrides})


def configured(args: list[str]):
    return torchrun.config_from_args(torchrun.parse_args(args))


def test_torchruns_arguments_are_the_documented_standalone_command(monkeypatch):
    """``torchrun --standalone --nproc-per-node N --max-restarts 0 --shutdown-timeout 10 -m
    nettebench benchmarks cell-job ...`` (the module's docstring), with what torchrun's run()
    does for --standalone: the same launch, parsed by torchrun's own parser."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # config_from_args sets it otherwise
    doc = torchrun.parse_args(
        ["--standalone", "--nproc-per-node", "3", "--max-restarts", "0"]
        + ["--shutdown-timeout", "10", "-m", MODULE, *COMMAND, "--x", "1"]
    )
    doc.rdzv_backend, doc.rdzv_endpoint = "c10d", "localhost:0"  # torchrun's run()
    want, want_entry, want_args = torchrun.config_from_args(doc)
    ours = launch.torchrun_args(COMMAND, ["--x", "1"], 3, 6)
    got, entry, args = configured(ours)
    for name in (
        "min_nodes", "max_nodes", "nproc_per_node", "rdzv_backend", "rdzv_endpoint",
        "max_restarts", "shutdown_timeout",
    ):  # fmt: skip
        assert getattr(got, name) == getattr(want, name), name
    assert (entry, args) == (want_entry, want_args)
    assert got.monitor_interval == launch.MONITOR_INTERVAL_S  # ours: the agent polls less
    # a rendezvous id of its own each time, as --standalone makes one
    again, _, _ = configured(launch.torchrun_args(COMMAND, ["--x", "1"], 3, 6))
    assert got.run_id != again.run_id and len(got.run_id) == len(again.run_id) == 36


def test_an_option_the_installed_torchrun_lacks_is_left_out():
    """torch 2.11's torchrun has no ``--shutdown-timeout`` (its parser refused the whole launch,
    seen in the device twin): against a parser without it the option goes, the rest stays; an
    unknown option that torchrun never had stays, for torchrun's own parse to refuse."""
    import argparse

    older = argparse.ArgumentParser()  # torchrun's parser as 2.11's, less the options unused here
    older.add_argument("--nnodes")
    older.add_argument("-m", "--module", action="store_true")
    older.add_argument("training_script")
    older.add_argument("training_script_args", nargs=argparse.REMAINDER)
    args = ["--nnodes=1", "--shutdown-timeout=10", "--no-such-option=1", "-m", MODULE, "--x"]
    assert launch.known_to(older, args) == ["--nnodes=1", "--no-such-option=1", "-m", MODULE, "--x"]
    installed = torchrun.get_args_parser()  # whichever torch is installed parses what is left
    ours = launch.known_to(installed, launch.torchrun_args(COMMAND, ["--x", "1"], 2, None))
    assert installed.parse_args(ours).nproc_per_node == "2"


def test_the_agent_notices_a_dead_process_within_half_a_second(monkeypatch):
    """The module says a process that dies ends the others at once: the agent, as
    torchrun's parser configures it from our command line, looks at its processes at least
    every half second (polling less often than torchrun's default, but not by seconds)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    got, _, _ = configured(launch.torchrun_args(COMMAND, [], 2, 2))
    assert 0 < got.monitor_interval <= 0.5


def test_without_threads_the_cpus_it_may_use_are_shared(monkeypatch):
    # this process's CPUs (pid 0), not another's
    cpus = {0: set(range(8))}
    monkeypatch.setattr(launch.os, "sched_getaffinity", lambda pid: cpus.get(pid, {0}))
    assert launch.process_threads(None, 2) == 4 and launch.process_threads(None, 16) == 1
    assert launch.process_threads(3, 2) == 1 and launch.process_threads(12, 4) == 3


class Agent:
    """torchrun's elastic agent, ending as ``outcome`` says."""

    def __init__(self, outcome=None):
        self.outcome = outcome
        self.launched = []

    def __call__(self, config, entrypoint):
        def run(*args):
            self.launched.append((config, entrypoint, args))
            if self.outcome is not None:
                raise self.outcome

        return run


@pytest.fixture
def agent(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")

    def with_outcome(outcome=None):
        found = Agent(outcome)
        monkeypatch.setattr(launcher_api, "elastic_launch", found)
        return found

    return with_outcome


def test_a_finished_launch_is_the_jobs_success(agent, tmp_path, capsys):
    """Each process runs the job's own command, the package's one form: ``python -m nettebench
    benchmarks cell-job <the job's options>`` (torchrun's ``-m`` takes the module, ``nettebench``;
    the command's words and options are the script's arguments)."""
    started = agent()
    assert launch.launch(COMMAND, ["--x", "1"], cell(), 4, tmp_path) == 0
    ((config, entrypoint, args),) = started.launched
    assert config.nproc_per_node == 2 and config.max_restarts == 0
    assert entrypoint == sys.executable
    assert list(args[args.index("-m") :]) == ["-m", "nettebench", *COMMAND, "--x", "1"]
    err = capsys.readouterr().err
    assert err.startswith("data-parallel: torchrun ") and "--nproc-per-node=2" in err


def test_a_signal_to_the_job_is_an_interruption(agent, tmp_path, capsys):
    agent(SignalException("stop", signal.SIGTERM))
    assert launch.launch(COMMAND, [], cell(), 4, tmp_path) == 128 + 15
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == (
        f"interrupted by SIGTERM: {cell().path()} stopped in all 2 processes; no checkpoint yet; "
        "run it again to resume"
    )


def test_an_interruption_names_the_checkpoint_it_kept(tmp_path, capsys):
    (tmp_path / "checkpoint.pt").write_bytes(b"x")
    assert launch._interrupted(cell(processes=3), tmp_path, signal.SIGINT) == 130
    err = capsys.readouterr().err
    assert f"kept the checkpoint on disk ({tmp_path / 'checkpoint.pt'})" in err
    assert "all 3 processes" in err and "SIGINT" in err


def failed(codes: dict[int, int]) -> ChildFailedError:
    failures = {rank: ProcessFailure(rank, 1000 + rank, code, "") for rank, code in codes.items()}
    return ChildFailedError(MODULE, failures)


def test_a_process_killed_by_a_signal_is_named_with_it(agent, tmp_path, capsys):
    agent(failed({1: -signal.SIGKILL}))
    assert launch.launch(COMMAND, [], cell(), 4, tmp_path) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        f"error: {cell().path()}: process 1 of 2 (pid 1001) was killed by SIGKILL; the others "
        "were stopped; its own messages are above"
    )


def test_a_failure_says_the_checkpoint_is_kept_for_a_rerun(tmp_path, capsys):
    (tmp_path / "checkpoint.pt").write_bytes(b"x")
    assert launch._failed(cell(), tmp_path, failed({0: 2}), time.time()) == 1
    err = capsys.readouterr().err
    assert "exited with status 2" in err
    assert f"the checkpoint kept ({tmp_path / 'checkpoint.pt'}) for a rerun" in err


def test_processes_stopped_by_ctrl_c_and_the_agents_term_were_interrupted_by_ctrl_c(
    tmp_path, capsys
):
    """A Ctrl-C reaches the processes (130); those the agent then stops exit 143: the user's
    SIGINT is the cause, so the job ends as a SIGINT would."""
    assert launch._failed(cell(), tmp_path, failed({0: 143, 1: 130}), time.time()) == 130
    assert "interrupted by SIGINT" in capsys.readouterr().err
    assert launch._failed(cell(), tmp_path, failed({0: 143, 1: 143}), time.time()) == 143


def test_an_out_of_memory_a_process_recorded_is_named_as_its(tmp_path, capsys):
    (tmp_path / "metrics.json").write_text('{"status": "oom"}')
    assert launch._failed(cell(), tmp_path, failed({0: 143, 1: 75}), time.time() - 60) == 0
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == f"oom: {cell().path()} (recorded by the process it happened in)"


def test_a_stop_beside_a_crash_is_a_failure(tmp_path, capsys):
    assert launch._failed(cell(), tmp_path, failed({0: 130, 1: 1}), time.time()) == 1


def test_a_metrics_json_written_as_the_launch_started_is_its_own(tmp_path):
    import os

    path = tmp_path / "metrics.json"
    path.write_text('{"status": "oom"}')
    os.utime(path, (1000.0, 1000.0))
    assert launch._recorded_outcome(tmp_path, 1000.0) == "oom"  # same second: this launch's
    assert launch._recorded_outcome(tmp_path, 1000.5) is None  # before it: an earlier run's


def test_no_metrics_json_is_no_recorded_outcome(tmp_path):
    assert launch._recorded_outcome(tmp_path, time.time() - 60) is None
    (tmp_path / "metrics.json").write_text('{"status": "oom"}')
    assert launch._recorded_outcome(tmp_path, time.time() - 60) == "oom"

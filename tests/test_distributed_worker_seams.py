"""training.distributed in-process: the seams a data-parallel worker crosses, with a peer.

The real workers run under torchrun in child processes, where coverage (and a mutation run's
per-line test choice) cannot see them. Here this process plays rank 0 of two: torchrun's
environment is set, and ``torch.distributed.all_reduce`` is replaced by a peer that adds (or
takes the larger of) the values the other process would contribute, in the order its
collectives run. What each hook should give is worked out by hand from both processes' values.
"""

from __future__ import annotations

import copy
import time
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

from nettebench.data.pil import Loaders
from nettebench.training import distributed
from nettebench.training.interrupts import Interrupted
from nettebench.training.loop import TrainEpoch, ValResult
from nettebench.vocabulary.cell import CellSpec


class Peer:
    """The other process of a two-process cell: ``sends`` its values, one list per collective."""

    def __init__(self, *sends):
        self.sends = list(sends)
        self.ops = []
        self.groups = []

    def all_reduce(self, tensor, op=None, group=None):
        other = torch.tensor(self.sends.pop(0), dtype=tensor.dtype)
        self.ops.append(op)
        self.groups.append(group)
        if op == dist.ReduceOp.MAX:
            tensor.copy_(torch.maximum(tensor, other))
        else:
            assert op == dist.ReduceOp.SUM, op
            tensor.add_(other)


@pytest.fixture
def worker(monkeypatch):
    """This process as rank ``RANK`` of two torchrun workers, its process group started."""
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(dist, "is_initialized", lambda: True)

    def with_peer(*sends):
        peer = Peer(*sends)
        monkeypatch.setattr(dist, "all_reduce", peer.all_reduce)
        return peer

    return with_peer


def here() -> distributed.DataParallel:
    """This process's part as torchrun's environment (set by the test) says."""
    return distributed.DataParallel.from_env()


def combine_val(val, split):
    """``val`` (this process's validation of its share) over both processes."""
    return here().validate(SimpleNamespace(model=None), lambda _: val, split)


def alone(monkeypatch):
    for name in ("LOCAL_RANK", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)


def test_active_needs_several_processes_and_a_started_group(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    assert not distributed.active()  # torchrun's worker before join()
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    assert distributed.active()
    monkeypatch.setenv("WORLD_SIZE", "1")  # one worker of one: nothing to combine
    assert not distributed.active()


def test_rank_and_the_agent_as_the_jobs_root(monkeypatch):
    import os

    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert distributed.rank() == 1 and not here().writer
    assert here().job_pid == os.getppid()
    alone(monkeypatch)
    monkeypatch.setenv("RANK", "1")  # not a torchrun worker: RANK alone means nothing
    assert distributed.rank() == 0 and here().writer
    assert here().job_pid is None


def test_the_collectives_timeout_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(distributed.TIMEOUT_ENV, raising=False)
    assert distributed.timeout_s() == 600  # ten minutes: the module's stated default
    monkeypatch.setenv(distributed.TIMEOUT_ENV, "2.5")
    assert distributed.timeout_s() == 2.5


def test_a_training_epoch_is_the_whole_cells(worker):
    """img/s and images summed, loss and data wait averaged, the slowest process's time; each
    steady step's images summed and its time the slower process's."""
    mine = TrainEpoch(
        loss=2.0, seconds=3.0, data_wait_s=0.5, images=64, img_s=100.0, steps_run=2,
        extrapolated=False, step_s=[0.1, 0.4], step_images=[32, 32],
    )  # fmt: skip
    peer = worker(
        [4.0, 1.5, 64, 120.0],  # loss, data wait, images, img/s: summed
        [5.0, 1.0],  # seconds, extrapolated: the larger
        [2, -2],  # step counts: the same on both
        [32, 32],  # step images: summed
        [0.3, 0.2],  # step times: the larger
    )
    got = here().combine_train(mine)
    assert got.loss == 3.0 and got.data_wait_s == 1.0
    assert got.images == 128 and isinstance(got.images, int) and got.img_s == 220.0
    assert got.seconds == 5.0 and got.extrapolated is True
    assert got.step_s == pytest.approx([0.3, 0.4]) and got.step_images == [64, 64]
    assert peer.sends == []  # every collective the peer expected ran
    assert peer.ops == [dist.ReduceOp.SUM, dist.ReduceOp.MAX] + [dist.ReduceOp.MAX] + [
        dist.ReduceOp.SUM,
        dist.ReduceOp.MAX,
    ]


def test_steps_of_unequal_counts_are_scaled_to_the_cells_images(worker):
    """The peer ran 3 steady steps to this process's 2 (96 images to 64): no step pairs with
    another, so each of this process's steps counts its images times 160 / 64."""
    mine = TrainEpoch(
        loss=1.0, seconds=1.0, data_wait_s=0.0, images=64, img_s=10.0, steps_run=2,
        extrapolated=False, step_s=[0.1, 0.2], step_images=[32, 32],
    )  # fmt: skip
    worker([1.0, 0.0, 96, 10.0], [1.0, 0.0], [3, -3])
    got = here().combine_train(mine)
    assert got.step_s == [0.1, 0.2] and got.step_images == [80.0, 80.0]


def test_no_steady_steps_on_either_process(worker):
    mine = TrainEpoch(
        loss=1.0, seconds=1.0, data_wait_s=0.0, images=0, img_s=0.0, steps_run=1,
        extrapolated=False,
    )  # fmt: skip
    worker([1.0, 0.0, 0, 0.0], [1.0, 0.0], [0, 0])
    got = here().combine_train(mine)
    assert got.step_s == [] and got.step_images == []


def test_validation_counts_every_image_once(worker):
    """60 images here (loss 1, top-1 0.5, top-5 0.9), 40 on the peer (2, 0.25, 0.8): the
    cell's numbers are over the 100 images."""
    val = ValResult(loss=1.0, top1=0.5, top5=0.9, seconds=2.0, extrapolated=False)
    worker([80.0, 10.0, 32.0, 40], [3.0, 1.0])
    got = combine_val(val, SimpleNamespace(samples=60))
    assert got.loss == pytest.approx(1.4) and got.top1 == pytest.approx(0.4)
    assert got.top5 == pytest.approx(0.86)
    assert got.seconds == 3.0 and got.extrapolated is True


def test_validation_of_no_images_is_zero_not_a_division_by_zero(worker):
    val = ValResult(loss=0.0, top1=0.0, top5=0.0, seconds=0.5, extrapolated=False)
    worker([0.0, 0.0, 0.0, 0], [0.5, 0.0])
    got = combine_val(val, SimpleNamespace(samples=0))
    assert (got.loss, got.top1, got.top5) == (0.0, 0.0, 0.0)


def test_a_single_process_keeps_its_own_numbers(monkeypatch):
    alone(monkeypatch)
    val = ValResult(loss=1.0, top1=0.5, top5=0.9, seconds=2.0, extrapolated=False)
    assert combine_val(val, SimpleNamespace(samples=60)) is val
    train = TrainEpoch(
        loss=1.0, seconds=1.0, data_wait_s=0.0, images=8, img_s=8.0, steps_run=1,
        extrapolated=False, step_s=[1.0], step_images=[8],
    )  # fmt: skip
    assert here().combine_train(train) is train
    assert here().any(True) is True and here().any(False) is False


def test_a_flag_on_any_process_holds_on_every_one(worker):
    worker([1.0])
    assert here().any(False) is True
    worker([0.0])
    assert here().any(False) is False
    worker([0.0])
    assert here().any(True) is True


class Stop:
    def __init__(self, requested=None):
        self.requested = requested
        self.installed = "yes"


def test_a_signal_to_the_peer_stops_this_process_before_the_same_step(worker):
    stop = Stop()
    agreed = here().agreed(stop)
    assert agreed is not stop and agreed.installed == "yes"  # the rest is the stop's own
    worker([0.0])
    agreed.check()  # nobody was signalled: the step runs
    assert agreed.requested is None
    worker([15.0])
    with pytest.raises(Interrupted) as raised:
        agreed.check()
    assert raised.value.signum == 15 and agreed.requested == 15


def test_a_signal_here_stops_the_peer_too(worker):
    agreed = here().agreed(Stop(requested=2))
    assert agreed.requested == 2  # before any collective
    peer = worker([0.0])
    with pytest.raises(Interrupted) as raised:
        agreed.check()
    assert raised.value.signum == 2 and peer.ops == [dist.ReduceOp.MAX]


def test_without_a_stop_or_a_peer_the_stop_is_itself(worker, monkeypatch):
    assert here().agreed(None) is None
    alone(monkeypatch)
    stop = Stop()
    assert here().agreed(stop) is stop


def test_the_barrier_waits_only_in_a_group(worker, monkeypatch):
    waited = []
    monkeypatch.setattr(dist, "barrier", lambda group=None: waited.append(group))
    distributed.barrier()
    assert waited == [distributed._control_group[0]]
    alone(monkeypatch)
    distributed.barrier()
    assert len(waited) == 1


def test_leaving_ends_the_group_and_forgets_the_control_group(worker, monkeypatch):
    ended = []
    monkeypatch.setattr(dist, "destroy_process_group", lambda: ended.append(True))
    monkeypatch.setattr(distributed, "_control_group", ["gloo group"])
    distributed.leave()
    assert ended == [True] and distributed._control_group[0] is None
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    distributed.leave()
    assert ended == [True]


def test_after_an_ok_outcome_a_worker_leaves_and_a_lone_oom_does_not_exit(worker, monkeypatch):
    left = []
    monkeypatch.setattr(distributed, "leave", lambda: left.append(True))
    ok = SimpleNamespace(status="ok", message=None)
    assert here().settle({}, ok, 0.0, lambda: {"status": "ok"}) == {"status": "ok"}
    assert left == [True]
    alone(monkeypatch)
    oom = SimpleNamespace(status="oom", message="out of memory")
    here().settle({}, oom, 0.0, lambda: {"status": "oom"})  # one process: nobody waits for it
    assert left == [True, True]
    assert here().runs_after_epochs("oom")


def test_a_silent_process_records_its_status_and_wall_time():
    """Rank 1 of two writes nothing after an interrupted run: its record says so, for its log."""
    started = time.time() - 5
    record = {"status": "ok", "message": None, "summary": {}}
    stopped = SimpleNamespace(status="interrupted", message="stopped by SIGTERM")
    got = distributed.DataParallel(rank=1, world=2).settle(
        record, stopped, started, lambda: pytest.fail("rank 1 wrote the outcome")
    )
    assert got is record and record["status"] == "interrupted"
    assert record["message"] == "stopped by SIGTERM"
    assert 5 <= record["summary"]["wall_s"] < 60


def cell(**overrides) -> CellSpec:
    values = dict(dataset="dp", model="resnet18", batch_size=8, epochs=1, processes=2)
    return CellSpec(**{**values, **overrides})


def test_join_starts_gloo_on_a_cpu_with_the_timeout(worker, monkeypatch):
    started = []
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed, "_stop_with_the_job", lambda: started.append("deathsig"))
    monkeypatch.setattr(
        dist, "init_process_group", lambda backend, **kw: started.append((backend, kw))
    )
    monkeypatch.setenv(distributed.TIMEOUT_ENV, "7")
    monkeypatch.setattr(distributed, "_control_group", ["stale"])
    here().start(cell(), torch.device("cpu"), None)
    import datetime

    assert started == ["deathsig", ("gloo", {"timeout": datetime.timedelta(seconds=7)})]
    assert distributed._control_group[0] is None


def test_join_on_gpus_adds_a_gloo_group_for_the_control_collectives(worker, monkeypatch):
    started = []
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed, "_stop_with_the_job", lambda: None)
    monkeypatch.setattr(
        dist, "init_process_group", lambda backend, **kw: started.append((backend, kw))
    )
    monkeypatch.setattr(dist, "new_group", lambda **kw: ("group", kw))
    monkeypatch.setattr(distributed, "_control_group", [None])
    gpu = torch.device("cuda:0")
    here().start(cell(), gpu, None)
    assert [b for b, _ in started] == ["nccl"] and started[0][1]["device_id"] == gpu
    assert distributed._control_group[0][1]["backend"] == "gloo"


def test_join_in_a_started_group_or_a_lone_cell_does_nothing(worker, monkeypatch):
    monkeypatch.setattr(
        dist, "init_process_group", lambda *a, **kw: pytest.fail("started a second group")
    )
    monkeypatch.setattr(distributed, "_stop_with_the_job", lambda: pytest.fail("prctl"))
    here().start(cell(), torch.device("cpu"), None)  # is_initialized: already joined
    alone(monkeypatch)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    here().start(cell(processes=1), torch.device("cpu"), None)


def test_a_one_process_cell_among_two_workers_is_refused(worker):
    with pytest.raises(distributed.DistributedError) as refused:
        here().start(cell(processes=1), torch.device("cpu"), None)
    assert str(refused.value) == (
        "the cell has processes 1 but 2 were started: run its job (python -m nettebench "
        "benchmarks cell-job), which starts them, or torchrun with --nproc-per-node x "
        "--nnodes = 1"
    )


def test_alone_a_reduction_is_the_values_themselves(monkeypatch):
    alone(monkeypatch)
    monkeypatch.setattr(dist, "all_reduce", lambda *a, **kw: pytest.fail("a collective"))
    assert distributed._reduce([1.0, 2.0]) == [1.0, 2.0]


class Libc:
    def __init__(self):
        self.calls = []

    def prctl(self, *args):
        self.calls.append(args)


def test_a_worker_asks_for_a_sigterm_when_its_agent_dies(monkeypatch):
    import signal

    libc = Libc()
    killed = []
    monkeypatch.setattr(distributed.ctypes, "CDLL", lambda *a, **kw: libc)
    monkeypatch.setattr(distributed.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    monkeypatch.setattr(distributed.os, "getppid", lambda: 4242)
    distributed._stop_with_the_job()
    assert libc.calls == [(1, signal.SIGTERM)] and killed == []  # prctl(2)'s PR_SET_PDEATHSIG
    monkeypatch.setattr(distributed.os, "getppid", lambda: 1)  # the agent already died
    distributed._stop_with_the_job()
    import os

    assert killed == [(os.getpid(), signal.SIGTERM)]


def test_without_prctl_a_worker_relies_on_the_agent(monkeypatch):
    def no_libc(*args, **kwargs):
        raise OSError("no libc")

    killed = []
    monkeypatch.setattr(distributed.ctypes, "CDLL", no_libc)
    monkeypatch.setattr(distributed.os, "getppid", lambda: 1)
    monkeypatch.setattr(distributed.os, "kill", lambda pid, sig: killed.append(sig))
    distributed._stop_with_the_job()
    assert killed == []


def test_a_worker_takes_the_gpu_of_its_local_rank(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    chosen = []
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setattr(
        distributed.torch,
        "empty",
        lambda size, device: SimpleNamespace(device=torch.device(device)),
    )
    got = here().device(torch.device("cuda"))
    assert got == torch.device("cuda:1") and chosen == [1]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(distributed.DistributedError) as refused:
        here().device(torch.device("cuda"))
    assert str(refused.value) == (
        "process 1 of the cell needs a GPU of its own, but torch sees 1; ask for as many GPUs "
        "as processes"
    )
    cpu = torch.device("cpu")
    assert here().device(cpu) is cpu
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert here().device(torch.device("cuda")) == torch.device("cuda")


def loaders() -> Loaders:
    train = TensorDataset(torch.arange(16.0).view(16, 1), torch.zeros(16, dtype=torch.long))
    val = TensorDataset(torch.arange(10.0).view(10, 1), torch.zeros(10, dtype=torch.long))
    generator = torch.Generator().manual_seed(0)
    return Loaders(
        train=DataLoader(train, batch_size=8, shuffle=True, drop_last=True, generator=generator),
        val=DataLoader(val, batch_size=8),
        num_classes=1,
        classes=["a"],
        generator=generator,
    )


def test_each_worker_validates_its_share_and_counts_it(worker, monkeypatch):
    seen, counts = [], []
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setattr(dist, "is_initialized", lambda: True)
        mine, _ = here().shard(loaders(), 8)
        monkeypatch.setattr(dist, "is_initialized", lambda: False)  # for the DataLoader
        batches = list(mine.val)
        assert all(len(targets) <= 4 for _, targets in batches)  # the per-process batch
        assert all(len(images) == 4 for images, _ in mine.train)
        seen += [int(v) for images, _ in batches for v in images.flatten()]
        counts.append(mine.val.samples)
        assert len(mine.val) == len(batches) and mine.val.dataset is mine.val.loader.dataset
    assert sorted(seen) == list(range(10)) and sum(counts) == 10


def test_a_counted_split_copies_without_recursing(worker):
    counted = here().shard(loaders(), 8)[0].val
    copied = copy.copy(counted)
    assert copied.loader is counted.loader and copied.batch_size == 4


def test_a_single_process_keeps_its_loaders(monkeypatch):
    alone(monkeypatch)
    mine = loaders()
    assert here().shard(mine, 8) == (mine, 8)


class Runner:
    def __init__(self, model):
        self.model = model
        self.device = torch.device("cpu")
        self.steps = 0


class WithAux(torch.nn.Module):
    aux_logits = True

    def __init__(self):
        super().__init__()
        self.main = torch.nn.Linear(2, 2)
        self.aux = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.main(x)


@pytest.fixture
def group(tmp_path):
    """A real gloo group of one process, so DDP can be built here."""
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    yield
    dist.destroy_process_group()


def test_ddp_keeps_the_models_keys_and_validates_on_the_plain_module(group, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    plain = torch.nn.Linear(3, 2)
    runner = here().wrap(Runner(plain))
    assert isinstance(runner.model, torch.nn.parallel.DistributedDataParallel)
    assert runner.model.find_unused_parameters is False
    assert list(runner.model.state_dict()) == ["weight", "bias"]
    zeros = {k: torch.zeros_like(v) for k, v in plain.state_dict().items()}
    runner.model.load_state_dict(zeros)
    assert float(plain.weight.detach().abs().sum()) == 0.0
    local = distributed.local_model(runner)
    assert local.model is plain and local.steps == 0 and local.device == runner.device
    aux = here().wrap(Runner(WithAux()))
    assert aux.model.find_unused_parameters is True
    alone(monkeypatch)
    lone = Runner(plain)
    assert here().wrap(lone).model is plain and distributed.local_model(lone) is lone


def test_each_process_gets_a_whole_share_of_the_threads_and_the_batch(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert here().threads_share(1) == 1  # at least one each
    assert here().threads_share(5) == 2 and isinstance(here().threads_share(5), int)
    with pytest.raises(distributed.DistributedError) as refused:
        here().local_batch(33)
    assert str(refused.value) == (
        "batch_size 33 does not split over 2 processes: it is the global batch, use a multiple "
        "of processes"
    )


def test_a_worker_without_rank_is_rank_zero(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("RANK", raising=False)
    assert distributed.rank() == 0


def test_ddp_on_a_gpu_is_given_the_workers_own_gpu(worker, monkeypatch):
    built = []
    monkeypatch.setattr(distributed, "_PlainKeys", lambda model, **kw: built.append(kw) or model)
    gpu = Runner(torch.nn.Linear(2, 2))
    gpu.device = torch.device("cuda:1")
    here().wrap(gpu)
    here().wrap(Runner(torch.nn.Linear(2, 2)))
    assert [kw["device_ids"] for kw in built] == [[1], None]


def test_a_counted_split_counts_each_pass_afresh(worker, monkeypatch):
    counted = here().shard(loaders(), 8)[0].val
    monkeypatch.setattr(dist, "is_initialized", lambda: False)  # for the DataLoader
    assert counted.samples == 0  # before any pass
    once = sum(len(targets) for _, targets in counted)
    assert counted.samples == once == 5  # this rank's half of the 10 images
    list(counted)  # a second epoch's validation
    assert counted.samples == once

"""Timing conditions (nettebench.records.conditions): what else the machine did in a window.

The arithmetic on synthetic /proc snapshots, then the real thing: a busy process outside the
job's tree is seen as other processes' CPU time, the job's own busy threads and child processes
are not. The GPU branch runs on the CPU through a Probe given a recorded NVML stream
(``tests/nvml_replay.py``: no GPU is needed to test which processes count).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from nvml_replay import Replay

from nettebench.records import conditions as C

PROC_STAT = """cpu  100 0 50 1000 10 0 5 0 0 0
cpu0 60 0 30 500 5 0 3 7 0 0
cpu1 40 0 20 500 5 0 2 0 0 0
intr 12345
"""


def _stat(pid: int, ppid: int, utime: int, stime: int = 0, cutime: int = 0) -> str:
    # proc(5): pid (comm) state ppid ... field 14 utime, 15 stime, 16 cutime, 17 cstime
    fields = ["S", str(ppid), *["0"] * 9, str(utime), str(stime), str(cutime), "0"]
    return f"{pid} (python -m x) " + " ".join(fields + ["0"] * 30)


def test_proc_stat_per_cpu_busy_steal_and_total():
    cpus = C.parse_proc_stat(PROC_STAT)
    assert set(cpus) == {0, 1}
    assert cpus[0] == C.CpuTimes(busy=60 + 30 + 3, steal=7, total=60 + 30 + 3 + 500 + 5 + 7)
    assert cpus[1].steal == 0


def test_tree_counts_the_job_and_its_descendants_only():
    stats = {
        10: _stat(10, 1, utime=100, stime=20, cutime=5),  # the job (and a reaped child)
        11: _stat(11, 10, utime=30),  # a DataLoader worker
        12: _stat(12, 11, utime=4),  # its child
        20: _stat(20, 1, utime=999),  # someone else
    }
    assert C.tree_ticks(10, stats) == 100 + 20 + 5 + 30 + 4
    assert C.tree_pids(10, stats) == {10, 11, 12}
    assert C.process_ticks("7 (a ) b) S 1 " + " ".join(["0"] * 9 + ["3", "4", "5", "6"])) == 18


def _snap(clock, busy, steal, total, own, unix=None):
    cpus = {
        c: C.CpuTimes(busy=b, steal=s, total=t)
        for c, (b, s, t) in enumerate(zip(busy, steal, total, strict=True))
    }
    return C.Snapshot(clock=clock, cpus=cpus, own_ticks=own, unix=unix)


def test_summary_subtracts_the_jobs_own_time_and_decides():
    # 10 s on 2 CPUs = 2000 ticks; the job used 1000, someone else 600, the hypervisor 100
    start = _snap(0.0, (0, 0), (0, 0), (0, 0), own=0, unix=100.0)
    end = _snap(10.0, (900, 700), (100, 0), (1000, 1000), own=1000, unix=110.0)
    found = C.summarize(start, end, clock_ticks=100)
    assert found["own_cpu_s"] == 10 and found["other_cpu_s"] == 6
    assert found["other_cpu_share"] == pytest.approx(6 / 20)
    assert found["steal_share"] == pytest.approx(100 / 2000)
    assert found["started_at"] == 100.0 and found["ended_at"] == 110.0
    assert found["interference"] is True
    assert "30% of the job's 2 CPUs" in found["interference_reasons"][0]
    assert set(found) == set(C.CONDITION_KEYS)


@pytest.mark.parametrize(
    ("other", "steal", "expected"),
    [
        (0.05 * 2000, 0, False),  # 5 % of the CPUs: below the limit
        (0.15 * 2000, 0, True),
        (0, 0.08 * 4000, True),  # 8 % of both CPUs' time stolen
    ],
)
def test_verdict_thresholds(other, steal, expected):
    start = _snap(0.0, (0, 0), (0, 0), (0, 0), own=0)
    end = _snap(10.0, (1000 + other, 0), (steal, 0), (2000, 2000), own=1000)
    assert C.summarize(start, end, clock_ticks=100)["interference"] is expected


def test_a_short_window_needs_real_time_not_tick_noise_to_be_disturbed():
    # 0.05 s on 2 CPUs: 3 stray ticks are 30 % of it but only 0.03 CPU-s
    start = _snap(0.0, (0, 0), (0, 0), (0, 0), own=0)
    end = _snap(0.05, (8, 0), (0, 0), (10, 10), own=5)
    found = C.summarize(start, end, clock_ticks=100)
    assert found["other_cpu_share"] > C.OTHER_CPU_SHARE_LIMIT
    assert found["interference"] is False


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _busy_process_outside_the_tree() -> int:
    """A busy loop that is not our descendant: started by a shell that exits at once, so it
    is reparented to init (or a subreaper above us)."""
    out = subprocess.run(
        ["sh", "-c", f"{sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        return C.process_ticks(handle.read()) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc")
def test_a_busy_process_beside_the_job_is_interference():
    """Asserted against what the busy loop really got (its own /proc ticks, read inside the
    window), not a fixed figure: on a loaded machine it may get well under a core. The window
    stays open until the loop has used more than the verdict's limit, so the verdict is owed."""
    busy = _busy_process_outside_the_tree()
    try:
        time.sleep(0.2)  # let it start
        probe = C.Probe()
        assert busy not in C.tree_pids(os.getpid(), C.read_process_stats())
        window = probe.start()
        opened, before = time.monotonic(), _cpu_seconds(busy)
        cpus = len(os.sched_getaffinity(0))
        while True:
            time.sleep(0.25)
            used, wall = _cpu_seconds(busy) - before, time.monotonic() - opened
            owed = max(C.OTHER_CPU_MIN_S, C.OTHER_CPU_SHARE_LIMIT * (wall + 0.1) * cpus)
            if used > owed + 0.05 or wall > 20:
                break
        found = probe.stop(window)
    finally:
        os.kill(busy, 9)
    assert used > owed + 0.05, f"the busy loop got only {used:.2f} CPU-s in {wall:.1f} s"
    # Everything the busy loop used inside the window is other processes' time (more may come
    # from elsewhere); 0.05 s: two 10 ms ticks of rounding on each of the two counters.
    assert found["other_cpu_s"] >= used - 0.05
    assert found["interference"] is True
    assert found["own_cpu_s"] < 0.2  # the test slept


def _busy_s() -> float:
    """The busy CPU-seconds so far of the CPUs this process may run on (the probe's CPUs)."""
    cpus = os.sched_getaffinity(0)
    with open("/proc/stat") as stat:
        times = C.parse_proc_stat(stat.read())
    return sum(t.busy for c, t in times.items() if c in cpus) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc")
def test_the_jobs_own_threads_and_children_are_not_interference():
    probe = C.Probe()
    before = _busy_s()
    window = probe.start()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt=time.process_time()\nwhile time.process_time()-t<0.6: pass",
        ]
    )
    _burn(0.6)
    child.wait()  # reaped: its time moves into our cutime
    found = probe.stop(window)
    after = _busy_s()
    assert found["own_cpu_s"] >= 1.0  # 0.6 s here + 0.6 s in the child, less tick rounding
    # Whatever else ran on the machine, our 1.2 CPU-s are not counted as someone else's: the
    # window's own and others' time together are no more than the CPUs' busy time read around
    # it (no clock involved, so a loaded machine cannot blur it); counted twice, our 1.2 CPU-s
    # would pass it by 1.2 CPU-s. 0.05 s: tick rounding.
    busy_total = found["own_cpu_s"] + found["other_cpu_s"]
    assert busy_total <= after - before + 0.05


# ---------------------------------------------------------------------------------- the GPU


def _apps(*rows: tuple[int, str, float]) -> list[C.GpuProcess]:
    """A compute-process listing as NVML gives it (4242 stands for this process)."""
    own = os.getpid()
    return [C.GpuProcess(own if pid == 4242 else pid, uuid, mib) for pid, uuid, mib in rows]


# Our own process and pid 5151 on the job's GPU, at 40 % and 55 % SM.
APPS = _apps((4242, "GPU-aaaa", 1200.0), (5151, "GPU-aaaa", 30000.0))
UTIL = {4242: 40.0, 5151: 55.0}


def _probe(gpu: C.GpuTarget | None, replay: Replay | None, **options) -> C.Probe:
    """A probe reading ``replay`` at its edges only (no sampling thread between them)."""
    return C.Probe(gpu=gpu, device=replay, sample_s=3600, **options)


def test_another_process_on_the_jobs_gpu_is_interference_the_job_itself_is_not():
    """The CPU twin of a GPU job: our own pid is on GPU-aaaa beside pid 5151 at 55 % SM, with
    30000 MiB of the GPU's memory; NVML is asked for the SM samples since the window began."""
    replay = Replay(processes=APPS, util={**UTIL, os.getpid(): 40.0})
    probe = _probe(C.GpuTarget("GPU-aaaa", 0), replay)
    started = probe.start(gpu=True)
    found = probe.stop(started, gpu=True)
    assert found["gpu_other_processes"] == 1
    assert found["gpu_other_util"] == 55.0
    assert found["gpu_other_memory_mib"] == 30000.0
    assert found["gpu_visibility"] == "NVML"
    assert replay.asked_util_since == [started.unix]
    assert found["interference"] is True
    assert "used the GPU (up to 55% SM)" in found["interference_reasons"][-1]


def test_in_the_background_the_process_listing_costs_the_window_nothing_and_is_filled_in():
    """The trainer's probe: start() and stop() return while a slow listing runs; settle()
    fills the same summary the synchronous probe gives. The listings wait for the test's
    gate, so a stop() that waited for them would return only after 30 s, with the listing
    filled in."""
    gate = threading.Event()
    replay = Replay(processes=APPS, util=UTIL, gate=gate)
    probe = _probe(C.GpuTarget("GPU-aaaa", 0), replay, background=True)
    try:
        started = probe.start(gpu=True)
        assert started.gpu_query.is_alive() and started.gpu_others is None  # not waited for
        found = probe.stop(started, gpu=True)
        assert "wall_s" in found and found.get("gpu_other_processes") is None  # nor here
    finally:
        gate.set()  # else the next settle() in this process would wait for the listings
    C.settle()
    assert found["gpu_other_processes"] == 1 and found["gpu_other_util"] == 55.0
    assert found["interference"] is True


def test_hidden_processes_are_said_to_be_hidden():
    """In a container NVML lists no processes at all, not even ours: not visible."""
    probe = _probe(C.GpuTarget("GPU-aaaa", 0), Replay(processes=[]))
    found = probe.stop(probe.start(gpu=True), gpu=True)
    assert found["gpu_other_processes"] == 0
    assert found["gpu_visibility"] == "NVML (processes hidden)"


def test_a_cpu_job_has_no_gpu_state_and_a_gpu_job_without_nvml_says_not_visible():
    cpu = C.Probe()
    found = cpu.stop(cpu.start(gpu=True), gpu=True)
    assert found["gpu_other_processes"] is None and found["gpu_visibility"] is None
    assert found.get("gpu_energy_j") is None
    assert C.gpu_target(type("D", (), {"type": "cpu"})()) is None
    # pynvml is not installed in the test environment: a GPU job sees nothing, and says so
    blind = C.Probe(gpu=C.GpuTarget("GPU-aaaa", 0))
    assert blind.device is None
    found = blind.stop(blind.start(gpu=True), gpu=True)
    assert found["gpu_visibility"] == C.NO_NVML
    assert found["gpu_other_processes"] is None and found.get("gpu_energy_j") is None


# `nvidia-smi -L` on a MIG host (the format of NVIDIA's MIG user guide and driver 535+)
SMI_LIST_MIG = """GPU 0: NVIDIA H200 (UUID: GPU-41255406-c9af-f94b-4ebf-9d57ad1853da)
  MIG 3g.71gb     Device  0: (UUID: MIG-a65afc88-50b5-5ccf-b0a8-f93b3247ae9e)
  MIG 3g.71gb     Device  1: (UUID: MIG-c7384736-a75d-5afc-978f-d2f1294409fd)
GPU 1: NVIDIA H200 (UUID: GPU-e86cb44c-6756-fd30-cd4a-1e6da3caf9b0)
"""
MIG_PARENT = "GPU-41255406-c9af-f94b-4ebf-9d57ad1853da"
MIG_OWN = "MIG-c7384736-a75d-5afc-978f-d2f1294409fd"


def test_a_mig_instance_is_named_as_nvidia_smi_names_it_with_its_parent_gpu():
    """torch reports the instance's UUID without nvidia-smi's MIG- prefix; as GPU-<uuid> (the
    old match) nothing nvidia-smi lists was ever the job's GPU."""
    target = C.resolve_gpu_target("c7384736-a75d-5afc-978f-d2f1294409fd", SMI_LIST_MIG)
    assert target == C.GpuTarget(MIG_OWN, 0, parent_uuid=MIG_PARENT)
    whole = C.resolve_gpu_target("e86cb44c-6756-fd30-cd4a-1e6da3caf9b0", SMI_LIST_MIG)
    assert whole == C.GpuTarget("GPU-e86cb44c-6756-fd30-cd4a-1e6da3caf9b0", 1)
    assert C.resolve_gpu_target("GPU-0000", None) == C.GpuTarget("GPU-0000")


def _listing(rows: list[tuple[int, str]]) -> Replay:
    return Replay(processes=[C.GpuProcess(pid, uuid, 1200.0) for pid, uuid in rows])


def test_under_mig_the_job_is_found_and_other_instances_are_not_judged():
    """A listing that names the parent GPU: the job's own process and one on another instance
    (its own SMs): no interference, said in the visibility."""
    target = C.resolve_gpu_target(MIG_OWN, SMI_LIST_MIG)
    probe = _probe(target, _listing([(os.getpid(), MIG_PARENT), (777001, MIG_PARENT)]))
    found = probe.stop(probe.start(gpu=True), gpu=True)
    # the GPU's verdict only: this window is real, and in the suite the other worker's CPU use
    # or a stolen tick in its few milliseconds may rightly call it disturbed (seen once)
    gpu_reasons = [reason for reason in found["interference_reasons"] if "GPU" in reason]
    assert found["gpu_other_processes"] == 0 and gpu_reasons == [], found["interference_reasons"]
    assert found["gpu_visibility"].startswith("NVML; MIG: 1 process(es)")


def test_under_mig_a_process_on_the_jobs_own_instance_is_interference():
    replay = _listing([(os.getpid(), MIG_OWN), (777002, MIG_OWN)])
    probe = _probe(C.resolve_gpu_target(MIG_OWN, SMI_LIST_MIG), replay)
    found = probe.stop(probe.start(gpu=True), gpu=True)
    assert found["gpu_other_processes"] == 1 and found["interference"] is True


def test_host_pids_gvisor_the_job_alone_on_its_gpu_is_no_interference():
    """gVisor's NVML lists the job under its host PID, which is none of this namespace's: the
    old match counted the job itself as another process and flagged every GPU result."""
    probe = _probe(C.GpuTarget("GPU-aaaa", 0), _listing([(918273, "GPU-aaaa")]))
    found = probe.stop(probe.start(gpu=True), gpu=True)
    assert found["gpu_other_processes"] == 0
    # No GPU reason. The CPU side is this machine's own /proc/stat over the window, where the
    # hypervisor's steal or another test's process can pass its bound (CI at 9ae0d5c: True).
    assert [reason for reason in found["interference_reasons"] if "GPU" in reason] == []
    assert found["gpu_visibility"] == "NVML (host PIDs: the job counted out)"


def test_host_pids_gvisor_a_second_process_is_counted_its_utilisation_unknown():
    replay = _listing([(918273, "GPU-aaaa"), (918300, "GPU-aaaa"), (5, "GPU-bbbb")])
    probe = _probe(C.GpuTarget("GPU-aaaa", 0), replay)
    found = probe.stop(probe.start(gpu=True), gpu=True)
    assert found["gpu_other_processes"] == 1 and found["gpu_other_util"] is None
    assert found["interference"] is True
    assert "utilisation not visible" in found["interference_reasons"][-1]


def test_a_listed_process_this_namespace_shows_is_another_process_not_the_job():
    """The job not listed yet (no CUDA context at that instant) beside a process visible here
    (pid 1): a real other process, not a listing in host PIDs."""
    probe = _probe(C.GpuTarget("GPU-aaaa", 0), _listing([(1, "GPU-aaaa")]))
    found = probe.stop(probe.start(gpu=True), gpu=True)
    assert found["gpu_other_processes"] == 1
    assert found["gpu_visibility"] == "NVML (processes hidden)"


_QUIET = {"cpus": 2, "wall_s": 10.0, "other_cpu_share": 0.0, "other_cpu_s": 0.0}


@pytest.mark.parametrize(
    ("values", "expected", "words"),
    [
        # other processes' share of the job's CPUs: more than 10 %, and at least 0.1 CPU-s
        ({"other_cpu_share": 0.0999, "other_cpu_s": 2.0}, False, None),
        ({"other_cpu_share": 0.10, "other_cpu_s": 2.0}, False, None),  # "more than": not at
        ({"other_cpu_share": 0.1001, "other_cpu_s": 2.0}, True, "10% of the job's 2 CPUs"),
        ({"other_cpu_share": 0.5, "other_cpu_s": 0.0999}, False, None),
        ({"other_cpu_share": 0.5, "other_cpu_s": 0.10}, True, "50% of the job's 2 CPUs"),
        # the hypervisor's steal: more than 5 % of the CPUs' time
        ({"steal_share": 0.0499}, False, None),
        ({"steal_share": 0.05}, False, None),
        ({"steal_share": 0.0501}, True, "the hypervisor stole 5%"),
        # the cgroup's throttling: more than 5 % of the window
        ({"throttled_s": 0.499}, False, None),
        ({"throttled_s": 0.5}, False, None),
        ({"throttled_s": 0.501}, True, "throttled for 0.5 s of 10.0 s"),
        ({"throttled_s": 5.0, "wall_s": 0.0}, False, None),  # no window, no share
        # another process on the job's GPU: above 5 % SM, or its utilisation hidden
        ({"gpu_other_processes": 1, "gpu_other_util": 4.99}, False, None),
        ({"gpu_other_processes": 1, "gpu_other_util": 5.0}, False, None),
        ({"gpu_other_processes": 1, "gpu_other_util": 5.01}, True, "up to 5% SM"),
        ({"gpu_other_processes": 2, "gpu_other_util": None}, True, "not visible"),
        ({"gpu_other_processes": 0, "gpu_other_util": 80.0}, False, None),
    ],
)
def test_every_threshold_from_both_sides(values, expected, words):
    found = C.verdict({**_QUIET, **values})
    assert found["interference"] is expected
    assert len(found["interference_reasons"]) == int(expected)
    if words:
        assert words in found["interference_reasons"][0]


def test_a_window_is_the_difference_of_its_two_snapshots_not_the_end_alone():
    """The counters run since boot: the same window read from a start that is not zero gives
    the same summary (a start of zeros hides a + where a - belongs)."""
    zero = C.summarize(
        _snap(0.0, (0, 0), (0, 0), (0, 0), own=0),
        _snap(10.0, (900, 700), (100, 0), (1000, 1000), own=1000),
        clock_ticks=100,
    )
    start = _snap(50.0, (5000, 7000), (300, 200), (9000, 9000), own=4000)
    end = _snap(60.0, (5900, 7700), (400, 200), (10000, 10000), own=5000)
    found = C.summarize(start, end, clock_ticks=100)
    for key in ("wall_s", "own_cpu_s", "other_cpu_s", "other_cpu_share", "steal_share"):
        assert found[key] == pytest.approx(zero[key]), key
    assert found["interference"] is True


def test_throttling_and_the_gpu_are_read_from_both_snapshots():
    start = _snap(0.0, (0, 0), (0, 0), (100, 100), own=0)
    end = _snap(10.0, (0, 0), (0, 0), (1100, 1100), own=0)
    start.throttled_usec, end.throttled_usec = 2_000_000, 3_000_000
    other = C.GpuProcess(pid=42, gpu_uuid="GPU-1", used_mib=500.0)
    start.gpu_others, end.gpu_others = [], [other]
    end.gpu_other_util, end.gpu_own_visible = {42: 30.0}, True
    found = C.summarize(start, end, clock_ticks=100)
    assert found["throttled_s"] == pytest.approx(1.0)  # 10 % of the window: interference
    assert (found["gpu_other_processes"], found["gpu_other_util"]) == (1, 30.0)
    assert found["gpu_visibility"] == "NVML"
    assert len(found["interference_reasons"]) == 2
    end.gpu_other_util, end.gpu_own_visible = {}, False
    hidden = C.summarize(start, end, clock_ticks=100)
    assert hidden["gpu_other_util"] is None
    assert hidden["gpu_visibility"] == "NVML (processes hidden)"

"""Benchmark: where the test suite's CPU goes, by process kind and by what the CPUs ran.

Runs ``pytest`` (or the arguments after ``--``) under system-wide ``perf record`` sampling and
notes every Python process's command line when it starts (a ``sitecustomize`` put first on
``PYTHONPATH``; the tests pass their environment on to Snakemake and its jobs), then attributes
each sample to its process's kind (Snakemake, a trainer, a cell job, an xdist worker, pip ...)
and to a part: the interpreter, its garbage collector, torch's libraries and the kernels oneDNN
compiles at run time (``perf-<pid>.map``), page faults and the rest of the kernel, OpenBLAS's
threads. Prints one row per kind with its share of the samples and its CPU seconds (samples /
frequency), and the whole suite's parts. Asserts nothing.

Each Python process also notes, when it exits, its own CPU seconds (``getrusage``), the test
file that started it (``PYTEST_CURRENT_TEST``, which pytest sets and the processes inherit) and
whether it imported ``torch._dynamo``: a second table counts the processes of each kind and
what they cost, and a third the processes each test file starts. That needs no ``perf``
(``--no-perf`` runs only it); a process that ends without Python's ``atexit`` (one a test
kills) and every fork (a DataLoader worker) is missing from it, and the table says how many
CPU-s it accounts for against the suite's.

Sampling needs ``perf`` (linux-perf) and permission to sample every CPU (root, or
``kernel.perf_event_paranoid`` <= 0). Python processes started with ``-I`` or ``-S`` (pip's
isolated builds) and forked children (DataLoader and pool workers) note no command line; they
are listed by their process name (``other:<comm>``).

    python tests/bench_suite_cost.py [--frequency 49] [--keep DIR] [--no-perf] [-- pytest args]
    python tests/bench_suite_cost.py --analyse DIR   # a kept recording again
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NOTE_COMMAND_LINE = '''\
"""Written by tests/bench_suite_cost.py: note this process's command line under its pid, and at
its exit its CPU seconds, the test that started it and whether it imported torch._dynamo."""
import atexit
import os


def _note_exit(log_dir=os.environ.get("NETTEBENCH_COST_LOG")):
    import json
    import resource
    import sys

    pid = os.getpid()
    if not os.path.exists(os.path.join(log_dir, str(pid))):
        return  # a fork that exits through Python: its parent's hook, not a process noted
    usage = resource.getrusage(resource.RUSAGE_SELF)
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[0]
    record = {"cpu_s": usage.ru_utime + usage.ru_stime, "test": test,
              "dynamo": "torch._dynamo" in sys.modules}
    try:
        with open(os.path.join(log_dir, f"{pid}.exit"), "w") as sink:
            json.dump(record, sink)
    except OSError:
        pass


try:
    with open("/proc/self/cmdline", "rb") as _source:
        _line = _source.read().replace(b"\\0", b" ").decode(errors="replace")[:400]
    with open(os.path.join(os.environ["NETTEBENCH_COST_LOG"], str(os.getpid())), "w") as _sink:
        _sink.write(_line + "\\n")
    atexit.register(_note_exit)
except (OSError, KeyError):
    pass
'''

# Kernel symbols of page faults and of the memory they map, copy and free.
FAULT_SYMBOLS = re.compile(
    r"fault|clear_page|alloc|folio|pte|tlb|flush|anon|mem_cgroup|lruvec|zap|unmap|mmap|copy_page"
)
GC_SYMBOLS = re.compile(
    r"gc_collect|visit_decref|subtract_refs|move_unreachable|_traverse|visit_reachable|"
    r"deduce_unreachable|update_refs"
)
TORCH_LIBRARIES = re.compile(r"libtorch|libc10|libgomp|libdnnl|_C\.cpython|libcu|libnccl|libnv")
# perf script -F comm,pid,tid,ip,sym,dso: "<comm> <pid>/<tid> <ip> <symbol> (<dso>)", where
# a C++ symbol may hold spaces and parentheses
SAMPLE = re.compile(r"\s*(\S+)\s+(\d+)/(\d+)\s+[0-9a-f]+\s+(.*?)\s*\(([^()]*)\)\s*$")


def process_kind(command_line: str) -> str:
    """A short name for what a Python process ran, from its command line."""
    words = command_line.split()
    if "-m snakemake" in command_line or "bin/snakemake" in command_line:
        return "snakemake"
    command = re.search(r"-m (nettebench(?: [a-z][\w-]*){1,2})", command_line)
    if command:  # python -m nettebench <group> [<command>]
        return command.group(1)
    if "exec(eval(sys.stdin.readline()))" in command_line:
        return "xdist worker (in-process tests)"
    if "torch.distributed.run" in command_line or "torchrun" in command_line:
        return "torchrun"
    if re.search(r"\bpip\b", command_line):
        return "pip"
    if "pytest" in command_line:
        return "pytest"
    return " ".join(word.rsplit("/", 1)[-1] for word in words[:3])[:50]


def sample_part(symbol: str, library: str) -> str:
    """What a sample ran: a part of the interpreter, of torch, of the kernel, or a library."""
    name = library.rsplit("/", 1)[-1]
    if name == "[kernel.kallsyms]":
        return "kernel: faults" if FAULT_SYMBOLS.search(symbol) else "kernel: other"
    if name.startswith(("libpython", "python")):
        return "garbage collector" if GC_SYMBOLS.search(symbol) else "interpreter"
    if name.startswith("perf-") and name.endswith(".map"):
        return "run-time compiled kernels"
    if TORCH_LIBRARIES.match(name):
        return "torch libraries"
    if "openblas" in name:
        return "OpenBLAS"
    if name.startswith(("libc.so", "libm.so", "libstdc++", "ld-linux")):
        return "libc, libstdc++, loader"
    return "other libraries"


def attribute(perf_data: Path, log_dir: Path):
    """Samples per (kind, part), and the processes of each kind."""
    kinds = {
        int(path.name): process_kind(path.read_text().strip())
        for path in log_dir.iterdir()
        if path.name.isdigit()
    }
    script = subprocess.run(
        ["perf", "script", "-i", str(perf_data), "-F", "comm,pid,tid,ip,sym,dso"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    samples: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    processes: dict[str, set[int]] = collections.defaultdict(set)
    for line in script.stdout.splitlines():
        match = SAMPLE.match(line)
        if not match:
            continue
        comm, pid, _tid, symbol, library = match.groups()
        kind = "idle" if comm == "swapper" else kinds.get(int(pid), f"other:{comm}")
        samples[kind][sample_part(symbol, library)] += 1
        processes[kind].add(int(pid))
    return samples, processes


def report(samples, processes, frequency: float, rows: int = 25) -> str:
    total = sum(sum(parts.values()) for parts in samples.values())
    if not total:
        return "no samples (is perf allowed to sample every CPU?)"
    lines = [f"{total} samples at {frequency:g} Hz on every CPU ({total / frequency:.0f} CPU-s)"]
    lines.append(f"{'share':>6} {'CPU-s':>6} {'procs':>5}  kind: its parts")
    ordered = sorted(samples.items(), key=lambda item: -sum(item[1].values()))
    suite = collections.Counter()
    for _kind, parts in ordered:
        suite.update(parts)
    for kind, parts in ordered[:rows]:
        count = sum(parts.values())
        shares = ", ".join(f"{part} {100 * n / count:.0f}%" for part, n in parts.most_common(5))
        lines.append(
            f"{100 * count / total:5.1f}% {count / frequency:6.0f} {len(processes[kind]):5d}  "
            f"{kind}: {shares}"
        )
    lines.append(
        "all: " + ", ".join(f"{part} {100 * n / total:.1f}%" for part, n in suite.most_common())
    )
    return "\n".join(lines)


def read_exits(log_dir: Path) -> list[tuple[str, dict]]:
    """(kind, exit record) of every process that noted its exit (only a process that noted its
    command line does)."""
    return [
        (process_kind((log_dir / path.stem).read_text().strip()), json.loads(path.read_text()))
        for path in log_dir.glob("*.exit")
    ]


def exits_report(exits: list[tuple[str, dict]], busy_cpu_s: float | None, rows: int = 25) -> str:
    """Processes and CPU-s by kind, then by the test file that started them."""
    if not exits:
        return "no process noted its exit"
    by_kind: dict[str, list[dict]] = collections.defaultdict(list)
    by_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for kind, record in exits:
        by_kind[kind].append(record)
        started_by = record["test"] or "(no test: the xdist workers themselves, pytest)"
        by_file[started_by][kind] += record["cpu_s"]
    noted = sum(record["cpu_s"] for _kind, record in exits)
    of = f" of the {busy_cpu_s:.0f} the CPUs were busy for" if busy_cpu_s else ""
    lines = [f"{len(exits)} processes noted their exit: {noted:.0f} CPU-s{of}"]
    lines.append(f"{'CPU-s':>6} {'procs':>5} {'each':>5} {'dynamo':>6}  kind")
    spent_by_kind = {kind: sum(r["cpu_s"] for r in records) for kind, records in by_kind.items()}
    for kind, spent in sorted(spent_by_kind.items(), key=lambda item: -item[1])[:rows]:
        records = by_kind[kind]
        dynamo = sum(record["dynamo"] for record in records)
        lines.append(
            f"{spent:6.1f} {len(records):5d} {spent / len(records):5.2f} {dynamo:6d}  {kind}"
        )
    lines.append(f"{'CPU-s':>6}  test file: its processes' kinds")
    for name, kinds in sorted(by_file.items(), key=lambda item: -sum(item[1].values()))[:rows]:
        top = ", ".join(f"{kind} {spent:.0f}" for kind, spent in kinds.most_common(4))
        lines.append(f"{sum(kinds.values()):6.1f}  {name}: {top}")
    return "\n".join(lines)


def cpu_counters() -> list[int]:
    return [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]


def noting_environment(keep: Path) -> dict[str, str]:
    """This environment, with the noting ``sitecustomize`` (in ``keep/site``) first on the path
    and the notes going to ``keep/processes``: every Python started under it notes itself."""
    log_dir = keep / "processes"
    log_dir.mkdir(parents=True, exist_ok=True)
    site = keep / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(NOTE_COMMAND_LINE)
    path = ":".join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "PYTHONPATH": path, "NETTEBENCH_COST_LOG": str(log_dir)}


def record(keep: Path, frequency: float | None, pytest_args: list[str]) -> int:
    """Run the suite (under perf unless ``frequency`` is None); perf.data, the command lines,
    the exit records and the CPUs' busy seconds go to ``keep``."""
    env = noting_environment(keep)
    before, started = cpu_counters(), time.perf_counter()
    command = [sys.executable, "-m", "pytest", *pytest_args]
    if frequency is not None:
        command = ["perf", "record", "-a", "-F", f"{frequency:g}", "-o", str(keep / "perf.data"),
                   "--", *command]  # fmt: skip
    status = subprocess.run(command, env=env).returncode
    wall = time.perf_counter() - started
    spent = [after - first for first, after in zip(before, cpu_counters(), strict=True)]
    stolen = 100 * spent[7] / sum(spent) if len(spent) > 7 else 0.0
    idle = 100 * spent[3] / sum(spent)
    busy = sum(spent[index] for index in (0, 1, 2, 5, 6))  # user, nice, system, irq, softirq
    (keep / "busy_cpu_s").write_text(f"{busy / os.sysconf('SC_CLK_TCK'):.1f}\n")
    if frequency is not None:
        (keep / "frequency").write_text(f"{frequency:g}\n")
    print(
        f"pytest exited {status} after {wall:.0f} s; CPUs idle {idle:.1f} %, stolen {stolen:.1f} %"
    )
    return status


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--frequency", type=float, default=49, help="samples a second per CPU")
    parser.add_argument("--keep", type=Path, help="keep perf.data and the command lines here")
    parser.add_argument("--analyse", type=Path, help="only attribute a kept recording again")
    parser.add_argument("--no-perf", action="store_true", help="only the processes' exit notes")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = parser.parse_args()
    if args.analyse:
        keep = args.analyse
    else:
        if not args.no_perf and shutil.which("perf") is None:
            sys.exit("perf is not installed (Debian: apt install linux-perf), or use --no-perf")
        keep = args.keep or Path(tempfile.mkdtemp(prefix="suite-cost-"))
        record(keep, None if args.no_perf else args.frequency, args.pytest_args)
    if (keep / "perf.data").exists():
        frequency = float((keep / "frequency").read_text())
        samples, processes = attribute(keep / "perf.data", keep / "processes")
        print(report(samples, processes, frequency))
    busy = keep / "busy_cpu_s"
    busy_cpu_s = float(busy.read_text()) if busy.exists() else None
    print(exits_report(read_exits(keep / "processes"), busy_cpu_s))
    print(f"recording: {keep} (again: python tests/bench_suite_cost.py --analyse {keep})")


if __name__ == "__main__":
    main()

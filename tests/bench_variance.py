"""Benchmark: where the spread of the quick start's O0 cell lives, and the replicates it asks for.

Copies the project into a fresh folder, builds the quick-start study's synthetic dataset (and
the decoded store for ``cached``) with Snakemake (``--workflow-profile profiles/quickstart``,
those targets only), reads from Snakemake's dry run (``-n -p``) the exact command its
``cell_train`` job runs for the O0 cell of each loader, and runs that command ``--runs`` times
per loader as independent processes, one after another (never two at once), the loaders
interleaved (pil 1, cached 1, pil 2, ...), each process in its own output folder and with the
environment the rule's shell gives it (``PYTHONPATH``, ``OMP_WAIT_POLICY=PASSIVE`` unless set,
``OMP_NUM_THREADS`` and its siblings at the job's threads). Stock torch, nothing patched.

From every process's record (``metrics.json``, ``epochs.csv``) it takes the steady img/s
(``summary.train_img_s``), the steady steps (``step_ms``), the block rates
(``summary.train_block_img_s``) and whether the timing conditions saw interference, and prints
per loader:

- **within one process**: the median over processes of the steps' sd / mean and of the block
  rates' sd / mean;
- **between processes**: the sd / mean of the per-process ``train_img_s`` (and of the
  per-process geometric mean of the block rates), with min and max;
- **variance components** in the sense of Kalibera and Jones (ISMM 2013), on the logarithms of
  the block rates: S1^2, the mean over processes of the variance of a process's block rates;
  S2^2, the variance of the processes' means; T2^2 = S2^2 - S1^2 / n (n blocks a process), the
  part that lives between processes and no number of steps in one process removes;
- **replicates**: for two cells compared with r processes a side, the 95 % interval of the log
  ratio of their mean rates has half-width ~ t(0.975, df) * sqrt(2) * s / sqrt(r), s the sd of
  ln(per-process rate) (~ the between-process sd / mean), df = 2 (r - 1) (Welch's with equal
  spreads; r - 1 printed beside it, the conservative choice); the smallest r whose interval is
  within 10 % and 20 % (exp(half) - 1), and the smallest true ratio found with 80 % power at
  r = 2, 3, 5: exp((t(0.975, df) + t(0.80, df)) * sqrt(2 / r) * s) (the usual approximation);
- the ``cached`` / ``pil`` ratio of the mean rates with Welch's 95 % interval across the
  processes, when both loaders ran.

All of it, with every process's numbers, goes to ``--out`` as JSON. ``--compare A B`` reads two
such files (two runs of this bench, e.g. an hour apart) and prints the between-runs level: the
ratio of the runs' mean rates with Welch's interval across their processes, and S3^2 (the
variance of the run means) against S2^2 / r. ``--analyse A`` prints one such file's analysis
again (with this version of the computation). Every figure is also given for the processes whose
timing conditions saw no interference ("quiet"). Asserts nothing.

``--ref REV`` times the workflow as committed at REV (``git archive``) rather than the working
tree, so that two runs an hour apart time the same code. ``--avx2`` caps torch and oneDNN at
AVX2 as ``tests/bench_quickstart.py --avx2`` does.

    python tests/bench_variance.py [--runs 10] [--loaders pil,cached] [--avx2] [--out OUT.json]
        [--ref REV] [--keep DIR]
    python tests/bench_variance.py --compare RUN1.json RUN2.json [--out OUT.json]
    python tests/bench_variance.py --analyse RUN.json [--out OUT.json]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import scipy.stats

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from nettebench.report.stats import t_quantile  # noqa: E402
from tests.workflow_helpers import WORKFLOW_PARTS, copy_workflow  # noqa: E402

AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
PROFILE = ["--workflow-profile", "profiles/quickstart"]
DATASET = "synthetic-quick"
# Snakemake's shell() exports the job's threads under these names (snakemake/shell.py).
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
OUTPUT_OPTIONS = {"--out-dir": "", "--ceiling": "ceiling.json", "--weights": "weights.pt"}
REPLICATES = range(2, 11)
POWER_REPLICATES = (2, 3, 5)
TARGETS = (0.10, 0.20)


# -- the pure computation (tests/test_bench_variance.py) -------------------------------------


def cv(values: list[float]) -> float | None:
    """Sample sd / mean; None with fewer than two values."""
    if len(values) < 2:
        return None
    return statistics.stdev(values) / statistics.mean(values)


def steady_steps(epochs_csv_text: str) -> list[float]:
    """Every steady step's milliseconds (``epochs.csv``'s ``step_ms``, all epochs in order)."""
    found = []
    for row in csv.DictReader(epochs_csv_text.splitlines()):
        found += [float(value) for value in (row.get("step_ms") or "").split()]
    return found


def process_numbers(metrics: dict, steps_ms: list[float]) -> dict:
    """One process: its steady img/s, the spread of its steps and blocks, its conditions."""
    summary = metrics.get("summary") or {}
    found = metrics.get("conditions") or {}
    blocks = [float(b) for b in summary.get("train_block_img_s") or []]
    return {
        "status": metrics.get("status"),
        "train_img_s": summary.get("train_img_s"),
        "train_img_s_low": summary.get("train_img_s_low"),
        "train_img_s_high": summary.get("train_img_s_high"),
        "block_img_s": blocks,
        "block_geomean_img_s": math.exp(statistics.mean(map(math.log, blocks))) if blocks else None,
        "steps": len(steps_ms),
        "step_cv": cv(steps_ms),
        "block_cv": cv(blocks),
        "time_for_epochs_s": summary.get("time_for_epochs_s"),
        "interference": bool(found.get("interference")),
        "interference_reasons": found.get("interference_reasons") or [],
        "other_cpu_share": found.get("other_cpu_share"),
        "steal_share": found.get("steal_share"),
        "loadavg_start": found.get("loadavg_start"),
    }


def _log_sd(values: list[float]) -> float | None:
    return statistics.stdev([math.log(v) for v in values]) if len(values) >= 2 else None


def spread(processes: list[dict]) -> dict:
    """Within one process, between processes and the Kalibera-Jones components of a loader's
    processes (those with a rate and at least two blocks)."""
    usable = [p for p in processes if p["train_img_s"] and len(p["block_img_s"]) >= 2]
    if len(usable) < 2:
        return {"processes": len(usable)}
    rates = [p["train_img_s"] for p in usable]
    geomeans = [p["block_geomean_img_s"] for p in usable]
    logs = [[math.log(b) for b in p["block_img_s"]] for p in usable]
    n = statistics.mean(len(blocks) for blocks in logs)
    s1 = statistics.mean(statistics.variance(blocks) for blocks in logs)
    s2 = statistics.variance([statistics.mean(blocks) for blocks in logs])
    t2 = max(0.0, s2 - s1 / n)
    return {
        "processes": len(usable),
        "under_interference": sum(p["interference"] for p in usable),
        "within": {
            "step_cv_median": statistics.median(p["step_cv"] for p in usable),
            "step_cv_range": [min(p["step_cv"] for p in usable), max(p["step_cv"] for p in usable)],
            "block_cv_median": statistics.median(p["block_cv"] for p in usable),
            "block_cv_range": [
                min(p["block_cv"] for p in usable),
                max(p["block_cv"] for p in usable),
            ],
        },
        "between": {
            "train_img_s_mean": statistics.mean(rates),
            "train_img_s_cv": cv(rates),
            "train_img_s_log_sd": _log_sd(rates),
            "train_img_s_min": min(rates),
            "train_img_s_max": max(rates),
            "block_geomean_mean": statistics.mean(geomeans),
            "block_geomean_cv": cv(geomeans),
            "block_geomean_log_sd": _log_sd(geomeans),
            "block_geomean_min": min(geomeans),
            "block_geomean_max": max(geomeans),
        },
        "components": {
            "blocks_per_process": n,
            "s1_sq": s1,
            "s2_sq": s2,
            "s1_sq_over_n": s1 / n,
            "t2_sq": t2,
            # the share of a process mean's variance that lives between processes
            "between_share": t2 / s2 if s2 > 0 else None,
        },
    }


def half_width(log_sd: float, r: int, df: float) -> float:
    """exp(half) - 1: the upper half-width, as a share, of the 95 % interval of the ratio of two
    cells' mean rates from r processes a side, half = t(0.975, df) * sqrt(2) * s / sqrt(r)."""
    return math.exp(t_quantile(0.975, df) * math.sqrt(2 / r) * log_sd) - 1


def replicates_needed(log_sd: float, target: float, df_of=lambda r: 2 * (r - 1)) -> int | None:
    """The smallest r (2-100) whose interval's half-width is within ``target`` (0.10: 10 %)."""
    for r in range(2, 101):
        if half_width(log_sd, r, df_of(r)) <= target:
            return r
    return None


def detectable_ratio(log_sd: float, r: int, power: float = 0.80) -> float:
    """The smallest true ratio a two-sided 5 % Welch test on r processes a side finds with
    ``power``: exp((t(0.975, df) + t(power, df)) * sqrt(2 / r) * s), df = 2 (r - 1)."""
    df = 2 * (r - 1)
    return math.exp((t_quantile(0.975, df) + t_quantile(power, df)) * math.sqrt(2 / r) * log_sd)


def design(log_sd: float) -> dict:
    """What a between-process spread (sd of ln rate) asks of a comparison."""
    return {
        "log_sd": log_sd,
        "half_width": {
            r: {
                "welch_df": half_width(log_sd, r, 2 * (r - 1)),
                "df_r_minus_1": half_width(log_sd, r, r - 1),
            }
            for r in REPLICATES
        },
        "replicates_for": {
            f"{round(100 * target)} %": {
                "welch_df": replicates_needed(log_sd, target),
                "df_r_minus_1": replicates_needed(log_sd, target, lambda r: r - 1),
            }
            for target in TARGETS
        },
        "detectable_ratio_80_power": {r: detectable_ratio(log_sd, r) for r in POWER_REPLICATES},
    }


def welch_ratio(a: list[float], b: list[float]) -> dict | None:
    """exp(mean ln b - mean ln a) with Welch's 95 % interval and two-sided p on the logs."""
    if len(a) < 2 or len(b) < 2:
        return None
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    diff = statistics.mean(lb) - statistics.mean(la)
    se = math.sqrt(va + vb)
    if se == 0:
        return {"ratio": math.exp(diff), "low": math.exp(diff), "high": math.exp(diff), "p": None}
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    half = t_quantile(0.975, df) * se
    return {
        "ratio": math.exp(diff),
        "low": math.exp(diff - half),
        "high": math.exp(diff + half),
        "df": df,
        "p": float(2 * scipy.stats.t.sf(abs(diff / se), df)),
    }


def between_runs(first: list[float], second: list[float]) -> dict | None:
    """Two runs' per-process rates: the second's mean over the first's (Welch), and the third
    Kalibera-Jones level on ln rate: S3^2 (variance of the two run means, 1 df) against
    S2^2 / r (what the processes' spread alone puts into a run mean)."""
    ratio = welch_ratio(first, second)
    if ratio is None:
        return None
    la, lb = [math.log(v) for v in first], [math.log(v) for v in second]
    s3 = statistics.variance([statistics.mean(la), statistics.mean(lb)])
    s2 = (statistics.variance(la) + statistics.variance(lb)) / 2
    r = (len(la) + len(lb)) / 2
    return {
        **ratio,
        "s3_sq": s3,
        "s2_sq_pooled": s2,
        "s2_sq_over_r": s2 / r,
        "t3_sq": max(0.0, s3 - s2 / r),
    }


# -- running the processes ----------------------------------------------------------------------


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def _commit(ref: str) -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=REPO, capture_output=True, text=True
    )
    return done.stdout.strip()


def cell_commands(dry_run: str) -> dict[str, list[str]]:
    """Per loader, the arguments after ``python -m nettebench`` of the O0 cell's cell_train job,
    as Snakemake's dry run prints its shell command (``exec python -m nettebench ... > log``)."""
    found = {}
    for line in dry_run.splitlines():
        match = re.search(r"exec python -m nettebench (benchmarks cell-job .*)", line)
        if not match:
            continue
        words = shlex.split(match[1])
        words = words[: words.index(">")] if ">" in words else words
        option = dict(zip(words, words[1:], strict=False))
        if option.get("--precision") == "O0" and "--max-steps" not in words:
            found.setdefault(option.get("--loader", "pil"), words)  # the first seed's
    return found


def _with_out_dir(words: list[str], out: Path) -> list[str]:
    words = list(words)
    for option, name in OUTPUT_OPTIONS.items():
        at = words.index(option) + 1
        words[at] = str(out / name) if name else str(out)
    return words


def export_workflow(ref: str, dest: Path) -> Path:
    """The workflow's files as committed at ``ref`` (``git archive``), not the working tree: two
    runs an hour apart then time the same code whatever is being edited meanwhile."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, *WORKFLOW_PARTS, "config.yaml"],
        cwd=REPO, capture_output=True, check=True,
    )  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def prepare(workdir: Path, env: dict, loaders: list[str]) -> dict[str, list[str]]:
    """The dataset (and store) built, the cells' commands read from the dry run."""
    dry = subprocess.run(
        [sys.executable, "-m", "snakemake", *PROFILE, "-n", "-p"],
        cwd=workdir, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    commands = cell_commands(dry.stdout + dry.stderr)
    missing = [loader for loader in loaders if loader not in commands]
    if missing:
        raise SystemExit(f"no O0 cell_train job for loader(s) {missing} in the dry run")
    targets = [f"results/data/{DATASET}/dataset.json"]
    for loader in loaders:
        if "--store" in commands[loader]:
            store = commands[loader][commands[loader].index("--store") + 1]
            targets.append(f"{store}/store.json")
    subprocess.run(
        [sys.executable, "-m", "snakemake", *PROFILE, *targets],
        cwd=workdir, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return {loader: commands[loader] for loader in loaders}


def job_env(workdir: Path, avx2: bool, threads: str) -> dict:
    """The environment rules/common.smk's shell prefix and Snakemake's shell() give a job."""
    env = {**os.environ, **(AVX2_ONLY if avx2 else {})}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    scripts = str(workdir / "scripts")
    env["PYTHONPATH"] = scripts + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.update({name: threads for name in THREAD_VARIABLES})
    return env


def run_process(workdir: Path, words: list[str], out: Path, env: dict) -> dict:
    out.mkdir(parents=True)
    started, load = time.time(), _loadavg()
    clock = time.perf_counter()
    with open(out / "job.log", "w", encoding="utf-8") as log:
        done = subprocess.run(
            [sys.executable, "-m", "nettebench", *_with_out_dir(words, out)],
            cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    wall = time.perf_counter() - clock
    if done.returncode != 0:
        print((out / "job.log").read_text()[-3000:])
        raise SystemExit(f"the trainer failed ({done.returncode}) in {out}")
    metrics = json.loads((out / "metrics.json").read_text())
    numbers = process_numbers(metrics, steady_steps((out / "epochs.csv").read_text()))
    ceiling = out / "ceiling.json"
    if ceiling.exists():
        record = json.loads(ceiling.read_text())
        numbers["ceiling_img_s"] = record.get("img_s")
        numbers["ceiling_interference"] = bool((record.get("conditions") or {}).get("interference"))
    return {"started_at": started, "process_wall_s": wall, "loadavg_before": load, **numbers}


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f} %"


def print_loader(loader: str, processes: list[dict], found: dict) -> None:
    print(f"\n== O0 `{loader}`: {len(processes)} processes ==")
    print(" #  train img/s [95 % of median]  blocks' geomean  step sd/mean  block sd/mean  "
          "others  load  interference")  # fmt: skip
    for i, p in enumerate(processes, 1):
        low, high = p.get("train_img_s_low"), p.get("train_img_s_high")
        interval = f"[{low:.0f}-{high:.0f}]" if low and high else ""
        print(
            f"{i:2d}  {p['train_img_s']:7.1f} {interval:13s}  {p['block_geomean_img_s']:14.1f}  "
            f"{_pct(p['step_cv']):>12s}  {_pct(p['block_cv']):>13s}  "
            f"{_pct(p['other_cpu_share']):>6s}  {p['loadavg_before'].split()[0]}  "
            f"{'; '.join(p['interference_reasons']) if p['interference'] else 'no'}"
        )
    if "between" not in found:
        print("fewer than two usable processes")
        return
    w, b, c = found["within"], found["between"], found["components"]
    print(
        f"within one process: steps' sd/mean median {_pct(w['step_cv_median'])} "
        f"({_pct(w['step_cv_range'][0])}-{_pct(w['step_cv_range'][1])}); block rates' sd/mean "
        f"median {_pct(w['block_cv_median'])} ({_pct(w['block_cv_range'][0])}-"
        f"{_pct(w['block_cv_range'][1])})"
    )
    print(
        f"between processes: train_img_s mean {b['train_img_s_mean']:.1f}, sd/mean "
        f"{_pct(b['train_img_s_cv'])} (min {b['train_img_s_min']:.1f}, max "
        f"{b['train_img_s_max']:.1f}); blocks' geomean {b['block_geomean_mean']:.1f}, sd/mean "
        f"{_pct(b['block_geomean_cv'])} ({b['block_geomean_min']:.1f}-"
        f"{b['block_geomean_max']:.1f})"
    )
    print(
        f"components (ln block rate, {c['blocks_per_process']:.0f} blocks a process): S1^2 "
        f"{c['s1_sq']:.2e} (within), S1^2/n {c['s1_sq_over_n']:.2e}, S2^2 {c['s2_sq']:.2e} "
        f"(process means), T2^2 = S2^2 - S1^2/n {c['t2_sq']:.2e}: "
        f"{_pct(c['between_share'], 0)} of a process mean's variance is between processes"
    )
    print_design(found["design"])
    if found.get("quiet_only"):
        q = found["quiet_only"]
        if "between" not in q:
            return
        b = q["between"]
        print(
            f"quiet processes only ({q['processes']}): within: steps' sd/mean median "
            f"{_pct(q['within']['step_cv_median'])}, block rates' "
            f"{_pct(q['within']['block_cv_median'])}"
            f"; between: train_img_s mean {b['train_img_s_mean']:.1f}, sd/mean "
            f"{_pct(b['train_img_s_cv'])} (min {b['train_img_s_min']:.1f}, max "
            f"{b['train_img_s_max']:.1f}); T2^2 {q['components']['t2_sq']:.2e} of S2^2 "
            f"{q['components']['s2_sq']:.2e}"
        )
        print_design(q["design"])


def print_design(d: dict) -> None:
    print(
        f"replicates (s = sd of ln train_img_s = {d['log_sd']:.4f}): 95 % interval of a ratio, "
        "+half-width with r processes a side, df 2(r-1) [df r-1]:"
    )
    print("  " + "  ".join(
        f"r={r}: {_pct(h['welch_df'], 0)} [{_pct(h['df_r_minus_1'], 0)}]"
        for r, h in d["half_width"].items()
    ))  # fmt: skip
    for target, needed in d["replicates_for"].items():
        print(
            f"  within {target}: r = {needed['welch_df']} (df 2(r-1)), "
            f"{needed['df_r_minus_1']} (df r-1)"
        )
    print("  smallest true ratio found with 80 % power: " + ", ".join(
        f"r={r}: {ratio:.2f}x" for r, ratio in d["detectable_ratio_80_power"].items()
    ))  # fmt: skip


def analyse(processes: dict[str, list[dict]]) -> dict:
    found = {}
    for loader, runs in processes.items():
        found[loader] = spread(runs)
        if "between" in found[loader]:
            found[loader]["design"] = design(found[loader]["between"]["train_img_s_log_sd"])
            found[loader]["design_block_geomean"] = design(
                found[loader]["between"]["block_geomean_log_sd"]
            )
            quiet = [p for p in runs if not p["interference"]]
            if len(quiet) < len(runs) and len(quiet) >= 2:
                found[loader]["quiet_only"] = spread(quiet)
                if "between" in found[loader]["quiet_only"]:
                    found[loader]["quiet_only"]["design"] = design(
                        found[loader]["quiet_only"]["between"]["train_img_s_log_sd"]
                    )
    for key, part in (("all", lambda f: f), ("quiet_only", lambda f: f.get("quiet_only") or f)):
        # two cells compared: the loaders' between-process variances of ln rate, averaged
        sds = [
            part(found[loader])["between"]["train_img_s_log_sd"]
            for loader in processes
            if "between" in part(found[loader])
        ]
        if len(sds) >= 2:
            found.setdefault("pooled", {})[key] = design(
                math.sqrt(statistics.mean(sd**2 for sd in sds))
            )
    if "pil" in processes and "cached" in processes:
        pil = [p["train_img_s"] for p in processes["pil"] if p["train_img_s"]]
        cached = [p["train_img_s"] for p in processes["cached"] if p["train_img_s"]]
        found["cached_over_pil"] = {
            "all": welch_ratio(pil, cached),
            **{
                f"first_{r}": welch_ratio(pil[:r], cached[:r])
                for r in (2, 3)
                if r < min(len(pil), len(cached))
            },
        }
        quiet = {
            loader: [p["train_img_s"] for p in processes[loader]
                     if p["train_img_s"] and not p["interference"]]
            for loader in ("pil", "cached")
        }  # fmt: skip
        if any(len(q) < len(processes[loader]) for loader, q in quiet.items()):
            found["cached_over_pil"]["quiet_only"] = welch_ratio(quiet["pil"], quiet["cached"])
    return found


def print_ratio(name: str, ratio: dict | None) -> None:
    if ratio is None:
        return
    p = "-" if ratio.get("p") is None else f"{ratio['p']:.3f}"
    print(f"{name}: {ratio['ratio']:.3f}x [{ratio['low']:.3f}-{ratio['high']:.3f}], p {p}")


def measure(args) -> dict:
    loaders = [name.strip() for name in args.loaders.split(",") if name.strip()]
    tmp = None if args.keep else tempfile.mkdtemp(prefix="variance-")
    dest = args.keep or Path(tmp)
    workdir = export_workflow(args.ref, dest) if args.ref else copy_workflow(dest)
    env = {**os.environ, **(AVX2_ONLY if args.avx2 else {})}
    started, load_before = time.time(), _loadavg()
    commands = prepare(workdir, env, loaders)
    threads = commands[loaders[0]][commands[loaders[0]].index("--threads") + 1]
    print(f"python -m nettebench {shlex.join(commands[loaders[0]])}  (one of {len(loaders)})")
    processes: dict[str, list[dict]] = {loader: [] for loader in loaders}
    for number in range(1, args.runs + 1):
        for loader in loaders:
            out = workdir / "results" / "variance" / loader / str(number)
            env = job_env(workdir, args.avx2, threads)
            found = run_process(workdir, commands[loader], out, env)
            processes[loader].append(found)
            print(
                f"{loader} {number}/{args.runs}: {found['train_img_s']:.1f} img/s, wall "
                f"{found['process_wall_s']:.1f} s, load {found['loadavg_before']}"
                f"{', under interference' if found['interference'] else ''}",
                flush=True,
            )
            if not args.keep:
                shutil.rmtree(out)  # the weights: 45 MB a process
    result = {
        "command": " ".join(sys.argv),
        "commit": _commit(args.ref or "HEAD"),
        "tree": f"git archive {args.ref}" if args.ref else "working tree",
        "cpu_model": _cpu_model(),
        "torch": _torch_version(),
        "avx2_caps": args.avx2,
        "started_at": started,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
        "ended": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "loadavg_before": load_before,
        "loadavg_after": _loadavg(),
        "cell_command": {loader: shlex.join(words) for loader, words in commands.items()},
        "processes": processes,
        "analysis": analyse(processes),
    }
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return result


def _torch_version() -> str:
    done = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"],
        capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip()


def report(result: dict) -> None:
    print(
        f"\ncommit {result['commit']}, {result['cpu_model']}, torch {result['torch']}"
        f"{', AVX2 caps' if result['avx2_caps'] else ''}; {result['started']} to "
        f"{result['ended']}; load before {result['loadavg_before']}, after "
        f"{result['loadavg_after']}"
    )
    for loader, processes in result["processes"].items():
        print_loader(loader, processes, result["analysis"][loader])
    for key, pooled in (result["analysis"].get("pooled") or {}).items():
        print(f"\n== the loaders pooled ({key.replace('_', ' ')} processes) ==")
        print_design(pooled)
    ratios = result["analysis"].get("cached_over_pil")
    if ratios:
        print()
        for key, ratio in ratios.items():
            print_ratio(f"cached / pil ({key.replace('_', ' ')} processes)", ratio)


def compare(paths: list[Path]) -> dict:
    first, second = (json.loads(path.read_text()) for path in paths)
    found = {"runs": [str(p) for p in paths], "loaders": {}}
    print(
        f"run 1: {first['started']}, load {first['loadavg_before']}; run 2: {second['started']}, "
        f"load {second['loadavg_before']}; {(second['started_at'] - first['started_at']) / 60:.0f}"
        " min apart"
    )
    for loader in first["processes"]:
        if loader not in second["processes"]:
            continue
        rates = [
            [p["train_img_s"] for p in run["processes"][loader] if p["train_img_s"]]
            for run in (first, second)
        ]
        quiet = [
            [p["train_img_s"] for p in run["processes"][loader]
             if p["train_img_s"] and not p["interference"]]
            for run in (first, second)
        ]  # fmt: skip
        found["loaders"][loader] = {
            "means": [statistics.mean(r) for r in rates],
            "all": between_runs(*rates),
            "quiet_only": between_runs(*quiet),
            "under_interference": [
                sum(p["interference"] for p in run["processes"][loader]) for run in (first, second)
            ],
        }
        row = found["loaders"][loader]
        print(
            f"\nO0 `{loader}`: mean train img/s {row['means'][0]:.1f} then {row['means'][1]:.1f} "
            f"({row['under_interference'][0]} and {row['under_interference'][1]} processes "
            "under interference)"
        )
        for key in ("all", "quiet_only"):
            found_ratio = row[key]
            if found_ratio is None:
                continue
            print_ratio(f"  run 2 / run 1 ({key.replace('_', ' ')})", found_ratio)
            print(
                f"  S3^2 (run means, 1 df) {found_ratio['s3_sq']:.2e}, S2^2/r "
                f"{found_ratio['s2_sq_over_r']:.2e}, T3^2 {found_ratio['t3_sq']:.2e}"
            )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="processes per loader")
    parser.add_argument("--loaders", default="pil,cached", help="comma-separated, interleaved")
    parser.add_argument("--avx2", action="store_true", help="cap torch and oneDNN at AVX2")
    parser.add_argument("--out", type=Path, help="write everything here as JSON")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep every record")
    parser.add_argument(
        "--ref", help="time the workflow as committed at this git revision, not the working tree"
    )
    parser.add_argument(
        "--analyse", type=Path, metavar="RUN", help="an --out file: its processes analysed again"
    )
    parser.add_argument(
        "--compare", nargs=2, type=Path, metavar="RUN", help="two --out files: between runs"
    )
    args = parser.parse_args()
    if args.compare:
        result = compare(args.compare)
    elif args.analyse:
        result = json.loads(args.analyse.read_text())
        result["analysis"] = analyse(result["processes"])
        report(result)
    else:
        if args.runs < 2:
            parser.error("--runs: at least 2 processes a loader")
        result = measure(args)
        report(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

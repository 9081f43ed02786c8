"""Benchmark: OpenMP's wait policy for the jobs, side by side, quiet and beside a busy process.

Each trial is a fresh process running stock torch training steps (torchvision resnet18, SGD,
``--image-size`` px, ``--batch`` images, ``torch.set_num_threads(--threads)``) under one
``OMP_WAIT_POLICY`` (unset = the OpenMP runtime's default, ``PASSIVE``, ``ACTIVE``), alone or
with a CPU-bound process (a Python busy loop) started beside it. The policies alternate within
every round, so a change of the machine's load hits them alike. Prints each trial's median step
time with its quartiles and the spread of its steps (standard deviation / mean), then per
policy and condition the median over rounds with the range. Asserts nothing
(``rules/common.smk`` sets the policy the numbers chose; docs/honest-numbers.md quotes them).

    python tests/bench_omp_wait.py [--rounds 3] [--steps 30] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

POLICIES = ("default", "PASSIVE", "ACTIVE")

TRIAL = r"""
import json, sys, time, torch, torchvision
threads, steps, size, batch = (int(a) for a in sys.argv[1:5])
torch.set_num_threads(threads)
torch.manual_seed(0)
model = torchvision.models.resnet18(num_classes=10)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,))
loss_fn = torch.nn.CrossEntropyLoss()
times = []
for i in range(steps + 5):
    start = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
    opt.step()
    if i >= 5:
        times.append(time.perf_counter() - start)
print(json.dumps(times))
"""

BUSY = "while True: pass"


def trial(policy: str, busy: bool, args: argparse.Namespace) -> list[float]:
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy != "default":
        env["OMP_WAIT_POLICY"] = policy
    spinner = subprocess.Popen([sys.executable, "-c", BUSY]) if busy else None
    try:
        done = subprocess.run(
            [sys.executable, "-c", TRIAL, str(args.threads), str(args.steps),
             str(args.image_size), str(args.batch)],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    return json.loads(done.stdout)


def describe(times: list[float]) -> str:
    q1, median, q3 = statistics.quantiles(times, n=4)
    spread = statistics.stdev(times) / statistics.mean(times)
    return f"median {1000 * median:7.1f} ms [IQR {1000 * q1:.1f}-{1000 * q3:.1f}], sd {spread:.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--policies", default=",".join(POLICIES))
    args = parser.parse_args()
    policies = args.policies.split(",")
    medians: dict[tuple[str, bool], list[float]] = {}
    for round_ in range(args.rounds):
        for busy in (False, True):
            for policy in policies if round_ % 2 == 0 else policies[::-1]:
                started = time.perf_counter()
                times = trial(policy, busy, args)
                medians.setdefault((policy, busy), []).append(statistics.median(times))
                beside = "beside a busy process" if busy else "alone"
                print(
                    f"round {round_} {policy:8s} {beside:22s} {describe(times)} "
                    f"({time.perf_counter() - started:.1f} s, load {os.getloadavg()[0]:.2f})",
                    flush=True,
                )
    print("\nmedian step over rounds (range of the rounds' medians):")
    for (policy, busy), found in medians.items():
        beside = "beside a busy process" if busy else "alone"
        print(
            f"  {policy:8s} {beside:22s} {1000 * statistics.median(found):7.1f} ms "
            f"({1000 * min(found):.1f}-{1000 * max(found):.1f}, {len(found)} rounds)"
        )


if __name__ == "__main__":
    main()

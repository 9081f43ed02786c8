"""One precision's inference cells in one process: ``python -m nettebench inference measure``
once per batch size, each writing its own record, so the device command (tests/device/run.py)
starts one process per precision instead of one per cell (each start of a resnet50 process on
CUDA costs seconds the cells do not measure).

    PYTHONPATH=scripts python3 tests/device/inference_sweep.py --out-dir OUT \\
        --batch-sizes 1 8 64 256 --precision O1 --data DATA --model resnet50 ...

Every option but ``--out-dir`` and ``--batch-sizes`` is the measure command's own; the records
are ``OUT/<precision>-batch<N>.json``. The exit status is the first non-zero one of the cells
(each cell runs to its record either way).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nettebench.inference import cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--batch-sizes", type=int, nargs="+", required=True)
    parser.add_argument("--precision", required=True)
    args, measure = parser.parse_known_args(argv)
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    codes = []
    for batch in args.batch_sizes:
        out = Path(args.out_dir) / f"{args.precision}-batch{batch}.json"
        codes.append(cli.main([
            "measure", *measure, "--precision", args.precision, "--batch-size", str(batch),
            "--out", str(out),
        ]))  # fmt: skip
    return next((code for code in codes if code), 0)


if __name__ == "__main__":
    sys.exit(main())

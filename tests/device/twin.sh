#!/usr/bin/env bash
# The device twin: a CPU virtual environment built like the H200's stack (../shared/DEVICE.md):
# pyenv's Python 3.12, torch 2.11.0 and torchvision 0.26.0 from the registry, and the image's
# other packages the project uses (tests/device/twin-requirements.txt), nothing the image
# lacks. What the device command carries (.vendor, from tests/device/prepare_carry.py) is the
# checkout's, used as the device uses it. Then the device command's smoke path runs in it:
#
#   tests/device/twin.sh [VENV]        # build VENV (or reuse it: pip adds only what is missing)
#   PYTHONPATH=scripts VENV/bin/python tests/device/run.py --smoke --out /tmp/out
#
# VENV defaults to $NETTEBENCH_TWIN, else ~/.cache/nettebench/device-twin; the Python to
# $NETTEBENCH_TWIN_PYTHON, else ~/.pyenv/versions/3.12.1/bin/python. Any failure ends it with
# one line on stderr starting "device twin:" and exit 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
unset PYTHONPATH # the twin's own packages only (the device command sets its own)

twin=${1:-${NETTEBENCH_TWIN:-${XDG_CACHE_HOME:-$HOME/.cache}/nettebench/device-twin}}
python=${NETTEBENCH_TWIN_PYTHON:-$HOME/.pyenv/versions/3.12.1/bin/python}
requirements=tests/device/twin-requirements.txt
fail() {
  echo "device twin: $*" >&2
  exit 1
}
is_312() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; }

if [ ! -x "$twin/bin/python" ]; then
  [ -x "$python" ] || fail "no Python 3.12 at $python (pyenv install 3.12, or set NETTEBENCH_TWIN_PYTHON)"
  is_312 "$python" || fail "$python is not Python 3.12 ($("$python" -V 2>&1))"
  mkdir -p "$(dirname "$twin")"
  "$python" -m venv "$twin" || fail "could not create a virtual environment at $twin"
fi
is_312 "$twin/bin/python" || fail "$twin exists but is not a Python 3.12 environment"
# pip's cache serves what was downloaded before; an existing twin gets only what is missing
"$twin/bin/python" -m pip install -q -r "$requirements" ||
  fail "pip could not install $requirements into $twin (above)"
"$twin/bin/python" - <<'PY' || fail "$twin is not the device's stack (above)"
import importlib.metadata as md
import importlib.util
import sys

absent = ("jsonschema", "efficientnet_pytorch", "snakemake", "pyperf", "nettebench")
present = [name for name in absent if importlib.util.find_spec(name)]
versions = {name: md.version(name) for name in ("torch", "torchvision")}
wrong = {k: v for k, v in versions.items() if v.split("+")[0] != {"torch": "2.11.0", "torchvision": "0.26.0"}[k]}
if present or wrong:
    print(f"importable though the H200 lacks them: {present}; versions: {wrong}", file=sys.stderr)
    sys.exit(1)
print(f"device twin: Python {sys.version.split()[0]}, torch {versions['torch']}, "
      f"torchvision {versions['torchvision']}; none of {', '.join(absent)}")
PY

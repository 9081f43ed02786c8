"""tests/device/prepare_carry.py builds apex's Python-only wheel with nothing but the standard
library (a fresh virtual environment without pip, torch, setuptools or wheel runs it), and the
wheel holds what setuptools' own ``find_packages`` finds in the vendored source, each file with
its RECORD hash; pip installs it. In a plain clone, without the vendored source, it builds
nothing, says so and ends well (the device run's apex cases are then skipped)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest
import setuptools

sys.path.insert(0, str(Path(__file__).parent / "device"))
import prepare_carry  # noqa: E402 - tests/device/prepare_carry.py

vendored = pytest.mark.skipif(
    not prepare_carry.VENDORED_APEX.is_file(), reason="no vendored apex in ../shared/vendor"
)


def test_a_plain_clone_carries_nothing_and_says_so(tmp_path):
    """The script in a checkout with no ``../shared/vendor`` beside it: exit 0, one line saying
    the apex cases will be skipped, an empty carry list, nothing built."""
    script = tmp_path / "clone" / "tests" / "device" / "prepare_carry.py"
    script.parent.mkdir(parents=True)
    script.write_text(Path(prepare_carry.__file__).read_text())
    dest = tmp_path / "vendor"
    done = subprocess.run(
        [sys.executable, script, "--dest", dest], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    missing = tmp_path / "shared" / "vendor" / "apex-25.05-git.tar.gz"
    assert f"no vendored apex at {missing}:" in done.stdout
    assert "the device run's apex cases will be skipped" in done.stdout
    assert "carry: []  timeout_s: 480" in done.stdout
    assert not dest.exists() or not any(dest.iterdir())


@vendored
def test_a_bare_python_builds_the_carry_and_says_its_size(tmp_path):
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)  # no pip, torch, setuptools or wheel
    dest = tmp_path / "vendor"
    done = subprocess.run(
        [bare / "bin" / "python", prepare_carry.__file__, "--dest", dest],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [wheel] = dest.glob("apex-*.whl")
    mib = wheel.stat().st_size / 2**20
    assert f"1 file(s), {mib:.2f} MiB in all" in done.stdout
    assert f"{wheel.name}: {mib:.2f} MiB" in done.stdout and mib < 64


@vendored
def test_the_wheel_holds_what_setuptools_finds_and_pip_installs_it(tmp_path):
    source = tmp_path / "source"
    with tarfile.open(prepare_carry.VENDORED_APEX) as archive:
        keep = [m for m in archive.getmembers() if "/.git/" not in m.name]
        archive.extractall(source, members=keep, filter="data")
    packages = setuptools.find_packages(
        str(source / "apex"), exclude=sorted(prepare_carry.APEX_EXCLUDE)
    )
    expected = {
        str(path.relative_to(source / "apex"))
        for package in packages
        for path in (source / "apex" / package.replace(".", "/")).glob("*.py")
    }
    wheel = prepare_carry.vendor_apex(tmp_path / "vendor")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
        assert {n for n in names if not n.startswith(info)} == expected
        record = archive.read(f"{info}/RECORD").decode().splitlines()
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            if path.endswith("RECORD"):
                continue
            data = archive.read(path)
            hashed = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert (digest, int(size)) == (f"sha256={hashed.decode()}", len(data))
        assert len(record) == len(names)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
         site, wheel], check=True, timeout=120,
    )  # fmt: skip
    assert (site / "apex" / "amp" / "frontend.py").is_file()
    assert (site / info / "METADATA").read_text().startswith("Metadata-Version: 2.1\nName: apex")

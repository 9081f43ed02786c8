"""Real local git repositories of small libraries, for the source-build tests (no network).

- :func:`make_torchvision_repo`: a repository that builds a working ``torchvision`` wheel. Its
  sources are the installed torchvision's files (Python and compiled, so it runs with the
  installed torch), and its ``setup.py`` writes ``torchvision/version.py`` from ``git rev-parse
  HEAD`` as torchvision's own setup.py does, with a version of its own. A cell that runs
  against it imports it from the build's prefix and records that version and commit.
- :func:`make_package_repo`: a tiny pure-Python package (``apex``-shaped by default), optionally
  with a C extension that does not compile.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

LOCAL_TORCHVISION_VERSION = "0.29.1+local"
_GIT_USER = ["-c", "user.email=tests@nettebench", "-c", "user.name=nettebench tests"]

_TORCHVISION_SETUP = '''\
"""torchvision, repackaged from an installed copy: a real build of a real package."""
import pathlib
import re
import subprocess

from setuptools import find_packages, setup

VERSION = {version!r}
here = pathlib.Path(__file__).resolve().parent
commit = subprocess.run(
    ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True
).stdout.strip() or "Unknown"
version_py = here / "torchvision" / "version.py"
text = (here / "version.py.in").read_text()
text = re.sub(r"^__version__ = .*$", f"__version__ = {{VERSION!r}}", text, flags=re.M)
text = re.sub(r"^git_version = .*$", f"git_version = {{commit!r}}", text, flags=re.M)
version_py.write_text(text)
setup(
    name="torchvision",
    version=VERSION,
    packages=find_packages(include=["torchvision", "torchvision.*"]),
    package_data={{"": ["*.so", "*.so.*", "*.json", "*.pyi"]}},
    zip_safe=False,
)
'''


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *_GIT_USER, *args], cwd=repo, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def commit_all(repo: Path, message: str, tag: str | None = None) -> str:
    """Commit everything in ``repo`` (a new repository if there is none); the commit's hash."""
    if not (repo / ".git").exists():
        git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", message)
    if tag:
        git(repo, "tag", "--annotate", tag, "-m", tag)
    return git(repo, "rev-parse", "HEAD")


def make_torchvision_repo(repo: Path, tag: str = "v0.29.1-local") -> str:
    """A torchvision repository at ``repo`` (see the module docstring); its commit's hash."""
    spec = importlib.util.find_spec("torchvision")
    assert spec is not None and spec.submodule_search_locations, "torchvision is not installed"
    installed = Path(list(spec.submodule_search_locations)[0])
    shutil.copytree(
        installed,
        repo / "torchvision",
        ignore=shutil.ignore_patterns("__pycache__", "version.py"),
    )
    # The wheel's bundled libraries (libjpeg, libpng, ...): the extensions' RUNPATH has $ORIGIN.
    bundled = installed.parent / "torchvision.libs"
    if bundled.is_dir():
        for library in bundled.iterdir():
            shutil.copy2(library, repo / "torchvision" / library.name)
    (repo / "version.py.in").write_text((installed / "version.py").read_text())
    assert re.search(r"^git_version = ", (repo / "version.py.in").read_text(), flags=re.M)
    (repo / "setup.py").write_text(_TORCHVISION_SETUP.format(version=LOCAL_TORCHVISION_VERSION))
    (repo / ".gitignore").write_text("torchvision/version.py\nbuild/\n*.egg-info/\n")
    return commit_all(repo, "torchvision, repackaged", tag=tag)


def make_package_repo(
    repo: Path, package: str = "apex", version: str = "0.1", *, broken_extension: bool = False
) -> str:
    """A small package ``package`` with an ``amp`` subpackage; its commit's hash.

    ``broken_extension`` adds a C extension with a syntax error, so building fails in the
    compiler, the way a real source build fails.
    """
    (repo / package / "amp").mkdir(parents=True)
    (repo / package / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (repo / package / "amp" / "__init__.py").write_text("OPT_LEVELS = ('O0', 'O1', 'O2', 'O3')\n")
    extension = ""
    if broken_extension:
        (repo / "broken.c").write_text("int broken(void) {\n    return 0 +;\n}\n")
        extension = f", ext_modules=[Extension({package + '._broken'!r}, ['broken.c'])]"
    (repo / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        f"setup(name={package!r}, version={version!r}, "
        f"packages=[{package!r}, {package + '.amp'!r}]{extension})\n"
    )
    return commit_all(repo, f"{package} {version}", tag=f"v{version}")

"""Result and state files are written all-or-nothing, through nettebench.vocabulary.atomic.

- A library build's folder is swapped into place: a build step killed at any point of the swap
  leaves at the output path the complete old tree or the complete new one, and a rerun
  completes. The kills are real (``os._exit`` from an audit hook in a real ``python -m
  nettebench builds clone`` process, before the k-th file operation on the build's folder), not
  raised exceptions.
- The study file, the code manifests, steps.csv and the pyperf files go through
  :func:`~nettebench.vocabulary.atomic.open_atomic`: a write whose flush to disk fails leaves
  the old file as it was and nothing beside it.
- No module of the package writes a file directly outside a short, explained list.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import errno
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nettebench.records import files, spread
from nettebench.report import steps_export
from nettebench.study import code_groups, stored
from nettebench.vocabulary import atomic
from tests.library_repos import commit_all, git
from tests.record_factory import make_cell
from tests.workflow_helpers import REPO

SCRIPTS = REPO / "scripts"
KILLED = 86  # the exit status of a child killed by the hook, told apart from a failure

# A build step with an audit hook that ends the process at once, as SIGKILL would, before its
# k-th file operation on the build's folder: every rename, folder created, file opened to
# write, tree deletion begun, and the second deletion inside a tree deletion (one entry gone:
# a torn tree). The child prints how many it saw when it ends by itself.
_CHILD = r"""
import os, sys
from nettebench.builds import build
from nettebench.vocabulary import atomic

kill_at, swap, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if swap == "renames":  # a system where renameat2 cannot swap (another OS, NFS, a sandbox)
    atomic._exchange = lambda first, second: False
seen = 0
deleted_in_tree = None

def _inside(path):
    return isinstance(path, (str, os.PathLike)) and os.fspath(path).startswith(root)

def hook(event, args):
    global seen, deleted_in_tree
    counted = False
    if event == "shutil.rmtree" and _inside(args[0]):
        deleted_in_tree, counted = 0, True
    elif event in ("os.remove", "os.rmdir") and deleted_in_tree is not None:
        deleted_in_tree += 1
        counted = deleted_in_tree == 2
    elif event == "os.rename" or (event == "os.mkdir" and _inside(args[0])):
        counted = True
    elif event == "open" and _inside(args[0]) and args[1] and set(str(args[1])) & set("wax+"):
        counted = True
    if counted:
        seen += 1
        if seen == kill_at:
            os._exit(86)

sys.addaudithook(hook)
code = build.main(sys.argv[4:])
print(f"operations {seen}", file=sys.stderr)
sys.exit(code)
"""


@pytest.fixture(scope="module")
def two_commits(tmp_path_factory):
    """A repository whose tag ``a`` and ``b`` check out different trees: (repo, a, b)."""
    repo = tmp_path_factory.mktemp("swap") / "repo"
    repo.mkdir()
    (repo / "module.py").write_text("VERSION = 'a'\n")
    (repo / "only_in_a.txt").write_text("a\n")
    first = commit_all(repo, "a", tag="a")
    (repo / "module.py").write_text("VERSION = 'b'\n")
    (repo / "only_in_a.txt").unlink()
    (repo / "sub").mkdir()
    (repo / "sub" / "only_in_b.txt").write_text("b\n")
    second = commit_all(repo, "b", tag="b")
    git(repo, "checkout", "--quiet", "--detach", first)  # the work tree is not what is cloned
    return repo, first, second


def _clone(repo: Path, ref: str, base: Path, swap: str, kill_at: int = 0):
    command = ["clone", "--library", "apex", "--build", "x", "--repo", str(repo), "--ref", ref]
    command += ["--src", str(base / "src"), "--manifest", str(base / "source.json")]
    return subprocess.run(
        [sys.executable, "-c", _CHILD, str(kill_at), swap, str(base), *command],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SCRIPTS)},
    )


def _tree(folder: Path) -> tuple[str, frozenset[str], dict[str, str]] | None:
    """What a checkout holds: (HEAD, every path in it, the work tree's files); None if absent."""
    if not folder.is_dir():
        return None
    paths = frozenset(str(p.relative_to(folder)) for p in folder.rglob("*"))
    files = {
        str(p.relative_to(folder)): p.read_text()
        for p in folder.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(folder).parts
    }
    head = (folder / ".git" / "HEAD").read_text().strip() if (folder / ".git").is_dir() else ""
    return head, paths, files


def _exchange_works(tmp_path: Path) -> bool:
    first, second = tmp_path / "probe-1", tmp_path / "probe-2"
    first.mkdir()
    second.mkdir()
    try:
        return atomic._exchange(first, second)
    finally:
        atomic.remove_tree(first)
        atomic.remove_tree(second)


@pytest.mark.parametrize("swap", ["exchange", "renames"])
def test_a_build_step_killed_anywhere_in_the_swap_leaves_a_whole_tree(two_commits, tmp_path, swap):
    """Clone ``a``, then clone ``b`` over it and kill the step before each of its file operations
    in turn. With the one-step swap the output path holds the whole ``a`` or the whole ``b`` the
    moment the process dies; with two renames it may hold nothing for an instant, and what the
    next run does first (:func:`~nettebench.vocabulary.atomic.recover_tree`) puts ``a`` back.
    Either way the rerun then completes with ``b`` and leaves nothing else beside it."""
    if swap == "exchange" and not _exchange_works(tmp_path):
        pytest.skip("this filesystem cannot swap two folders in one step (renameat2)")
    repo, first, second = two_commits
    reference = {}
    for ref in ("a", "b"):
        done = _clone(repo, ref, tmp_path / f"reference-{ref}", swap)
        assert done.returncode == 0, done.stderr
        reference[ref] = _tree(tmp_path / f"reference-{ref}" / "src")
    assert reference["a"][0] == first and reference["b"][0] == second
    assert reference["a"][2] != reference["b"][2]

    base = tmp_path / "build"
    done = _clone(repo, "b", tmp_path / "count", swap)
    operations = int(done.stderr.rsplit("operations ", 1)[1].split()[0])
    assert done.returncode == 0 and operations >= 4, done.stderr
    outcomes, deaths = [], []
    for kill_at in range(1, operations + 1):
        atomic.remove_tree(base)
        assert _clone(repo, "a", base, swap).returncode == 0
        killed = _clone(repo, "b", base, swap, kill_at)
        assert killed.returncode == KILLED, killed.stderr
        at_death = _tree(base / "src")
        deaths.append(at_death)
        if swap == "exchange":
            assert at_death in (reference["a"], reference["b"]), f"killed at {kill_at}"
        atomic.recover_tree(base / "src")
        recovered = _tree(base / "src")
        assert recovered in (reference["a"], reference["b"]), f"killed at {kill_at}"
        outcomes.append("a" if recovered == reference["a"] else "b")
        rerun = _clone(repo, "b", base, swap)
        assert rerun.returncode == 0, rerun.stderr
        assert _tree(base / "src") == reference["b"]
        assert sorted(p.name for p in base.iterdir()) == ["source.json", "src"]
    # The kills fell on both sides of the swap, and between the two renames where there are two.
    assert outcomes[0] == "a" and outcomes[-1] == "b", outcomes
    assert (None in deaths) == (swap == "renames")


def test_the_next_work_folder_puts_back_a_tree_set_aside_and_drops_the_other_leftovers(tmp_path):
    """What a kill between install_tree's two renames leaves (no ``tree``, the whole old one
    aside) goes back; an aside of a tree that is in place, and a tree killed while being
    deleted, go."""
    (tmp_path / ".stale-tree-0123abcd").mkdir()
    (tmp_path / ".stale-tree-0123abcd" / "image.jpg").write_text("the old tree")
    (tmp_path / "kept").mkdir()
    (tmp_path / ".stale-kept-89abcdef").mkdir()
    (tmp_path / ".doomed-gone-0123abcd").mkdir()
    work = atomic.make_work_dir(tmp_path, ".work-")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([work.name, "kept", "tree"])
    assert (tmp_path / "tree" / "image.jpg").read_text() == "the old tree"


# -- files: every writer goes through open_atomic ------------------------------------------------


class FlushFailed(OSError):
    pass


def _through_open_atomic(monkeypatch, *, fail: bool) -> list[Path]:
    """Record every path written through :func:`~nettebench.vocabulary.atomic.open_atomic`;
    with ``fail``, make each such write fail at its end, as a full disk or an I/O error at the
    flush would."""
    real = atomic.open_atomic
    asked: list[Path] = []

    @contextlib.contextmanager
    def recorded(path):
        asked.append(Path(path))
        with real(path) as handle:
            yield handle
            if fail:
                raise FlushFailed(errno.ENOSPC, "no space left (the test's)")

    monkeypatch.setattr(atomic, "open_atomic", recorded)
    return asked


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_the_study_file_is_written_through_open_atomic(tmp_path, monkeypatch):
    path = tmp_path / "study.yaml"
    path.write_text("# the last run's study\n")
    asked = _through_open_atomic(monkeypatch, fail=True)
    with pytest.raises(FlushFailed):
        stored.save({"datasets": ["d"]}, path)
    assert asked == [path]
    assert _files(tmp_path) == {"study.yaml": b"# the last run's study\n"}  # nothing beside


def test_a_code_manifest_is_written_through_open_atomic(tmp_path, monkeypatch):
    path = tmp_path / "figures.sha256"
    path.write_text("0" * 64 + "  report/old.py\n")
    asked = _through_open_atomic(monkeypatch, fail=True)
    with pytest.raises(FlushFailed):
        code_groups.write_manifest("figures", path)
    assert asked == [path]
    assert _files(tmp_path) == {"figures.sha256": b"0" * 64 + b"  report/old.py\n"}


def test_steps_csv_and_the_pyperf_files_are_written_through_open_atomic(tmp_path, monkeypatch):
    metrics = make_cell(
        tmp_path / "results", kind="cpu_baseline", epochs=1, batch_size=32,
        summary_extra={"steps_per_epoch": 3, "steps_timed": 3, "batch_size_used": 32},
    )  # fmt: skip
    with open(metrics.parent / files.EPOCHS_FILE, newline="") as handle:
        (row,) = csv.DictReader(handle)  # the epoch's steps, as the trainer keeps them
    row.update(step_ms=spread.step_ms_text([0.010, 0.011, 0.012]), train_images=96)
    files.write_epochs(metrics.parent, [row])
    out = tmp_path / "out"
    steps_csv, pyperf_dir = out / "steps.csv", out / "pyperf"
    asked = _through_open_atomic(monkeypatch, fail=False)
    lines = list(steps_export.export([metrics], steps_csv, pyperf_dir))
    (pyperf,) = pyperf_dir.rglob("*.json")
    assert sorted(asked) == sorted([steps_csv, pyperf]), lines
    written = _files(out)
    assert set(written) == {"steps.csv", str(pyperf.relative_to(out))}

    asked = _through_open_atomic(monkeypatch, fail=True)
    with pytest.raises(FlushFailed):
        list(steps_export.export([metrics], steps_csv, pyperf_dir))
    assert asked == [steps_csv, pyperf]  # the pyperf file's write failed inside steps.csv's
    assert _files(out) == written


# -- no direct writes ---------------------------------------------------------------------------

PACKAGE = SCRIPTS / "nettebench"
# The modules that still write files directly, and what; a new one fails the test below.
DIRECT_WRITERS = {
    # Logs, appended as commands run and read by a person: never a result.
    "builds/build.py": "the step's log",
    # Files written into a work folder that is then swapped in whole (install_tree).
    "builds/packages.py": "the environment's manifest, inside its work folder",
    "datasets/synthetic.py": "the images, inside the work folder",
    # A protocol of their own: streamed to a temporary name, then renamed into place.
    "datasets/fetch.py": "a download, streamed to <archive>.part",
    "data/store_build.py": "the store's arrays, filled by workers in a work folder",
    "check/runner.py": "case logs; table.md, cases.jsonl, records.tar.gz through .part files",
    # Not converted yet (found while converting the four writers of issue 59).
    "check/cli.py": "the stack's JSON",
    "report/figures/plotting.py": "the figures (matplotlib's savefig)",
    "benchmarks/ddp_plain.py": "the plain-DDP benchmark's JSON",
}


_WRITE_MODE = re.compile(r"^[rbt]*[wax+][rwaxbt+]*$")


def _writes_directly(node: ast.Call) -> bool:
    """A call that writes a file without open_atomic: ``open(..., "w")`` (or a/x),
    ``.write_text``, ``.write_bytes``, ``os.replace``, ``os.rename``, ``json.dump``,
    ``np.save``, ``.savefig``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in ("write_text", "write_bytes", "replace", "rename", "dump", "save", "savefig"):
        if name in ("replace", "rename"):
            return isinstance(func, ast.Attribute) and getattr(func.value, "id", "") == "os"
        if name in ("dump", "save"):
            owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
            return owner in ("json", "np", "numpy", "yaml", "pickle")
        return True
    if name == "open":  # open(path, "w"), path.open("w"), gzip.open(path, "wt")
        modes = [*node.args, *(k.value for k in node.keywords if k.arg == "mode")]
        return any(
            isinstance(m, ast.Constant) and isinstance(m.value, str) and _WRITE_MODE.match(m.value)
            for m in modes
        )
    return False


def test_no_module_writes_a_file_outside_vocabulary_atomic_but_the_listed_ones():
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(PACKAGE))
        if name == "vocabulary/atomic.py":
            continue
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.Call) and _writes_directly(n) for n in ast.walk(tree)):
            found.add(name)
    assert found == set(DIRECT_WRITERS), (
        f"write these through nettebench.vocabulary.atomic: {sorted(found - set(DIRECT_WRITERS))}"
        f"; no longer direct writers (drop them from the list): "
        f"{sorted(set(DIRECT_WRITERS) - found)}"
    )

"""Clone, build and install a library from source, one step per workflow rule.

The study built torchvision (``git clone pytorch/vision; python setup.py install``) and NVIDIA
apex from source by hand. These are the same steps, made safe to repeat::

    python -m nettebench builds clone --library torchvision --build v0.29.1 \\
        --repo https://github.com/pytorch/vision --ref v0.29.1 --src SRC --manifest source.json
    python -m nettebench builds wheel --src SRC --source source.json --out-dir WHEEL \\
        --manifest wheel.json
    python -m nettebench builds install --wheel-manifest wheel.json --wheel-dir WHEEL \\
        --prefix PREFIX --manifest install.json

- **clone** fetches one ref (branch, tag or commit) of a repository (URL or local path), shallow
  where the server allows, and records the commit it resolved to. A ref that is not in the
  repository fails naming the branches and tags it has; a repository that cannot be reached
  fails saying so and pointing to a local clone as ``repo:``.
- **wheel** runs ``pip wheel --no-build-isolation --no-deps`` on the checkout, so the wheel is
  compiled against the torch installed here (the one the trainer imports), and records it.
- **install** installs the wheel with ``pip install --no-deps --target`` into a prefix of its
  own, which the trainer puts first on its import path
  (:func:`nettebench.builds.activate.activate`), and writes
  :data:`nettebench.vocabulary.build_catalog.BUILD_MANIFEST` into it.

Each step works in a temporary folder beside its output and swaps it into place only when it
succeeded (:func:`nettebench.vocabulary.atomic.install_tree`), so a failed or killed step leaves
nothing half-made and the output folder holds the complete old tree or the complete new one.
Every command's output goes to ``--log``; on failure the last lines (a compiler's error, git's
complaint) are printed as well, so they show in Snakemake's error and not only in the log.

Imports nothing heavy: git and pip run as subprocesses.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import install_tree, recover_tree, write_text_atomic
from nettebench.vocabulary.build_catalog import BUILD_MANIFEST, LIBRARIES, is_url

TAIL_LINES = 40  # lines of a failed command's output shown in the error
# What git prints when it cannot reach a remote at all (as opposed to a missing ref or repo).
_NETWORK_SIGNS = (
    "could not resolve host",
    "failed to connect",
    "couldn't connect",
    "network is unreachable",
    "connection timed out",
    "connection refused",
    "temporary failure in name resolution",
    "could not read from remote repository",
)
_MISSING_REF = "couldn't find remote ref"
_HEX_REF = re.compile(r"^[0-9a-f]{7,40}$")
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": ""}  # never prompt


class BuildError(RuntimeError):
    """A step failed; the message says why and what to do."""


class _Log:
    """Appends every command's output to the step's log file."""

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path = Path(path) if path else None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("", encoding="utf-8")

    def note(self, text: str) -> None:
        if self.path:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(text.rstrip("\n") + "\n")

    def run(
        self, command: Sequence[Any], *, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        """Run ``command``; its output goes to the log and is returned (never raises)."""
        self.note("$ " + " ".join(map(str, command)))
        result = subprocess.run(
            [str(c) for c in command],
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        self.note(result.stdout)
        if result.returncode:
            self.note(f"(exit status {result.returncode})")
        return result


def tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


# ----------------------------------------------------------------------------------------- clone


def clone(
    library: str, build: str, repo: str, ref: str, src: Path, manifest: Path, log: _Log
) -> dict[str, Any]:
    """Check out ``ref`` of ``repo`` into ``src``; write and return the source manifest."""
    src, manifest = Path(src), Path(manifest)
    if not is_url(repo):
        repo = str(Path(repo).expanduser().resolve())  # git resolves it from the new clone
    tmp = _fresh_tmp(src)
    try:
        commit, shallow = _fetch(repo, ref, tmp, log)
        checkout = log.run(["git", "-C", tmp, "checkout", "--quiet", "--detach", commit])
        if checkout.returncode:
            raise BuildError(f"git checkout of {commit} failed:\n{tail(checkout.stdout)}")
        _replace(tmp, src)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    record = {
        "library": library,
        "build": build,
        "repo": repo,
        "ref": ref,
        "commit": commit,
        "shallow": shallow,
        "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_text_atomic(manifest, json.dumps(record, indent=2) + "\n")
    log.note(f"{library} {build}: {repo} {ref} -> {commit}")
    return record


def _fetch(repo: str, ref: str, tmp: Path, log: _Log) -> tuple[str, bool]:
    """Fetch ``ref`` into a new repository at ``tmp``; (commit, whether the fetch was shallow)."""
    for command in (
        ["git", "init", "--quiet", tmp],
        ["git", "-C", tmp, "remote", "add", "origin", repo],
    ):
        result = log.run(command, env=_GIT_ENV)
        if result.returncode:
            raise BuildError(f"{' '.join(map(str, command))} failed:\n{tail(result.stdout)}")
    # One ref, shallow: a tag, a branch, or (where the server allows it) a full commit hash.
    fetched = log.run(["git", "-C", tmp, "fetch", "--depth", "1", "origin", ref], env=_GIT_ENV)
    if fetched.returncode == 0:
        return _resolve(tmp, "FETCH_HEAD", log), True
    _raise_if_unreachable(repo, fetched.stdout)
    if _MISSING_REF not in fetched.stdout.lower() and not _HEX_REF.match(ref):
        raise BuildError(f"git could not fetch {ref!r} from {repo}:\n{tail(fetched.stdout)}")
    if _HEX_REF.match(ref):
        # An abbreviated commit (or a server that refuses single commits): fetch everything.
        everything = log.run(
            ["git", "-C", tmp, "fetch", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*"],
            env=_GIT_ENV,
        )
        if everything.returncode:
            _raise_if_unreachable(repo, everything.stdout)
            raise BuildError(f"git could not fetch {repo}:\n{tail(everything.stdout)}")
        found = log.run(["git", "-C", tmp, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
        if found.returncode == 0:
            return found.stdout.strip(), False
    raise BuildError(_bad_ref_message(repo, ref, log))


def _resolve(repo_dir: Path, name: str, log: _Log) -> str:
    result = log.run(["git", "-C", repo_dir, "rev-parse", "--verify", f"{name}^{{commit}}"])
    if result.returncode:
        raise BuildError(f"git fetched {name} but it is no commit:\n{tail(result.stdout)}")
    return result.stdout.strip()


def _raise_if_unreachable(repo: str, output: str) -> None:
    text = output.lower()
    if is_url(repo) and any(sign in text for sign in _NETWORK_SIGNS):
        raise BuildError(
            f"cannot reach {repo}: no network here, or the host is down ({tail(output, 3)}). "
            "Clone the repository where there is a network (`git clone "
            f"{repo} /path/to/clone`), copy the clone here and give its path as the build's "
            "`repo:` in the config's `builds:` section; the clone then works offline."
        )
    if not is_url(repo) and "does not appear to be a git repository" in text:
        raise BuildError(f"{repo} is not a git repository (the build's `repo:`): {tail(output, 3)}")


def _bad_ref_message(repo: str, ref: str, log: _Log) -> str:
    """Name the refs the repository has, so a typo is easy to see."""
    listing = log.run(["git", "ls-remote", "--heads", "--tags", repo], env=_GIT_ENV)
    branches, tags = [], []
    for line in listing.stdout.splitlines() if listing.returncode == 0 else []:
        name = line.split("\t")[-1]
        if name.startswith("refs/heads/"):
            branches.append(name.removeprefix("refs/heads/"))
        elif name.startswith("refs/tags/") and not name.endswith("^{}"):
            tags.append(name.removeprefix("refs/tags/"))
    shown_tags = tags[-15:]  # ls-remote sorts by name; the last ones are usually the newest
    return (
        f"ref {ref!r} is not a branch, tag or commit of {repo}. "
        f"Branches: {', '.join(branches[:15]) or 'none'}"
        f"{' ...' if len(branches) > 15 else ''}; tags: "
        f"{'... ' if len(tags) > 15 else ''}{', '.join(shown_tags) or 'none'}. "
        "Fix the build's `ref:` in the config's `builds:` section."
    )


# ----------------------------------------------------------------------------------------- wheel


def build_wheel(
    src: Path,
    source_manifest: Path,
    out_dir: Path,
    manifest: Path,
    log: _Log,
    *,
    env: Mapping[str, str] | None = None,
    pip_args: Sequence[str] = (),
    jobs: int | None = None,
) -> dict[str, Any]:
    """Build one wheel of the checkout at ``src`` against the installed torch."""
    source = json.loads(Path(source_manifest).read_text(encoding="utf-8"))
    library = LIBRARIES[source["library"]]
    out_dir, manifest = Path(out_dir), Path(manifest)
    tmp = _fresh_tmp(out_dir)
    build_env = {**library.env, **dict(env or {})}
    if jobs:
        build_env.setdefault("MAX_JOBS", str(jobs))  # torch.utils.cpp_extension's parallelism
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--verbose",  # the compiler's output, in the log
        "--no-build-isolation",  # build against the torch installed here, not a fresh one
        "--no-deps",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--wheel-dir",
        str(tmp),
        *pip_args,
        str(Path(src).resolve()),
    ]
    started = time.perf_counter()
    try:
        result = log.run(command, env=build_env)
        if result.returncode:
            raise BuildError(
                f"building {library.name} {source['build']} ({source['repo']} at "
                f"{source['commit'][:12]}) failed; nothing was installed. The build's last "
                f"lines:\n{tail(result.stdout)}\n(full output: {log.path})"
            )
        wheels = sorted(tmp.glob("*.whl"))
        if len(wheels) != 1:
            raise BuildError(f"pip wheel made {len(wheels)} wheels in {tmp}, expected one")
        seconds = time.perf_counter() - started
        digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
        _replace(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    record = {
        **{key: source[key] for key in ("library", "build", "repo", "ref", "commit")},
        "wheel": wheels[0].name,
        "sha256": digest,
        "torch": _installed_version("torch"),
        "python": platform.python_version(),
        "env": dict(sorted(build_env.items())),
        "pip_args": list(pip_args),
        "build_s": round(seconds, 1),
    }
    write_text_atomic(manifest, json.dumps(record, indent=2) + "\n")
    log.note(f"built {wheels[0].name} in {seconds:.1f} s")
    return record


# --------------------------------------------------------------------------------------- install


def install(
    wheel_manifest: Path, wheel_dir: Path, prefix: Path, manifest: Path, log: _Log
) -> dict[str, Any]:
    """Install the wheel into a prefix of its own (no dependencies: torch stays the base one)."""
    built = json.loads(Path(wheel_manifest).read_text(encoding="utf-8"))
    library = LIBRARIES[built["library"]]
    wheel = Path(wheel_dir) / built["wheel"]
    prefix, manifest = Path(prefix), Path(manifest)
    tmp = _fresh_tmp(prefix)
    try:
        result = log.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--no-deps",
                "--no-index",
                "--disable-pip-version-check",
                "--target",
                tmp,
                wheel,
            ]
        )
        if result.returncode:
            raise BuildError(f"installing {wheel} failed:\n{tail(result.stdout)}")
        if not (tmp / library.package).is_dir():
            found = sorted(p.name for p in tmp.iterdir() if not p.name.endswith(".dist-info"))
            raise BuildError(
                f"{wheel.name} (from {built['repo']} at {built['ref']}) provides no "
                f"`{library.package}` package (it has: {', '.join(found) or 'nothing'}); is the "
                f"repository {library.name}'s?"
            )
        dists = list(importlib.metadata.distributions(path=[str(tmp)]))
        record = {
            **built,
            "package": library.package,
            "distribution": dists[0].metadata["Name"] if dists else None,
            "version": dists[0].version if dists else None,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        write_text_atomic(tmp / BUILD_MANIFEST, json.dumps(record, indent=2) + "\n")
        _replace(tmp, prefix)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_text_atomic(manifest, json.dumps(record, indent=2) + "\n")
    log.note(f"installed {library.name} {record['version']} into {prefix}")
    return record


# ---------------------------------------------------------------------------------------- shared


def _fresh_tmp(final: Path) -> Path:
    """An empty temporary folder beside ``final``, once what a killed run left is undone."""
    final.parent.mkdir(parents=True, exist_ok=True)
    recover_tree(final)
    for stale in final.parent.glob(f".{final.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    tmp.mkdir()
    return tmp


def _replace(tmp: Path, final: Path) -> None:
    """Swap a finished folder into place: ``final`` holds the whole old tree or the whole new
    one (:func:`~nettebench.vocabulary.atomic.install_tree`)."""
    install_tree(tmp, final)


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


# ------------------------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = commands.Parser(prog="python -m nettebench builds", description=__doc__)
    steps = parser.add_subparsers(dest="step", required=True)  # each a commands.Parser too

    step = steps.add_parser("clone", help="check out a ref of a repository")
    step.add_argument("--library", required=True, choices=sorted(LIBRARIES))
    step.add_argument("--build", required=True, help="the build's name in the config")
    step.add_argument("--repo", required=True, help="URL or local path")
    step.add_argument("--ref", required=True, help="branch, tag or commit")
    step.add_argument("--src", required=True, type=Path, help="checkout folder to create")
    step.add_argument("--manifest", required=True, type=Path, help="source.json to write")

    step = steps.add_parser("wheel", help="build a wheel against the installed torch")
    step.add_argument("--src", required=True, type=Path)
    step.add_argument("--source", required=True, type=Path, help="the clone's source.json")
    step.add_argument("--out-dir", required=True, type=Path, help="folder for the wheel")
    step.add_argument("--manifest", required=True, type=Path, help="wheel.json to write")
    step.add_argument("--jobs", type=int, default=None, help="parallel compile jobs (MAX_JOBS)")
    step.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="build environment"
    )
    step.add_argument(
        "--pip-arg", action="append", default=[], help="extra `pip wheel` argument (repeatable)"
    )

    step = steps.add_parser("install", help="install the wheel into a prefix of its own")
    step.add_argument("--wheel-manifest", required=True, type=Path)
    step.add_argument("--wheel-dir", required=True, type=Path)
    step.add_argument("--prefix", required=True, type=Path)
    step.add_argument("--manifest", required=True, type=Path, help="install.json to write")

    for sub in steps.choices.values():
        sub.add_argument("--log", type=Path, default=None, help="append command output here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return commands.run(build_parser(), _step, argv, errors=(BuildError,))


def _step(args: argparse.Namespace) -> Iterator[str]:
    """The step's line; a failure's line goes to the build's log too."""
    log = _Log(args.log)
    try:
        if args.step == "clone":
            record = clone(
                args.library, args.build, args.repo, args.ref, args.src, args.manifest, log
            )
            yield f"{args.library} {args.build}: {args.ref} -> {record['commit']}"
        elif args.step == "wheel":
            env = dict(_key_value(item) for item in args.env)
            record = build_wheel(
                args.src,
                args.source,
                args.out_dir,
                args.manifest,
                log,
                env=env,
                pip_args=args.pip_arg,
                jobs=args.jobs,
            )
            yield f"built {record['wheel']} in {record['build_s']} s"
        else:
            record = install(args.wheel_manifest, args.wheel_dir, args.prefix, args.manifest, log)
            yield f"installed {record['wheel']} into {args.prefix}"
    except BuildError as error:
        log.note(f"{commands.ERROR}{error}")
        raise


def _key_value(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise SystemExit(f"--env takes KEY=VALUE, got {item!r}")
    return key, value


if __name__ == "__main__":  # run as python -m nettebench builds clone
    sys.exit(commands.moved(__spec__.name))

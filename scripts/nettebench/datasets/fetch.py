"""Download an archive, verify it, and record what was fetched.

A benchmark that trains on a silently truncated or swapped dataset produces wrong numbers that
look right, so a download is only accepted when:

* the bytes match every expected value given (size, md5, sha256; hashed while streaming);
* the file is a complete, readable gzip tar (always; see :mod:`.verify`), which catches a
  truncated download even for a dataset with no published checksum.

Until then it lives at ``<out>.part``; only a verified file is renamed to ``<out>``, and a
manifest ``<out>.json`` (url, size, sha256, md5, checks passed, time) is written next to it.
Transient network failures are retried with a short backoff; a 404 or a missing local file is
not, since asking again will not help. When the URL cannot be reached the error tells the user
how to run anyway (a local copy via ``source:``, or a ``synthetic:`` dataset).

Command line::

    python -m nettebench datasets fetch --url URL --out PATH [--size N] [--md5 HEX]
        [--sha256 HEX] [--retries N] [--timeout S]
"""

from __future__ import annotations

import argparse
import http.client
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import write_json_atomic
from nettebench.vocabulary.dataset_errors import DatasetError

from .verify import CHUNK, Digests, check_expected, describe, scan_archive

USER_AGENT = "nettebench-fetch/1"
SCHEMES = ("http", "https", "file")
# HTTP statuses worth asking again for: server-side trouble and rate limiting.
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
# A local file that is not there (file:// URL) will not appear by retrying.
_PERMANENT_OS_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


class _Transient(Exception):
    """A failure that a later attempt may not hit (connection refused, 5xx, cut-off body)."""


class _Unreachable(Exception):
    """A failure that retrying will not fix (404, missing local file)."""


def fetch(
    url: str,
    out_path: str | os.PathLike[str],
    *,
    size: int | None = None,
    md5: str | None = None,
    sha256: str | None = None,
    retries: int = 3,
    timeout: float = 60,
    progress: bool | None = None,
    backoff: float = 1.0,
) -> dict[str, Any]:
    """Download ``url`` to ``out_path``, verify it, write ``<out_path>.json``; return that manifest.

    ``url`` is http(s)://, file://, or a plain local path. ``retries`` is how many times a
    transient failure is retried (so up to ``retries + 1`` attempts), waiting ``backoff``,
    ``2*backoff``, ... seconds in between. ``progress``: None shows a bar only when stderr is a
    terminal, True always, False never. On any failure nothing is left at ``out_path`` or its
    manifest that was not there before, and the ``.part`` file is removed.
    """
    url = _normalise_url(url)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".part")
    manifest_path = out.with_name(out.name + ".json")

    done = False
    try:
        digests = _download(
            url,
            part,
            retries=retries,
            timeout=timeout,
            progress=progress,
            backoff=backoff,
            label=out.name,
        )
        verified = check_expected(
            f"{out} (downloaded from {url})",
            actual_size=digests.size,
            actual_md5=digests.md5,
            actual_sha256=digests.sha256,
            size=size,
            md5=md5,
            sha256=sha256,
        )
        scan_archive(part, digests=False, label=f"{out} (downloaded from {url})")
        verified.append("tar")
        os.replace(part, out)
        done = True
    finally:
        if not done:
            part.unlink(missing_ok=True)

    manifest = {
        "url": url,
        "size": digests.size,
        "sha256": digests.sha256,
        "md5": digests.md5,
        "verified": verified,
        "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write_json_atomic(manifest_path, manifest)
    return manifest


def _normalise_url(url: str) -> str:
    """Accept the three URL schemes, and turn a plain existing path into a file:// URL."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme in SCHEMES:
        return url
    if not scheme:
        return Path(url).expanduser().resolve().as_uri()
    raise DatasetError(
        f"cannot fetch {url}: unsupported URL scheme {scheme!r} (use one of "
        f"{', '.join(s + '://' for s in SCHEMES)} or a local path)"
    )


def _download(
    url: str,
    part: Path,
    *,
    retries: int,
    timeout: float,
    progress: bool | None,
    backoff: float,
    label: str,
) -> Digests:
    """Stream ``url`` into ``part``, retrying transient failures; return the file's digests."""
    attempts = max(0, retries) + 1
    last = ""
    for attempt in range(1, attempts + 1):
        try:
            return _download_once(url, part, timeout=timeout, progress=progress, label=label)
        except _Unreachable as exc:
            raise DatasetError(_unreachable_message(url, str(exc), attempt)) from None
        except _Transient as exc:
            last = str(exc)
            if attempt < attempts:
                delay = backoff * 2 ** (attempt - 1)
                print(
                    f"fetch: {url}: {last}; retrying in {delay:g} s "
                    f"(attempt {attempt + 1} of {attempts})",
                    file=sys.stderr,
                )
                time.sleep(delay)
    raise DatasetError(_unreachable_message(url, last, attempts))


def _download_once(
    url: str, part: Path, *, timeout: float, progress: bool | None, label: str
) -> Digests:

    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    response = _open(request, timeout)
    with response:
        length = response.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        digests = Digests()
        disable = None if progress is None else not progress
        # Boundary (datasets/__init__.py): this module loads only the standard library when
        # imported, so tqdm comes in only when a download starts.
        from tqdm import tqdm

        with (
            _open_part(part) as sink,
            tqdm(
                total=total,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=label,
                disable=disable,
                leave=False,
            ) as bar,
        ):
            while True:
                try:
                    chunk = response.read(CHUNK)
                except (OSError, http.client.HTTPException) as exc:
                    raise _Transient(
                        f"connection lost after {digests.size} bytes ({describe(exc)})"
                    ) from exc
                if not chunk:
                    break
                digests.update(chunk)
                try:
                    sink.write(chunk)
                except OSError as exc:
                    raise DatasetError(f"could not write {part}: {exc}") from exc
                bar.update(len(chunk))
    if total is not None and digests.size != total:
        raise _Transient(f"incomplete read: got {digests.size} of {total} bytes")
    return digests


def _open(request: urllib.request.Request, timeout: float):
    """Open ``request``, sorting failures into worth-retrying and not."""
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        reason = f"HTTP {exc.code} {exc.reason}"
        if exc.code in RETRY_STATUSES:
            raise _Transient(reason) from exc
        raise _Unreachable(reason) from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, _PERMANENT_OS_ERRORS):
            raise _Unreachable(describe(exc.reason)) from exc
        raise _Transient(describe(exc.reason)) from exc
    except (OSError, http.client.HTTPException) as exc:
        raise _Transient(describe(exc)) from exc


def _open_part(part: Path):
    try:
        return open(part, "wb")
    except OSError as exc:
        raise DatasetError(f"could not write {part}: {exc}") from exc


def _unreachable_message(url: str, reason: str, attempts: int) -> str:
    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    return (
        f"could not reach {url} ({reason}) after {tries}. Two ways to run anyway: "
        "(1) get the archive some other way and set `source:` for this dataset in config.yaml to "
        "a local .tgz, a folder holding train/ and val/, or a file:// or http(s):// URL; or "
        "(2) benchmark on generated images with a `synthetic:` dataset in config.yaml"
    )


def main(argv: list[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench datasets fetch",
        description="Download an archive, verify it (size/md5/sha256 when given, gzip tar "
        "always) and write a manifest next to it.",
    )
    parser.add_argument("--url", required=True, help="http(s)://, file:// URL or local path")
    parser.add_argument("--out", required=True, help="where the verified archive goes")
    parser.add_argument("--size", type=int, help="expected size in bytes")
    parser.add_argument("--md5", help="expected md5 (hex)")
    parser.add_argument("--sha256", help="expected sha256 (hex)")
    parser.add_argument("--retries", type=int, default=3, help="retries of transient failures")
    parser.add_argument("--timeout", type=float, default=60, help="socket timeout in seconds")
    return commands.run(parser, _fetch, argv, errors=(DatasetError,), stream=sys.stdout)


def _fetch(args: argparse.Namespace) -> Iterator[str]:
    manifest = fetch(
        args.url,
        args.out,
        size=args.size,
        md5=args.md5,
        sha256=args.sha256,
        retries=args.retries,
        timeout=args.timeout,
    )
    yield (
        f"fetched {manifest['url']} -> {args.out} ({manifest['size']} bytes, sha256 "
        f"{manifest['sha256']}, verified: {', '.join(manifest['verified'])})"
    )


if __name__ == "__main__":  # run as python -m nettebench datasets fetch
    sys.exit(commands.moved(__spec__.name))

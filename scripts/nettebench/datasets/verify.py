"""Checks that an archive is the one expected and is a complete, readable gzip tar.

Shared by :mod:`.fetch` (after a download) and :mod:`.extract` (before unpacking), so both apply
the same rules and word their errors the same way. Two kinds of check:

* against known values (size, md5, sha256), when the catalog or the user supplies them;
* structural (always): the file is gzip, the tar inside lists every member to the end, and the
  gzip trailer's CRC and length match. This is what catches a truncated download of a dataset
  whose checksum nobody published (e.g. the study's original ``imagenette-320``).

Both are done in a single streaming pass where possible: a 1.5 GB archive is read once.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from nettebench.vocabulary.dataset_errors import DatasetError

CHUNK = 1 << 20
_END_MARKER = 2 * tarfile.BLOCKSIZE  # two zero blocks close every tar archive


@dataclass(frozen=True)
class ArchiveScan:
    """What one pass over an archive found: its size, digests and member count."""

    size: int
    md5: str | None
    sha256: str | None
    members: int


class Digests:
    """md5 + sha256 + byte count, updated chunk by chunk while a file streams past."""

    def __init__(self) -> None:
        self.size = 0
        self._md5 = hashlib.md5(usedforsecurity=False)
        self._sha256 = hashlib.sha256()

    def update(self, chunk: bytes) -> None:
        self.size += len(chunk)
        self._md5.update(chunk)
        self._sha256.update(chunk)

    @property
    def md5(self) -> str:
        return self._md5.hexdigest()

    @property
    def sha256(self) -> str:
        return self._sha256.hexdigest()


class _HashingReader:
    """A read-only file wrapper that counts the bytes it hands out and feeds them to digests."""

    def __init__(self, raw: BinaryIO, digests: Digests | None) -> None:
        self._raw = raw
        self._digests = digests
        self.name = getattr(raw, "name", "")
        self.mode = "rb"
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self._raw.read(size)
        self.count += len(chunk)
        if self._digests is not None and chunk:
            self._digests.update(chunk)
        return chunk

    def drain(self) -> None:
        while self.read(CHUNK):
            pass


def scan_archive(
    path: str | os.PathLike[str], *, digests: bool = True, label: str | None = None
) -> ArchiveScan:
    """Read ``path`` once: hash it (when ``digests``) and walk it as a gzip tar to the end.

    Raises DatasetError naming the file (``label``, default the path) when it is not gzip, the
    tar is damaged or truncated (a cut-off download fails here even when no checksum is known),
    or it holds no members.
    """
    path = Path(path)
    label = label or str(path)
    hashes = Digests() if digests else None
    try:
        with open(path, "rb") as raw:
            reader = _HashingReader(raw, hashes)
            with gzip.GzipFile(fileobj=reader, mode="rb") as gz:
                inner = _HashingReader(gz, None)
                members, data_end = 0, 0
                with tarfile.open(fileobj=inner, mode="r|", bufsize=CHUNK) as tar:
                    for member in tar:
                        members += 1
                        data_end = member.offset_data + _blocks(member.size)
                # The tar end-marker can come before the end of the gzip stream; read on to the
                # trailer so its CRC and length are checked too.
                inner.drain()
            reader.drain()
    except FileNotFoundError as exc:
        raise DatasetError(f"archive {label} does not exist") from exc
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DatasetError(
            f"{label} is not a complete gzip-compressed tar archive ({describe(exc)}); "
            "the file is truncated or corrupt: delete it and download (or re-create) it"
        ) from exc
    except OSError as exc:
        raise DatasetError(f"could not read archive {label}: {exc}") from exc
    if members and inner.count < data_end + _END_MARKER:
        # tarfile stops quietly at a cut-off header or member; a cut inside the gzip stream
        # already failed above. Every tar writer ends the archive with two zero blocks.
        raise DatasetError(
            f"{label} is not a complete tar archive: it stops {inner.count} bytes in, before the "
            f"end-of-archive marker after its last member at {data_end} bytes; the file is "
            "truncated: delete it and download (or re-create) it"
        )
    if members == 0:
        raise DatasetError(f"archive {label} is a valid tar but contains no files")
    size = hashes.size if hashes else path.stat().st_size
    return ArchiveScan(
        size=size,
        md5=hashes.md5 if hashes else None,
        sha256=hashes.sha256 if hashes else None,
        members=members,
    )


def check_expected(
    label: str,
    *,
    actual_size: int,
    actual_md5: str | None,
    actual_sha256: str | None,
    size: int | None = None,
    md5: str | None = None,
    sha256: str | None = None,
) -> list[str]:
    """Compare actual size/digests with the expected ones that are given; return checks passed.

    ``label`` names the file (and where it came from) in the error, which also states the
    check that failed with the expected and actual values.
    """
    passed = []
    for check, expected, actual in (
        ("size", size, actual_size),
        ("md5", md5, actual_md5),
        ("sha256", sha256, actual_sha256),
    ):
        if expected is None:
            continue
        if isinstance(expected, str):
            expected = expected.strip().lower()
        if actual != expected:
            unit = " bytes" if check == "size" else ""
            raise DatasetError(
                f"{label}: {check} check failed: expected {expected}{unit}, got {actual}{unit}. "
                "The file is corrupt or incomplete, or it changed upstream; fetch it again, and "
                "if the mismatch persists set `source:` for this dataset to a copy you trust"
            )
        passed.append(check)
    return passed


def _blocks(size: int) -> int:
    """Bytes a member's data occupies in a tar: its size rounded up to 512-byte blocks."""
    return -(-size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE


def describe(exc: BaseException) -> str:
    """An exception as one readable phrase: its type, and its message when it has one."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

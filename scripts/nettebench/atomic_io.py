"""Write a file so that a reader sees the old version or the new one, never half of it.

The workflow treats a file's existence as "this step finished" (dataset.json, metrics.json, a
checkpoint), so a job killed mid-write must not leave a torn file behind. Every writer builds the
file under a temporary name in the same folder (same filesystem, so the final ``os.replace`` is
atomic), flushes it to disk, and only then renames it into place. Standard library only.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` all-or-nothing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # open() (not mkstemp, which makes the file private) so the usual umask decides who reads it.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """``data`` as indented JSON (values JSON cannot hold written with ``str``)."""
    return write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")

"""What a device script may leave under ``$OUT``: the device tool brings back at most 8 files,
two folders down, so every script keeps its working folders under /tmp and leaves at most
:data:`LIMIT` files in ``$OUT`` (its summary and one tarball of everything else).

:func:`check` counts them at the end of a run and fails the run when there are more; the
``--smoke`` run of each script is where that is checked on a CPU.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

LIMIT = 7


def tar(target: Path, *folders: Path) -> None:
    """``folders`` (those that exist) into the gzipped tarball ``target``, each by its name."""
    with tarfile.open(target, "w:gz") as archive:
        for folder in folders:
            if folder.exists():
                archive.add(folder, arcname=folder.name)


def check(out: Path, limit: int = LIMIT) -> list[Path]:
    """Every file under ``out``; SystemExit naming them when there are more than ``limit``."""
    found = sorted(path for path in Path(out).rglob("*") if path.is_file())
    print(f"$OUT holds {len(found)} file(s) (at most {limit}):", *(p.name for p in found))
    if len(found) > limit:
        raise SystemExit(
            f"{len(found)} files under {out}, more than the {limit} the device tool brings "
            f"back: {', '.join(str(p.relative_to(out)) for p in found)}"
        )
    return found

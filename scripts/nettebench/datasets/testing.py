"""Real, tiny stand-ins for the things the dataset layer talks to, for tests.

* :func:`make_image_tree` writes an Imagenette-shaped folder of a few small JPEGs;
* :func:`make_tgz` packs a folder into a .tgz the way fast.ai's archives are laid out;
* :class:`LocalHTTPServer` serves bytes over real HTTP on 127.0.0.1, with scripted failures
  (a 500 before success, a body cut short) and a per-path request count.

They live in the package, not in a test file, so the workflow's end-to-end tests can exercise the
download path against the same server. Nothing here is imported by the production modules.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from PIL import Image

TINY_CLASSES = ("n01440764", "n02102040", "n02979186")


def make_image_tree(
    root: str | os.PathLike[str],
    *,
    classes: Sequence[str] = TINY_CLASSES,
    train_per_class: int = 2,
    val_per_class: int = 1,
    size: int = 16,
) -> Path:
    """Write ``root/{train,val}/<class>/<class>_<i>.JPEG`` with tiny solid-colour JPEGs."""

    root = Path(root)
    for split, count in (("train", train_per_class), ("val", val_per_class)):
        for k, name in enumerate(classes):
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                colour = (40 * k % 256, 80 + 20 * i, 200 - 30 * k % 200)
                Image.new("RGB", (size + i, size), colour).save(
                    folder / f"{name}_{i}.JPEG", "JPEG", quality=90
                )
    return root


def make_tgz(
    source: str | os.PathLike[str],
    archive: str | os.PathLike[str],
    *,
    arcname: str | None = None,
    extra: Iterable[tuple[tarfile.TarInfo, bytes | None]] = (),
) -> Path:
    """Pack folder ``source`` as ``arcname/...`` (default: its own name) into gzip tar ``archive``.

    ``extra`` adds hand-made members after the folder (e.g. a ``../evil`` entry), each a
    TarInfo and its data (None for links and folders).
    """
    source, archive = Path(source), Path(archive)
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname=source.name if arcname is None else arcname)
        for info, data in extra:
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return archive


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP reply: status, body, and (to cut a body short) a larger Content-Length."""

    status: int = 200
    body: bytes = b""
    declared_length: int | None = None


class LocalHTTPServer:
    """A threaded HTTP server on 127.0.0.1 serving scripted replies per path.

    ``routes`` maps a path to bytes (always 200) or to a list of :class:`Reply`, used in order
    for successive requests, the last repeating. Unknown paths get 404. ``hits`` counts requests
    per path. Use as a context manager; ``url(path)`` gives the full URL.
    """

    def __init__(self, routes: Mapping[str, bytes | Sequence[Reply]] | None = None) -> None:
        self.routes: dict[str, bytes | Sequence[Reply]] = dict(routes or {})
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
                reply = server._reply(self.path)
                self.send_response(reply.status)
                length = len(reply.body) if reply.declared_length is None else reply.declared_length
                self.send_header("Content-Length", str(length))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                self.wfile.write(reply.body)
                if reply.declared_length is not None:
                    self.close_connection = True

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def _reply(self, path: str) -> Reply:
        with self._lock:
            count = self.hits[path]
            self.hits[path] += 1
        route = self.routes.get(path)
        if route is None:
            return Reply(404, b"not found")
        if isinstance(route, bytes):
            return Reply(200, route)
        return route[min(count, len(route) - 1)]

    def url(self, path: str) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{path}"

    def __enter__(self) -> LocalHTTPServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

"""Downloads through a real HTTP server on 127.0.0.1 and real file:// URLs; no mocks."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
from datetime import datetime

import pytest

from nettebench.datasets.fetch import fetch, main
from nettebench.datasets.testing import LocalHTTPServer, Reply, make_image_tree, make_tgz
from nettebench.vocabulary.dataset_errors import DatasetError


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    """A proxy configured on the machine must not intercept requests to the test server."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture(scope="module")
def archive_bytes(tmp_path_factory) -> bytes:
    base = tmp_path_factory.mktemp("archive")
    tree = make_image_tree(base / "tiny-nette", train_per_class=3, val_per_class=2, size=24)
    return make_tgz(tree, base / "tiny-nette.tgz").read_bytes()


@pytest.fixture
def server(archive_bytes):
    half = archive_bytes[: len(archive_bytes) // 2]
    routes = {
        "/good.tgz": archive_bytes,
        "/truncated.tgz": half,
        "/flaky.tgz": [Reply(500, b"boom"), Reply(200, archive_bytes)],
        "/cut.tgz": [
            Reply(200, half, declared_length=len(archive_bytes)),
            Reply(200, archive_bytes),
        ],
        "/down.tgz": [Reply(503, b"unavailable")],
        "/page.tgz": b"<html>Access denied</html>",
    }
    with LocalHTTPServer(routes) as running:
        yield running


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir())


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def test_good_download_is_verified_and_recorded(server, archive_bytes, tmp_path):
    out = tmp_path / "dl" / "tiny.tgz"
    manifest = fetch(
        server.url("/good.tgz"),
        out,
        size=len(archive_bytes),
        md5=_md5(archive_bytes),
        sha256=hashlib.sha256(archive_bytes).hexdigest(),
        progress=False,
    )
    assert out.read_bytes() == archive_bytes
    assert manifest["verified"] == ["size", "md5", "sha256", "tar"]
    assert manifest["url"] == server.url("/good.tgz")
    assert manifest["size"] == len(archive_bytes)
    assert manifest["sha256"] == hashlib.sha256(archive_bytes).hexdigest()
    assert manifest["md5"] == _md5(archive_bytes)
    assert datetime.fromisoformat(manifest["fetched_at"]).utcoffset().total_seconds() == 0
    assert json.loads((tmp_path / "dl" / "tiny.tgz.json").read_text()) == manifest
    assert _leftovers(tmp_path / "dl") == ["tiny.tgz", "tiny.tgz.json"]
    assert server.hits["/good.tgz"] == 1


def test_without_known_checksum_the_sha256_is_recorded_and_tar_checked(
    server, archive_bytes, tmp_path
):
    manifest = fetch(server.url("/good.tgz"), tmp_path / "a.tgz", progress=False)
    assert manifest["verified"] == ["tar"]
    assert manifest["sha256"] == hashlib.sha256(archive_bytes).hexdigest()


def test_truncated_archive_fails_the_tar_check_and_leaves_nothing(server, tmp_path):
    with pytest.raises(DatasetError) as caught:
        fetch(server.url("/truncated.tgz"), tmp_path / "t.tgz", retries=0, progress=False)
    message = str(caught.value)
    assert server.url("/truncated.tgz") in message
    assert "truncated" in message
    assert _leftovers(tmp_path) == []


def test_non_archive_body_fails_the_tar_check(server, tmp_path):
    with pytest.raises(DatasetError, match="not a complete gzip-compressed tar"):
        fetch(server.url("/page.tgz"), tmp_path / "p.tgz", progress=False)
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("check", ["size", "md5", "sha256"])
def test_checksum_mismatch_names_file_check_expected_and_actual(
    server, archive_bytes, tmp_path, check
):
    actual = {
        "size": len(archive_bytes),
        "md5": _md5(archive_bytes),
        "sha256": hashlib.sha256(archive_bytes).hexdigest(),
    }
    wrong = {"size": len(archive_bytes) + 1, "md5": "0" * 32, "sha256": "f" * 64}[check]
    with pytest.raises(DatasetError) as caught:
        fetch(server.url("/good.tgz"), tmp_path / "bad.tgz", progress=False, **{check: wrong})
    message = str(caught.value)
    assert "bad.tgz" in message
    assert f"{check} check failed" in message
    assert str(wrong) in message and str(actual[check]) in message
    assert _leftovers(tmp_path) == []
    assert server.hits["/good.tgz"] == 1  # a wrong checksum is not a network problem


def test_404_is_not_retried_and_points_to_source_and_synthetic(server, tmp_path):
    with pytest.raises(DatasetError) as caught:
        fetch(server.url("/missing.tgz"), tmp_path / "m.tgz", retries=3, backoff=0, progress=False)
    message = str(caught.value)
    assert "could not reach" in message and "404" in message
    assert "source:" in message and "synthetic:" in message
    assert server.hits["/missing.tgz"] == 1
    assert _leftovers(tmp_path) == []


def test_server_error_once_is_retried(server, archive_bytes, tmp_path, capsys):
    fetch(server.url("/flaky.tgz"), tmp_path / "f.tgz", retries=2, backoff=0, progress=False)
    assert (tmp_path / "f.tgz").read_bytes() == archive_bytes
    assert server.hits["/flaky.tgz"] == 2
    assert "HTTP 500" in capsys.readouterr().err


def test_body_cut_short_is_retried(server, archive_bytes, tmp_path):
    fetch(server.url("/cut.tgz"), tmp_path / "c.tgz", retries=2, backoff=0, progress=False)
    assert (tmp_path / "c.tgz").read_bytes() == archive_bytes
    assert server.hits["/cut.tgz"] == 2


def test_persistent_server_error_gives_up_after_the_retries(server, tmp_path):
    with pytest.raises(DatasetError) as caught:
        fetch(server.url("/down.tgz"), tmp_path / "d.tgz", retries=2, backoff=0, progress=False)
    assert "after 3 attempts" in str(caught.value)
    assert "HTTP 503" in str(caught.value)
    assert server.hits["/down.tgz"] == 3
    assert _leftovers(tmp_path) == []


def test_connection_refused_is_reported_as_unreachable(tmp_path):
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/x.tgz"
    with pytest.raises(DatasetError) as caught:
        fetch(url, tmp_path / "x.tgz", retries=1, backoff=0, timeout=5, progress=False)
    message = str(caught.value)
    assert f"could not reach {url}" in message
    assert "source:" in message and "synthetic:" in message
    assert _leftovers(tmp_path) == []


def test_file_url_and_plain_path(archive_bytes, tmp_path):
    src = tmp_path / "src" / "tiny.tgz"
    src.parent.mkdir()
    src.write_bytes(archive_bytes)
    by_url = fetch(src.as_uri(), tmp_path / "a.tgz", md5=_md5(archive_bytes), progress=False)
    by_path = fetch(str(src), tmp_path / "b.tgz", progress=False)
    assert by_url["verified"] == ["md5", "tar"]
    assert by_path["url"] == src.as_uri()
    assert (tmp_path / "b.tgz").read_bytes() == archive_bytes


def test_missing_file_url_is_unreachable_not_retried(tmp_path):
    url = (tmp_path / "nope.tgz").as_uri()
    with pytest.raises(DatasetError) as caught:
        fetch(url, tmp_path / "out.tgz", retries=3, backoff=10, progress=False)
    assert "after 1 attempt" in str(caught.value)
    assert "source:" in str(caught.value)


def test_unsupported_scheme_is_refused(tmp_path):
    with pytest.raises(DatasetError, match="unsupported URL scheme 'ftp'"):
        fetch("ftp://example.org/x.tgz", tmp_path / "x.tgz")


def test_cli_success_and_error_lines(server, archive_bytes, tmp_path, capsys):
    out = tmp_path / "cli.tgz"
    assert (
        main(["--url", server.url("/good.tgz"), "--out", str(out), "--md5", _md5(archive_bytes)])
        == 0
    )
    assert "verified: md5, tar" in capsys.readouterr().out
    status = main(
        ["--url", server.url("/nope.tgz"), "--out", str(tmp_path / "n.tgz"), "--retries", "0"]
    )
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("error: could not reach") and "Traceback" not in err


def test_cli_runs_as_a_module(server, tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "nettebench",
            "datasets",
            "fetch",
            "--url",
            server.url("/truncated.tgz"),
            "--out",
            str(tmp_path / "t.tgz"),
            "--retries",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr

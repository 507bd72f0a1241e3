"""Fixtures for the solver tests: local channels (file://), loopback HTTP(S) servers, and a
runner for the `solver` CLI in a child process with a clean, GPU-less environment (the command as
users run it; its solves run in a child interpreter of their own, solver.worker)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import local_channels as channel_factory  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_overrides(monkeypatch):
    """No CONDA_OVERRIDE_* from the caller's environment: each test states its target itself.
    Test files that plan for a target use it for every test: pytestmark = usefixtures(...)."""
    for name in ("CONDA_OVERRIDE_CUDA", "CONDA_OVERRIDE_CUDA_ARCH", "CONDA_OVERRIDE_GLIBC"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def kb():
    """The solver's knowledge tables (solver/knowledge)."""
    from solver.knowledge import load

    return load()


@pytest.fixture(scope="session")
def table():
    """PyTorch's wheel indexes (solver/knowledge/pytorch_wheels.yaml)."""
    from solver.pytorch_wheels import load_wheels

    return load_wheels()


@pytest.fixture(scope="session")
def local_channel(tmp_path_factory) -> Path:
    """conda-forge-shaped records plus every pointops build, in one indexed channel."""
    root = tmp_path_factory.mktemp("channel")
    records = channel_factory.conda_forge_records() + channel_factory.pointops_records()
    return channel_factory.write_channel(root, records)


@pytest.fixture(scope="session")
def channel_without_cuda13_pointops(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("channel_no130")
    records = channel_factory.conda_forge_records(("linux-64",)) + channel_factory.pointops_records(
        ("linux-64",), variants=("cpu", "cuda129")
    )
    return channel_factory.write_channel(root, records)


@pytest.fixture(scope="session")
def aarch64_channel(tmp_path_factory) -> Path:
    """linux-aarch64 records of conda-forge's shape: sbsa and tegra CUDA 12.9, sbsa CUDA 13.0."""
    root = tmp_path_factory.mktemp("channel_aarch64")
    return channel_factory.write_channel(
        root, channel_factory.linux_aarch64_records() + channel_factory.pointops_aarch64_records()
    )


@pytest.fixture(scope="session")
def aarch64_channel_before_rebuild(tmp_path_factory) -> Path:
    """The same, with pytorch 2.13.0 CUDA 13.0 only in builds 0 and 1 (no SASS for Jetson Orin's 8.7)."""
    root = tmp_path_factory.mktemp("channel_aarch64_old")
    return channel_factory.write_channel(
        root,
        channel_factory.linux_aarch64_records(cuda130_build=1) + channel_factory.pointops_aarch64_records(),
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@dataclass
class Server:
    url: str
    server: http.server.ThreadingHTTPServer


def _serve(directory: Path, context: ssl.SSLContext | None = None) -> Server:
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    scheme = "http"
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return Server(url=f"{scheme}://127.0.0.1:{server.server_address[1]}", server=server)


@pytest.fixture(scope="session")
def http_channel(local_channel):
    served = _serve(local_channel)
    yield served.url
    served.server.shutdown()


@pytest.fixture(scope="session")
def empty_http_root(tmp_path_factory):
    """A server that answers 404 for every channel path."""
    served = _serve(tmp_path_factory.mktemp("empty"))
    yield served.url
    served.server.shutdown()


@pytest.fixture
def refused_url():
    """A loopback port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def tls_channel(local_channel, tmp_path_factory):
    """The channel over HTTPS with a certificate from a private CA; yields (url, ca_file)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make a private CA")
    d = tmp_path_factory.mktemp("tls")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = functools.partial(subprocess.run, check=True, capture_output=True, cwd=d)
    run(
        [
            openssl,
            "req",
            "-x509",
            *ec,
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]
    )
    run([openssl, "req", *ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=127.0.0.1"])
    (d / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    run(
        [
            openssl,
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ]
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(d / "leaf.pem", d / "leaf.key")
    served = _serve(local_channel, context)
    yield served.url, d / "ca.pem"
    served.server.shutdown()


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict:
        return json.loads(self.stdout)


@pytest.fixture
def solver_cli(tmp_path):
    """Run `python -m solver ...` in a child process with a clean GPU-less environment."""

    def run(*args: str, env: dict[str, str | None] | None = None, timeout: float = 60) -> Result:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("CONDA_OVERRIDE_")
            and k.upper() not in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
        }
        base["PATH"] = os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"  # no nvidia-smi
        base["RATTLER_CACHE_DIR"] = str(tmp_path / "rattler-cache")
        for key, value in (env or {}).items():  # None removes a variable
            if value is None:
                base.pop(key, None)
            else:
                base[key] = value
        done = subprocess.run(
            [sys.executable, "-m", "solver", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=base,
            cwd=REPO,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    return run

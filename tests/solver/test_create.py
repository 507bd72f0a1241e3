"""`solver make-env --create PREFIX`: plan, solve, install with py-rattler, check, put in place.

The channel is conda-forge's metadata (tests/conda_forge_standins.py) with real content where the
environment runs it, as tests/recipes/standin_toolchain.py makes it for rattler-build: `python` is
a venv-style prefix over this interpreter, `pytorch`/`libtorch` link this interpreter's torch, and
`pointops` links the pointops wheel installed here. It is served over loopback HTTP by a server
that counts the package downloads and can hold one back (to interrupt an install midway).
"""

from __future__ import annotations

import functools
import http.server
import importlib.metadata
import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "recipes"), str(HERE)]
import conda_forge_standins as standins  # noqa: E402
import local_channels  # noqa: E402
from recipe_stub_channels import index  # noqa: E402

from solver import create  # noqa: E402
from solver.create_install import describe_install_failure  # noqa: E402
from solver.errors import SolverError  # noqa: E402

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
ON_LINUX_64 = sys.platform.startswith("linux") and os.uname().machine == "x86_64"


def _installed_pointops():
    """The pointops wheel installed in this environment (not a source tree on PYTHONPATH)."""
    for dist in importlib.metadata.distributions(name="pointops"):
        if str(dist._path).endswith(".dist-info"):
            return dist
    return None


needs_installed_pointops = pytest.mark.skipif(
    not ON_LINUX_64 or _installed_pointops() is None,
    reason="needs linux-64 and the pointops wheel installed here (tests/run.sh installs it)",
)


def _pointops_files(site: str) -> dict:
    dist = _installed_pointops()
    files: dict[str, object] = {f"{site}/pointops": ("symlink", str(dist.locate_file("pointops")))}
    dist_info = Path(dist._path)
    for item in sorted(dist_info.rglob("*")):
        if item.is_file() and item.name != "RECORD":
            files[f"{site}/{dist_info.name}/{item.relative_to(dist_info)}"] = item.read_bytes()
    return files


def _write_pointops(channel: Path, with_files: bool) -> None:
    """pointops' cpu and cuda129 builds (both this machine's pointops: the CUDA one is only run on
    the CPU here); without files they get build strings of their own, so that a package cache
    holding the working ones does not serve them instead."""
    import standin_toolchain

    for rec in local_channels.pointops_records(("linux-64",), variants=("cpu", "cuda129")):
        files = _pointops_files(standin_toolchain.SITE) if with_files else None
        if not with_files:
            rec["build"], rec["build_number"] = rec["build"].split("_")[0] + "_hnofiles_1", 1
        name = f"{rec['name']}-{rec['version']}-{rec['build']}.tar.bz2"
        (channel / "linux-64" / name).write_bytes(standins.package_archive(rec, files))


@pytest.fixture(scope="module")
def working_channel(tmp_path_factory) -> Path:
    """python, pytorch (CPU and CUDA 12.9, both this machine's torch) and pointops that run here,
    with conda-forge's metadata."""
    if not ON_LINUX_64 or _installed_pointops() is None:
        pytest.skip("needs linux-64 and the pointops wheel installed here")
    import standin_toolchain

    root = standin_toolchain.write_toolchain_channel(
        tmp_path_factory.mktemp("create-ch"), ("2.13.0",), cuda_versions=("12.9",)
    )
    _write_pointops(root, with_files=True)
    index(root)
    return root


@pytest.fixture(scope="module")
def broken_channel(working_channel, tmp_path_factory) -> Path:
    """The same, but its pointops package holds no files: the environment installs, pointops does
    not import."""
    root = tmp_path_factory.mktemp("create-broken") / "ch"
    shutil.copytree(working_channel, root)
    for stale in [*root.glob("linux-64/pointops-*"), *root.glob("*/repodata.json")]:
        stale.unlink()
    _write_pointops(root, with_files=False)
    index(root)
    return root


@pytest.fixture(scope="module")
def channel_missing_pointops(working_channel, tmp_path_factory) -> Path:
    """Indexed with pointops, whose archive was then deleted: its download fails with a 404."""
    root = tmp_path_factory.mktemp("create-404") / "ch"
    shutil.copytree(working_channel, root)
    for archive in (root / "linux-64").glob("pointops-*.tar.bz2"):
        archive.unlink()
    return root


class Served:
    """A channel on loopback HTTP that records the package archives asked for, and holds back
    those whose name starts with `hold` until `release` is set."""

    def __init__(self, root: Path, hold: str | None = None):
        self.archives: list[str] = []
        self.hold, self.held, self.release = hold, threading.Event(), threading.Event()
        served = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                name = self.path.rsplit("/", 1)[-1]
                if name.endswith((".tar.bz2", ".conda")):
                    served.archives.append(name)
                    if served.hold and name.startswith(served.hold):
                        served.held.set()
                        served.release.wait(60)
                super().do_GET()

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that went away (an interrupted install) is not the server's error

        self.server = Server(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.release.set()
        self.server.shutdown()


@pytest.fixture
def serve():
    servers = []

    def start(root: Path, hold: str | None = None) -> Served:
        servers.append(Served(root, hold))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _env(tmp_path: Path, pkgs: Path | None = None, **extra: str) -> dict[str, str]:
    """A clean environment: no CONDA_* of the caller, no proxy, no nvidia-smi, private caches."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CONDA_") and k.upper() not in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
    }
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"
    env["RATTLER_CACHE_DIR"] = str(tmp_path / "rattler-cache")
    env["CONDA_PKGS_DIRS"] = str(pkgs or tmp_path / "pkgs")
    env.update(extra)
    return env


def _command(url: str, prefix: Path, *more: str) -> list[str]:
    return [
        sys.executable, "-m", "solver", "make-env", "--gpu", "none", "--python", PY,
        "--channel", url, "--create", str(prefix), *more,
    ]  # fmt: skip


def _run(cmd: list[str], env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def _error_line(done) -> str:
    """The one error line a failure prints (progress lines before it are allowed)."""
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return errors[0]


def _leftovers(prefix: Path) -> list[str]:
    """Hidden staging or moved-aside directories beside PREFIX."""
    return sorted(p.name for p in prefix.parent.glob(f".{prefix.name}.*"))


def _runs_pointops(prefix: Path) -> list:
    code = (
        "import json, torch, pointops; "
        "xyz = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]]]); "
        "print(json.dumps(pointops.furthest_point_sample(xyz, 2).tolist()))"
    )
    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-I", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- end to end ----------------------------------------------------------------------------------


@pytest.mark.slow
@needs_installed_pointops
def test_create_end_to_end(working_channel, serve, tmp_path):
    served = serve(working_channel)
    prefix = tmp_path / "envs" / "pointops"  # the parent does not exist yet either
    done = _run(_command(served.url, prefix), _env(tmp_path, CONDA_OVERRIDE_CUDA=""))
    assert done.returncode == 0, done.stderr
    assert _runs_pointops(prefix) == [[0, 3]]
    records = {p.name.rsplit("-", 2)[0] for p in (prefix / "conda-meta").glob("*.json")}
    assert {"python", "pytorch", "libtorch", "pointops"} <= records
    files = prefix / "conda-meta" / "solver"
    assert "pointops=0.1.0=cpu*" in (files / "env.yml").read_text()
    assert "@EXPLICIT" in (files / "explicit.txt").read_text()
    assert "/linux-64/pointops-0.1.0-cpu_" in (files / "rattler.lock").read_text()
    assert _leftovers(prefix) == []
    # stderr is a log here: plain progress lines, no carriage returns, then what was checked
    assert "\r" not in done.stderr
    assert "downloaded pytorch" in done.stderr and "linked" in done.stderr
    assert "checked: pointops 0.1.0 ran furthest_point_sample on cpu" in done.stderr
    assert f"created {prefix}" in done.stderr
    assert done.stdout == ""


@pytest.mark.slow
@needs_installed_pointops
def test_second_environment_downloads_nothing(working_channel, serve, tmp_path):
    served = serve(working_channel)
    pkgs = tmp_path / "shared-pkgs"
    first = _run(_command(served.url, tmp_path / "one", "--json"), _env(tmp_path, pkgs))
    assert first.returncode == 0, first.stderr
    fetched = len(served.archives)
    assert fetched > 0 and json.loads(first.stdout)["created"]["downloaded"] == fetched
    (tmp_path / "two").mkdir()  # an empty directory is taken, as a new one is
    second = _run(_command(served.url, tmp_path / "two", "--json"), _env(tmp_path, pkgs))
    assert second.returncode == 0, second.stderr
    assert len(served.archives) == fetched  # nothing more was asked of the server
    created = json.loads(second.stdout)["created"]
    assert created["downloaded"] == 0 and created["package_cache"] == [str(pkgs)]
    assert _runs_pointops(tmp_path / "two") == [[0, 3]]


@pytest.mark.slow
@needs_installed_pointops
def test_progress_on_a_terminal_is_one_rewritten_line(working_channel, serve, tmp_path):
    served = serve(working_channel)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        _command(served.url, tmp_path / "env"),
        stdout=subprocess.PIPE,
        stderr=follower,
        env=_env(tmp_path),
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed with the last writer
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=240)
    os.close(leader)
    shown = b"".join(chunks).decode()
    assert proc.returncode == 0, shown
    assert "\r\x1b[Ksolver make-env: downloaded " in shown
    assert "downloaded pytorch (" not in shown  # the per-package lines are for logs
    assert "/20 packages (" in shown or " packages (" in shown


@pytest.mark.slow
@needs_installed_pointops
def test_a_gpu_stated_by_conda_override_cuda_is_installed_for_but_not_checked(
    working_channel, serve, tmp_path
):
    """A cluster's login node makes the environment for its GPU nodes: CONDA_OVERRIDE_CUDA states
    the driver, the CUDA builds are installed, and the GPU check is left to the GPU node."""
    served = serve(working_channel)
    prefix = tmp_path / "env"
    cmd = _command(served.url, prefix, "--json")
    cmd[cmd.index("--gpu") + 1] = "auto"
    done = _run(cmd, _env(tmp_path, CONDA_OVERRIDE_CUDA="12.9", CONDA_OVERRIDE_CUDA_ARCH="8.6"))
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    builds = {p["name"]: p["build"] for p in document["solution"]}
    assert builds["pytorch"].startswith("cuda129_") and builds["pointops"].startswith("cuda129_")
    (note,) = document["created"]["not_checked"]
    assert "the GPU was not checked: CONDA_OVERRIDE_CUDA" in note and f"--prefix {prefix}" in note
    assert "warning: the GPU was not checked" in done.stderr
    assert _runs_pointops(prefix) == [[0, 3]]


# -- failures leave nothing that looks usable ---------------------------------------------------


@pytest.mark.slow
@needs_installed_pointops
def test_failed_check_is_reported_and_nothing_is_left(broken_channel, serve, tmp_path):
    served = serve(broken_channel)
    prefix = tmp_path / "env"
    done = _run(_command(served.url, prefix), _env(tmp_path))
    assert done.returncode == 1
    line = _error_line(done)
    assert "failed its check" in line and "pointops" in line and "No module named 'pointops'" in line
    assert f"nothing was left at {prefix}" in line
    assert not prefix.exists() and _leftovers(prefix) == []


@pytest.mark.slow
@needs_installed_pointops
def test_failed_download_is_one_line_and_nothing_is_left(channel_missing_pointops, serve, tmp_path):
    served = serve(channel_missing_pointops)
    prefix = tmp_path / "env"
    done = _run(_command(served.url, prefix, "--json"), _env(tmp_path))
    assert done.returncode == 1
    line = _error_line(done)
    assert "downloading " in line and "pointops-0.1.0-cpu_" in line and "404" in line
    assert json.loads(done.stdout)["errors"] == [line.split(": error: ", 1)[1]]
    assert not prefix.exists() and _leftovers(prefix) == []


def _wait_for_linked_package(prefix: Path, timeout: float = 60) -> None:
    """Until the hidden staging prefix holds a linked package: the install is midway."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(prefix.parent.glob(f".{prefix.name}.creating-*/conda-meta/*.json")):
            return
        time.sleep(0.05)
    pytest.fail("the install never linked a package")


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


@pytest.mark.slow
@needs_installed_pointops
@pytest.mark.parametrize("how", ["ctrl-c", "install child killed"])
def test_interrupted_install_leaves_nothing(working_channel, serve, tmp_path, how):
    served = serve(working_channel, hold="pointops-")
    prefix = tmp_path / "env"
    # Ctrl-C as a terminal delivers it: a test runner started as a background job (as CI may be)
    # passes SIGINT down ignored, and Python then never raises KeyboardInterrupt
    proc = subprocess.Popen(
        _command(served.url, prefix), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(tmp_path), preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        assert served.held.wait(120), "the install never asked for pointops"
        _wait_for_linked_package(prefix)
        if how == "ctrl-c":
            proc.send_signal(signal.SIGINT)
        else:
            (child,) = _children(proc.pid)
            assert b"solver.create_install" in Path(f"/proc/{child}/cmdline").read_bytes()
            os.kill(child, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=180)
    finally:
        served.release.set()
        if proc.poll() is None:
            proc.kill()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
    line = _error_line(done)
    if how == "ctrl-c":
        assert proc.returncode == 130 and "interrupted" in line
    else:
        assert proc.returncode == 1 and "the install stopped (signal 9 (SIGKILL))" in line
    assert f"nothing was left at {prefix}" in line
    assert not prefix.exists() and _leftovers(prefix) == []


# -- an existing PREFIX ---------------------------------------------------------------------------


@pytest.mark.slow
@needs_installed_pointops
def test_force_replaces_an_environment_only_once_the_new_one_works(
    working_channel, broken_channel, serve, tmp_path
):
    good, broken = serve(working_channel), serve(broken_channel)
    prefix = tmp_path / "env"
    env = _env(tmp_path)
    assert _run(_command(good.url, prefix), env).returncode == 0
    (prefix / "old-marker").write_text("from the first environment")

    again = _run(_command(good.url, prefix), env)
    assert again.returncode == 2
    assert "already holds a conda environment; pass --force" in _error_line(again)

    failed = _run(_command(broken.url, prefix, "--force"), env)
    assert failed.returncode == 1 and "failed its check" in _error_line(failed)
    assert (prefix / "old-marker").exists()  # the old environment was never touched
    assert _runs_pointops(prefix) == [[0, 3]]

    replaced = _run(_command(good.url, prefix, "--force", "--json"), env)
    assert replaced.returncode == 0, replaced.stderr
    assert json.loads(replaced.stdout)["created"]["replaced"] is True
    assert not (prefix / "old-marker").exists()
    assert _runs_pointops(prefix) == [[0, 3]]
    assert _leftovers(prefix) == []


def _make_env_cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "solver", "make-env", *args], _env(tmp_path), timeout=60)


@pytest.mark.parametrize("force", [False, True])
def test_a_directory_that_is_not_an_environment_is_never_replaced(tmp_path, force):
    prefix = tmp_path / "project"
    prefix.mkdir()
    (prefix / "notes.txt").write_text("mine")
    done = _make_env_cli(
        "--gpu", "none", "--create", str(prefix), *(["--force"] if force else []), tmp_path=tmp_path
    )
    assert done.returncode == 2
    assert "holds files that are not a conda environment" in _error_line(done)
    assert sorted(p.name for p in prefix.iterdir()) == ["notes.txt"]


def test_a_conda_installation_is_never_replaced(tmp_path):
    prefix = tmp_path / "miniconda3"
    for sub in ("conda-meta", "envs/other/conda-meta", "pkgs"):
        (prefix / sub).mkdir(parents=True)
    done = _make_env_cli("--gpu", "none", "--create", str(prefix), "--force", tmp_path=tmp_path)
    assert done.returncode == 2
    assert "conda installation (envs/, pkgs/)" in _error_line(done)
    assert (prefix / "envs" / "other" / "conda-meta").is_dir()


def test_the_active_environment_is_never_replaced(tmp_path):
    prefix = tmp_path / "active"
    (prefix / "conda-meta").mkdir(parents=True)
    env = _env(tmp_path, CONDA_PREFIX=str(prefix))
    done = _run(
        [sys.executable, "-m", "solver", "make-env", "--gpu", "none", "--create", str(prefix), "--force"], env
    )
    assert done.returncode == 2 and "the active environment" in _error_line(done)


def test_a_file_or_a_symlink_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for name, words in (("file", "is a file"), ("link", "is a symbolic link")):
        done = _make_env_cli("--gpu", "none", "--create", str(tmp_path / name), "--force", tmp_path=tmp_path)
        assert done.returncode == 2 and words in _error_line(done)
    assert (tmp_path / "file").read_text() == "x" and (tmp_path / "link").is_symlink()


# -- another machine, other flags: usage errors before any work ------------------------------------


def _other_platform() -> str:
    from solver.detect import host_platform

    return "win-64" if host_platform() != "win-64" else "linux-64"


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--gpu", "none", "--platform", "OTHER"], "installs for this machine"),
        (["--gpu", "RTX 4090", "--driver", "550.54.14"], "--gpu 'RTX 4090' names one"),
        (["--gpu", "8.6"], "--gpu '8.6' names one"),
        (["--gpu", "none", "--offline"], "drop --offline"),
        (["--gpu", "none", "--format", "pip"], "--format pip prints a file"),
        (["--gpu", "none", "-o", "env.yml"], "drop -o"),
        (["--gpu", "none", "--lock", "env.lock"], "drop --lock"),
    ],
)
def test_create_for_another_machine_or_with_conflicting_flags_is_a_usage_error(tmp_path, flags, words):
    flags = [f.replace("OTHER", _other_platform()) for f in flags]
    prefix = tmp_path / "env"
    done = _make_env_cli(*flags, "--create", str(prefix), tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert words in _error_line(done)
    assert not prefix.exists() and _leftovers(prefix) == []


def test_force_without_create_is_a_usage_error(tmp_path):
    done = _make_env_cli("--gpu", "none", "--offline", "--force", tmp_path=tmp_path)
    assert done.returncode == 2 and "--force only applies to --create" in _error_line(done)


def test_create_needs_a_path(tmp_path):
    done = _make_env_cli("--gpu", "none", "--create", "", tmp_path=tmp_path)
    assert done.returncode == 2 and "--create" in _error_line(done)


# -- pieces ----------------------------------------------------------------------------------------


def test_package_cache_follows_conda_pkgs_dirs_then_rattler(tmp_path):
    assert create.package_cache_dirs({"CONDA_PKGS_DIRS": f"{tmp_path}/a, {tmp_path}/b"}) == [
        f"{tmp_path}/a",
        f"{tmp_path}/b",
    ]
    assert create.package_cache_dirs({"RATTLER_CACHE_DIR": str(tmp_path)}) == [f"{tmp_path}/pkgs"]
    assert create.package_cache_dirs({"CONDA_PKGS_DIRS": " , "}) == create.package_cache_dirs({})
    if sys.platform.startswith("linux"):
        assert create.package_cache_dirs({"XDG_CACHE_HOME": str(tmp_path)}) == [
            f"{tmp_path}/rattler/cache/pkgs"
        ]


def test_install_failures_become_one_line_with_the_fix():
    full = describe_install_failure(
        "failed to link pytorch-2.13.0\nCaused by: No space left on device (os error 28)", "/p", "/pkgs"
    )
    assert full.startswith("the disk is full (No space left on device (os error 28))")
    assert "CONDA_PKGS_DIRS" in full and "\n" not in full
    fetched = describe_install_failure(
        "failed to fetch x-1-0.tar.bz2\nCaused by: HTTP status server error (503) for url (http://h/x-1-0.tar.bz2)",
        "/p",
        "/pkgs",
    )
    assert fetched.startswith("downloading http://h/x-1-0.tar.bz2 failed (HTTP status server error (503))")
    denied = describe_install_failure("io error\nCaused by: Permission denied (os error 13)", "/p", "/pkgs")
    assert "permission denied" in denied and "/pkgs" in denied


def test_with_packages_are_read_from_their_specs():
    args = SimpleNamespace(**{"with": ["mmcv<2.2", "conda-forge::timm >=1", "mmcv"]})
    assert create.with_packages(args) == ["mmcv", "timm"]
    assert create.with_packages(SimpleNamespace()) == []
    checks = create.extra_checks(["mmcv", "open3d-cpu"])
    assert checks[0]["module"] == "mmcv.ops" and "nms" in checks[0]["op"]
    assert checks[1] == {"package": "open3d-cpu", "module": "open3d_cpu", "op": ""}


def _run_check(tmp_path: Path, torch_stub: str, request: dict) -> list[dict]:
    """solver/create_check.py against a stand-in torch module, as the new environment runs it."""
    (tmp_path / "stub").mkdir(exist_ok=True)
    (tmp_path / "stub" / "torch.py").write_text(torch_stub)
    script = Path(create.__file__).with_name("create_check.py")
    done = subprocess.run(
        [sys.executable, "-B", str(script), json.dumps(request)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(tmp_path / "stub")},
    )  # fmt: skip
    marker = "solver-create-check: "
    return [json.loads(line[len(marker) :]) for line in done.stdout.splitlines() if line.startswith(marker)]


_TORCH_STUB = """
__version__ = "2.13.0"
class version:
    cuda = {cuda!r}
class cuda:
    @staticmethod
    def is_available():
        return {available}
    @staticmethod
    def device_count():
        return 0
"""


@pytest.mark.parametrize(
    "cuda, available, words",
    [
        (None, False, "is a CPU build, but a GPU was planned"),
        ("12.9", False, "torch.cuda.is_available() is False"),
    ],
)
def test_check_fails_when_a_planned_gpu_is_not_usable(tmp_path, cuda, available, words):
    results = _run_check(tmp_path, _TORCH_STUB.format(cuda=cuda, available=available), {"gpu": True})
    by_check = {r["check"]: r for r in results}
    assert by_check["torch"]["ok"] is True
    assert by_check["gpu"]["ok"] is False and words in by_check["gpu"]["detail"]
    assert "pointops" not in by_check  # not run without a usable torch
    assert results[-1] == {"check": "done"}


def test_check_reports_a_torch_that_does_not_import(tmp_path):
    results = _run_check(tmp_path, "raise OSError('libtorch_cpu.so: cannot open shared object file')", {})
    torch = next(r for r in results if r["check"] == "torch")
    assert torch["ok"] is False and "OSError: libtorch_cpu.so" in torch["detail"]


def _venv_prefix(root: Path, modules: dict[str, str]) -> Path:
    """A prefix whose python is this interpreter (venv-style) and whose site-packages holds
    `modules` ({name: source}), as the check sees a new environment."""
    base = Path(sys._base_executable)
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(base)
    (root / "pyvenv.cfg").write_text(f"home = {base.parent}\ninclude-system-site-packages = false\n")
    site = root / "lib" / f"python{PY}" / "site-packages"
    site.mkdir(parents=True)
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source)
    return root


_CPU_OUTCOME = SimpleNamespace(plan=SimpleNamespace(target=SimpleNamespace(has_gpu=False, source="flags")))
_POINTOPS_STUB = "def furthest_point_sample(xyz, k):\n    return xyz\n__version__ = 'stub'\n"
_TORCH_PRINTS = (
    "print('1'); print('{\"check\": 1}'); print('[]')\n"
    + _TORCH_STUB.format(cuda=None, available=False)
    + "def tensor(data, device=None):\n    return Rows(data)\nclass Rows(list):\n    def cpu(self):\n        return self\n    def tolist(self):\n        return [[0, 3]]\n"
)


@pytest.mark.skipif(os.name != "posix", reason="a venv-style prefix with bin/python")
def test_check_ignores_what_packages_print_and_names_the_crash(tmp_path):
    from solver.create import _check

    prefix = _venv_prefix(tmp_path / "ok", {"torch": _TORCH_PRINTS, "pointops": _POINTOPS_STUB})
    passed = _check(prefix, tmp_path / "final", _CPU_OUTCOME, [])
    assert passed[-1] == "pointops stub ran furthest_point_sample on cpu"

    crashing = {
        "torch": _TORCH_PRINTS,
        "pointops": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    }
    prefix = _venv_prefix(tmp_path / "crash", crashing)
    with pytest.raises(SolverError) as caught:
        _check(prefix, tmp_path / "final", _CPU_OUTCOME, [])
    message = caught.value.one_line()
    assert "python stopped (signal 11 (SIGSEGV)) after: torch 2.13.0 (CUDA none) imports" in message
    assert f"nothing was left at {tmp_path / 'final'}" in message

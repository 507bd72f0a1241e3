"""make-env end to end against local channels over file://, loopback HTTP and HTTPS: real
py-rattler solves, the verification, env.yml / JSON / explicit / lock output, and the one-line
errors for unreachable channels."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

GPU_4090 = ("--gpu", "RTX 4090", "--driver", "550.54.14", "--platform", "linux-64")


def test_gpu_target_solves_over_file_channel(solver_cli, local_channel):
    result = solver_cli("make-env", *GPU_4090, "--channel", str(local_channel), "--json")
    assert result.returncode == 0, result.stderr
    doc = result.json
    assert doc["verified"] is True and doc["errors"] == []
    solution = {entry["name"]: entry for entry in doc["solution"]}
    assert solution["pytorch"]["build"].startswith("cuda129_")
    assert solution["pytorch"]["version"] == "2.13.0"
    assert solution["libtorch"]["build"].startswith("cuda129_")
    assert solution["pointops"]["build"].startswith("cuda129_")
    assert solution["cuda-version"]["version"] == "12.9"
    assert solution["python"]["version"].startswith("3.14")
    assert doc["driver_compatibility"] == "mvc"


def test_env_yml_from_a_solve_over_http(solver_cli, http_channel, tmp_path):
    out = tmp_path / "env.yml"
    result = solver_cli("make-env", *GPU_4090, "--channel", http_channel, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    text = out.read_text()
    assert "# Verified by a solve" in text
    env = yaml.safe_load(text)
    assert env["name"] == "pointops"
    assert env["channels"] == [http_channel]
    assert env["dependencies"] == [
        "python=3.14",
        "pytorch=2.13.*=cuda129*",
        "cuda-version=12.9",
        "pointops=0.1.0=cuda129*",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["env.yml"]  # no temp file left behind


def test_newest_cuda_when_the_driver_allows(solver_cli, local_channel):
    result = solver_cli(
        "make-env",
        "--gpu",
        "H200",
        "--driver",
        "580.159.04",
        "--platform",
        "linux-64",
        "--channel",
        str(local_channel),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    solution = {e["name"]: e for e in result.json["solution"]}
    assert solution["pytorch"]["build"].startswith("cuda130_")
    assert solution["cuda-version"]["version"] == "13.0"


def test_cpu_target_solves_to_cpu_builds(solver_cli, local_channel):
    result = solver_cli(
        "make-env",
        "--gpu",
        "none",
        "--platform",
        "linux-64",
        "--python",
        "3.12",
        "--channel",
        str(local_channel),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    solution = {e["name"]: e for e in result.json["solution"]}
    assert solution["pytorch"]["build"].startswith("cpu_")
    assert solution["pointops"]["build"].startswith("cpu_")
    assert "cuda-version" not in solution
    assert solution["python"]["version"].startswith("3.12")


def test_windows_uses_cuda_128(solver_cli, local_channel):
    result = solver_cli(
        "make-env",
        "--gpu",
        "RTX 5090",
        "--driver",
        "572.61",
        "--platform",
        "win-64",
        "--channel",
        str(local_channel),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    solution = {e["name"]: e for e in result.json["solution"]}
    assert solution["pytorch"]["build"].startswith("cuda128_")
    assert solution["cuda-version"]["version"] == "12.8"
    assert all(e["url"].split("/")[-2] in ("win-64", "noarch") for e in result.json["solution"])


def test_explicit_and_lock_files(solver_cli, local_channel, tmp_path):
    explicit, lock = tmp_path / "env.txt", tmp_path / "env.lock"
    result = solver_cli(
        "make-env",
        *GPU_4090,
        "--channel",
        str(local_channel),
        "--explicit",
        str(explicit),
        "--lock",
        str(lock),
    )
    assert result.returncode == 0, result.stderr
    lines = explicit.read_text().splitlines()
    assert "@EXPLICIT" in lines and "# platform: linux-64" in lines
    urls = [line for line in lines if line.startswith("file://")]
    names = [url.rsplit("/", 1)[1].rsplit("-", 2)[0] for url in urls]
    # pytorch's whole closure (conda-forge's depends: libtorch, triton, sympy, ...), each once
    assert {"python", "pytorch", "libtorch", "pointops", "cuda-version", "triton"} <= set(names)
    assert len(set(names)) == len(names)
    assert names.index("python") < names.index("pytorch") and names.index("libtorch") < names.index("pytorch")
    for url in urls:  # every sha256 is the real archive's
        location, digest = url.split("#sha256:")
        path = Path(location.removeprefix("file://"))
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    from rattler import LockFile
    from rattler.explicit_environment import ExplicitEnvironmentSpec

    parsed = ExplicitEnvironmentSpec.from_str(explicit.read_text())
    assert str(parsed.platform) == "linux-64" and len(parsed.packages) == len(urls)
    locked = LockFile.from_path(lock).default_environment()
    assert locked is not None and len(locked.platforms()) == 1
    data = yaml.safe_load(lock.read_text())
    assert data["version"] == 7
    assert "__cuda=12.4=0" in data["platforms"][0]["virtual-packages"]
    assert "__cuda_arch=8.9=0" in data["platforms"][0]["virtual-packages"]


def test_missing_build_in_channel_is_explained(solver_cli, channel_without_cuda13_pointops):
    result = solver_cli(
        "make-env",
        "--gpu",
        "H200",
        "--driver",
        "580.159.04",
        "--platform",
        "linux-64",
        "--channel",
        str(channel_without_cuda13_pointops),
    )
    assert result.returncode == 1
    assert "no pointops matching pointops=0.1.0=cuda130*" in result.stderr
    assert "cuda129" in result.stderr  # what the channel does have
    assert "Traceback" not in result.stderr and result.stdout == ""


def _one_line_notice(result) -> str:
    notices = [line for line in result.stderr.splitlines() if "not verified" in line]
    assert len(notices) == 1, result.stderr
    return notices[0]


def test_refused_connection_gives_plan_marked_unverified(solver_cli, refused_url):
    result = solver_cli("make-env", *GPU_4090, "--channel", refused_url)
    assert result.returncode == 0, result.stderr
    assert "refused" in _one_line_notice(result) and "--offline" in _one_line_notice(result)
    assert "# NOT verified by a solve" in result.stdout
    assert yaml.safe_load(result.stdout)["dependencies"][1] == "pytorch=2.13.*=cuda129*"
    assert "Traceback" not in result.stderr


def test_dead_proxy_is_named(solver_cli, refused_url):
    proxy = refused_url
    result = solver_cli(
        "make-env",
        "--gpu",
        "none",
        "--channel",
        "https://conda.anaconda.org/conda-forge",
        env={"HTTPS_PROXY": proxy, "NO_PROXY": ""},
    )
    assert result.returncode == 0
    notice = _one_line_notice(result)
    assert "refused" in notice and f"HTTPS_PROXY={proxy}" in notice


def test_refused_connection_json(solver_cli, refused_url):
    result = solver_cli("make-env", *GPU_4090, "--channel", refused_url, "--json")
    assert result.returncode == 0
    doc = result.json
    assert doc["verified"] is False and "refused" in doc["verification"]
    assert any("not verified" in w for w in doc["warnings"])


def test_missing_channel_404(solver_cli, empty_http_root):
    result = solver_cli("make-env", *GPU_4090, "--channel", f"{empty_http_root}/nope")
    assert result.returncode == 0
    notice = _one_line_notice(result)
    assert "was not found" in notice and "404" in notice and "--channel" in notice


def test_untrusted_tls_then_trusted_with_ssl_cert_file(solver_cli, tls_channel):
    url, ca_file = tls_channel
    untrusted = solver_cli(
        "make-env", *GPU_4090, "--channel", url, env={"SSL_CERT_FILE": None, "SSL_CERT_DIR": None}
    )
    assert untrusted.returncode == 0
    notice = _one_line_notice(untrusted)
    assert "not trusted" in notice and "SSL_CERT_FILE" in notice
    trusted = solver_cli(
        "make-env", *GPU_4090, "--channel", url, "--json", env={"SSL_CERT_FILE": str(ca_file)}
    )
    assert trusted.returncode == 0, trusted.stderr
    assert trusted.json["verified"] is True


def test_ssl_cert_file_pointing_nowhere(solver_cli, tls_channel):
    url, _ = tls_channel
    result = solver_cli("make-env", *GPU_4090, "--channel", url, env={"SSL_CERT_FILE": "/nonexistent/ca.pem"})
    assert result.returncode == 0
    notice = _one_line_notice(result)
    assert "SSL_CERT_FILE=/nonexistent/ca.pem" in notice and "does not exist" in notice


def test_explicit_needs_a_solve(solver_cli, refused_url, tmp_path):
    result = solver_cli(
        "make-env", *GPU_4090, "--channel", refused_url, "--explicit", str(tmp_path / "e.txt")
    )
    assert result.returncode == 1
    assert "need a solve" in result.stderr and not (tmp_path / "e.txt").exists()


def test_gpu_auto_with_overrides_solves_for_them(solver_cli, local_channel):
    result = solver_cli(
        "make-env",
        "--gpu",
        "auto",
        "--platform",
        "linux-64",
        "--channel",
        str(local_channel),
        "--json",
        env={"CONDA_OVERRIDE_CUDA": "12.8", "CONDA_OVERRIDE_CUDA_ARCH": "8.0"},
    )
    assert result.returncode == 0, result.stderr
    doc = result.json
    assert doc["gpu"]["compute_capability"] == "8.0" and doc["driver"]["cuda"] == "12.8"
    solution = {e["name"]: e for e in doc["solution"]}
    assert solution["pytorch"]["build"].startswith("cuda129_")


def test_readme_first_command_on_this_machine(solver_cli):
    """No GPU, no reachable channel: a CPU env.yml, one notice, exit 0."""
    result = solver_cli("make-env", "--gpu", "auto")
    assert result.returncode == 0, result.stderr
    env = yaml.safe_load(result.stdout)
    assert any(d.startswith("pytorch=") and d.endswith("=cpu*") for d in env["dependencies"])
    assert "Traceback" not in result.stderr


def test_large_generated_channel_solves(solver_cli, tmp_path):
    """The benchmark's generated channel (hand-written repodata.json, filler packages) is valid."""
    import local_channels as channel_factory

    root = channel_factory.write_large_repodata(tmp_path / "big", 2000)
    result = solver_cli("make-env", *GPU_4090, "--channel", str(root), "--json")
    assert result.returncode == 0, result.stderr
    assert result.json["verified"] is True
    import json

    linux = json.loads((root / "linux-64" / "repodata.json").read_text())["packages"]
    noarch = json.loads((root / "noarch" / "repodata.json").read_text())["packages"]
    assert len(linux) + len(noarch) == 2000


def test_gpu_auto_detects_through_nvidia_smi(solver_cli, local_channel, tmp_path):
    """--gpu auto on a machine whose nvidia-smi reports the captured H200 (a stand-in: no GPU in CI)."""
    import os
    import sys

    device = Path(__file__).parent / "data" / "device"
    query = (device / "nvidia-smi-query-header.csv").read_text().splitlines()[1]
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    script = fake_bin / "nvidia-smi"
    script.write_text(
        f'#!/bin/sh\ncase "$1" in --query-gpu=*) echo "{query}";; '
        f'*) cat "{device / "nvidia-smi.txt"}";; esac\n'
    )
    script.chmod(0o755)
    path = os.pathsep.join([str(fake_bin), os.path.dirname(sys.executable), "/usr/bin", "/bin"])
    result = solver_cli(
        "make-env",
        "--gpu",
        "auto",
        "--platform",
        "linux-64",
        "--channel",
        str(local_channel),
        "--json",
        env={"PATH": path},
    )
    assert result.returncode == 0, result.stderr
    doc = result.json
    assert doc["gpu"] == {"name": "NVIDIA H200", "compute_capability": "9.0"}
    assert doc["driver"]["version"] == "580.159.04" and doc["driver"]["cuda"] == "13.0"
    assert doc["verified"] is True and doc["pytorch_build"] == "cuda130*"

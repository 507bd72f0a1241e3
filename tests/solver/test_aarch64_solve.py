"""linux-aarch64 end to end: real py-rattler solves against a local channel holding conda-forge's
sbsa and tegra builds, which share build strings. A server GPU must get sbsa; Jetson Orin on
JetPack 6 is refused before the solve (its driver runs only the tegra builds, and pointops
publishes none), naming JetPack 7.2; Orin on JetPack 7.2 gets a pytorch build that carries 8.7."""

from __future__ import annotations


def solution_of(result) -> dict[str, dict]:
    assert result.returncode == 0, result.stderr
    doc = result.json
    assert doc["verified"] is True and doc["errors"] == []
    return {entry["name"]: entry for entry in doc["solution"]}


def test_grace_hopper_gets_the_sbsa_builds(solver_cli, aarch64_channel):
    result = solver_cli(
        "make-env",
        "--gpu",
        "NVIDIA GH200 480GB",
        "--driver",
        "575.57.08",
        "--platform",
        "linux-aarch64",
        "--channel",
        str(aarch64_channel),
        "--json",
    )
    solution = solution_of(result)
    assert solution["arm-variant"]["build"] == "sbsa"
    assert solution["pytorch"]["build"].startswith("cuda129_generic_")
    assert solution["cuda-version"]["version"] == "12.9"
    assert "arm-variant=*=sbsa" in result.json["dependencies"]


def test_orin_on_jetpack6_is_refused_with_the_jetpack_that_works(solver_cli, aarch64_channel):
    """conda-forge has tegra pytorch builds, but pointops publishes none: the plan stops before the
    solve and names JetPack 7.2, where Orin runs the sbsa CUDA 13 builds."""
    result = solver_cli(
        "make-env",
        "--gpu",
        "Orin (nvgpu)",
        "--driver",
        "540.4.0",
        "--platform",
        "linux-aarch64",
        "--channel",
        str(aarch64_channel),
    )
    assert result.returncode == 1 and result.stdout == ""
    assert "no build for the tegra CUDA stack of Jetson Orin on JetPack 6" in result.stderr
    assert "JetPack 7.2" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_orin_on_jetpack72_gets_a_cuda13_build_with_sm87(solver_cli, aarch64_channel):
    result = solver_cli(
        "make-env",
        "--gpu",
        "Jetson AGX Orin",
        "--driver",
        "595.45.04",
        "--platform",
        "linux-aarch64",
        "--channel",
        str(aarch64_channel),
        "--json",
    )
    solution = solution_of(result)
    assert solution["arm-variant"]["build"] == "sbsa"
    assert solution["pytorch"]["build"].startswith("cuda130_generic_")
    assert solution["pytorch"]["build"].endswith("_202")
    assert "pytorch=2.13.0=cuda130*[build_number='>=202']" in result.json["dependencies"]


def test_orin_on_jetpack72_refuses_builds_without_sm87(solver_cli, aarch64_channel_before_rebuild):
    """pytorch 2.13.0 builds 0 and 1 (200, 201) have no SASS for 8.7: the solve must fail, not install them."""
    result = solver_cli(
        "make-env",
        "--gpu",
        "Jetson AGX Orin",
        "--driver",
        "595.45.04",
        "--platform",
        "linux-aarch64",
        "--channel",
        str(aarch64_channel_before_rebuild),
    )
    assert result.returncode == 1, result.stdout
    assert "build_number" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1

"""Stand-in nvidia-smi programs for machines that misbehave (no GPU exists in CI).

Each writes an executable `nvidia-smi` into a folder and returns the PATH that puts it first.
`answering` replays the real output captured on the H200 machine (tests/solver/data/device), and
prints the query row in the order of the fields asked, as the real program does."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

DEVICE = Path(__file__).parent / "data" / "device"


def install(folder: Path, script: str, path: str | None = None) -> str:
    """Write `script` (a Python program) as folder/nvidia-smi; returns a PATH with it first."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text(f"#!{sys.executable}\n" + script)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    rest = path if path is not None else os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"
    return f"{folder}{os.pathsep}{rest}"


def answering(
    folder: Path,
    gpus: list[dict] | None = None,
    driver: str = "580.159.04",
    cuda: str = "13.0",
    path: str | None = None,
) -> str:
    """A working nvidia-smi: --query-gpu=<fields> answers per GPU in the order asked (a value may be
    bytes, to print a name that is not UTF-8); plain nvidia-smi prints the captured header with
    this driver and CUDA version."""
    gpus = gpus or [{"name": "NVIDIA H200", "compute_cap": "9.0"}]
    plain = (
        (DEVICE / "nvidia-smi.txt")
        .read_text()
        .replace("580.159.04", driver)
        .replace("CUDA Version: 13.0", f"CUDA Version: {cuda}")
    )
    return install(
        folder,
        f"""
import sys
gpus = {gpus!r}
args = sys.argv[1:]
query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
if query is None:
    sys.stdout.write({plain!r})
    sys.exit(0)
for index, gpu in enumerate(gpus):
    values = {{"index": str(index), "driver_version": {driver!r}, **gpu}}
    row = [values.get(field, "[N/A]") for field in query.split(",")]
    sys.stdout.buffer.write(b", ".join(v if isinstance(v, bytes) else v.encode() for v in row) + b"\\n")
""",
        path,
    )


def hanging(folder: Path, path: str | None = None) -> str:
    """Never answers (a wedged driver); it also starts a child, as wrapper scripts do."""
    return install(
        folder, "import subprocess, time\nsubprocess.Popen(['sleep', '300'])\ntime.sleep(300)\n", path
    )


def driver_not_loaded(folder: Path, path: str | None = None) -> str:
    """What nvidia-smi prints when the kernel module is not loaded (exit status 9)."""
    return install(
        folder,
        "import sys\nprint(\"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
        'driver. Make sure that the latest NVIDIA driver is installed and running.")\nsys.exit(9)\n',
        path,
    )


def garbage(folder: Path, path: str | None = None) -> str:
    """Exit status 0 and bytes that are not UTF-8 (nor CSV)."""
    return install(
        folder,
        "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe\\x00garbage, \\xc3\\x28, 0x1f\\n\\x80\\x81\\n')\n",
        path,
    )


def no_devices(folder: Path, path: str | None = None) -> str:
    """A driver without a visible GPU (exit status 6)."""
    return install(folder, "import sys\nprint('No devices were found')\nsys.exit(6)\n", path)

"""Detect this machine: platform, glibc, NVIDIA driver and its CUDA version, each GPU's name and
compute capability.

Order: NVML (nvidia-ml-py, when installed), then `nvidia-smi` with a timeout, then nothing.
CONDA_OVERRIDE_CUDA / CONDA_OVERRIDE_CUDA_ARCH are honoured as conda and rattler do: an empty
CONDA_OVERRIDE_CUDA means "no driver"; CONDA_OVERRIDE_CUDA_ARCH replaces the compute capability.

    info = detect()                   # -> Detection (a plain dataclass), never raises
    parse_nvidia_smi_csv(text)        # -> list[GpuInfo] from `--query-gpu ... --format=csv`
    parse_nvidia_smi_cuda(text)       # -> "13.0" from plain `nvidia-smi` or `nvidia-smi -q`
"""

from __future__ import annotations

import os
import platform as _platform
import re
import subprocess
import sys
from dataclasses import dataclass, field

from solver.vocabulary import normalize_compute_capability

NVIDIA_SMI_TIMEOUT_S = 10.0
# Fields asked of nvidia-smi; R470-era nvidia-smi lacks compute_cap, so a second query drops it.
QUERY_FIELDS = ("index", "name", "compute_cap", "driver_version")


@dataclass
class GpuInfo:
    index: int
    name: str
    compute_capability: str | None  # "8.6"; None when nothing reported it


@dataclass
class Detection:
    platform: str                      # conda subdir of this machine, e.g. "linux-64"
    glibc: str | None                  # "2.36" on glibc Linux, else None
    driver_version: str | None         # "550.54.14"; None when no NVIDIA driver answered
    driver_cuda: str | None            # highest CUDA the driver runs, e.g. "12.4"
    gpus: list[GpuInfo] = field(default_factory=list)
    source: str = "none"               # "nvml", "nvidia-smi", "override" or "none"
    notes: list[str] = field(default_factory=list)  # why a step failed or what was overridden

    @property
    def min_compute_capability(self) -> str | None:
        """Lowest compute capability over all GPUs (what CEP 46 calls __cuda_arch)."""
        known = [g.compute_capability for g in self.gpus if g.compute_capability]
        if not known:
            return None
        return min(known, key=lambda cc: tuple(int(p) for p in cc.split(".")))


def host_platform() -> str:
    """The conda subdir of this machine."""
    machine = _platform.machine().lower()
    arm = machine in ("arm64", "aarch64")
    if sys.platform.startswith("linux"):
        return "linux-aarch64" if arm else "linux-64"
    if sys.platform == "darwin":
        return "osx-arm64" if arm else "osx-64"
    if sys.platform == "win32":
        return "win-64"
    return f"{sys.platform}-unknown"


def host_glibc() -> str | None:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return None
    match = re.search(r"glibc (\d+\.\d+)", text)
    return match.group(1) if match else None


def parse_nvidia_smi_csv(text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> list[GpuInfo]:
    """GPUs from `nvidia-smi --query-gpu=<fields> --format=csv[,noheader]` output.

    A header line (csv without noheader) names the columns; without it `fields` does.
    Unknown or '[N/A]' compute capabilities become None.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0].split(",")[0].strip().lower() == "index":
        fields = tuple(col.strip().split(" ")[0].lower() for col in lines[0].split(","))
        lines = lines[1:]
    gpus = []
    for position, line in enumerate(lines):
        cols = [c.strip() for c in line.split(",")]
        if len(cols) < len(fields):
            continue
        row = dict(zip(fields, cols, strict=False))
        index = int(row["index"]) if row.get("index", "").isdigit() else position
        cc = normalize_compute_capability(row.get("compute_cap", "")) if row.get("compute_cap") else None
        gpus.append(GpuInfo(index=index, name=row.get("name", "unknown GPU"), compute_capability=cc))
    return gpus


def parse_nvidia_smi_driver(text: str) -> str | None:
    """Driver version from plain `nvidia-smi`, `nvidia-smi -q` or a CSV with driver_version."""
    match = re.search(r"Driver Version\s*:?\s*([\d.]+)", text)
    return match.group(1) if match else None


def parse_nvidia_smi_cuda(text: str) -> str | None:
    """The driver's CUDA version from plain `nvidia-smi` ("CUDA Version: 13.0") or `-q`."""
    match = re.search(r"CUDA Version\s*:\s*(\d+\.\d+)", text)
    return match.group(1) if match else None


def _from_nvml() -> tuple[str, str, list[GpuInfo]] | str:
    """(driver, cuda, gpus) through NVML, or a string saying why not."""
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return f"NVML unavailable ({exc})"
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        cuda_int = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        cuda = f"{cuda_int // 1000}.{(cuda_int % 1000) // 10}"
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
                cc = f"{major}.{minor}"
            except Exception:
                cc = None
            gpus.append(GpuInfo(index=index, name=name, compute_capability=cc))
        return driver, cuda, gpus
    except Exception as exc:
        return f"NVML query failed ({exc})"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


# WSL ships nvidia-smi with the Windows driver here, often outside PATH.
_EXTRA_NVIDIA_SMI = ("/usr/lib/wsl/lib/nvidia-smi",)


def _nvidia_smi() -> str:
    import shutil

    if shutil.which("nvidia-smi"):
        return "nvidia-smi"
    return next((path for path in _EXTRA_NVIDIA_SMI if os.access(path, os.X_OK)), "nvidia-smi")


def _run(cmd: list[str], timeout: float) -> tuple[int, str] | str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return "nvidia-smi not found"
    except subprocess.TimeoutExpired:
        return f"nvidia-smi did not answer within {timeout:g} s"
    except OSError as exc:
        return f"nvidia-smi failed to start ({exc.strerror})"
    return done.returncode, done.stdout + done.stderr


def _from_nvidia_smi(timeout: float) -> tuple[str, str | None, list[GpuInfo]] | str:
    fields = QUERY_FIELDS
    smi = _nvidia_smi()
    result = _run([smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"], timeout)
    if isinstance(result, str):
        return result
    code, out = result
    if code != 0 and "compute_cap" in out:  # old nvidia-smi: ask again without it
        fields = tuple(f for f in QUERY_FIELDS if f != "compute_cap")
        result = _run([smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"], timeout)
        if isinstance(result, str):
            return result
        code, out = result
    if code != 0:
        first = out.strip().splitlines()[0] if out.strip() else f"exit status {code}"
        return f"nvidia-smi failed: {first}"
    gpus = parse_nvidia_smi_csv(out, fields)
    first_row = [c.strip() for c in out.strip().splitlines()[0].split(",")] if out.strip() else []
    position = fields.index("driver_version")
    candidate = first_row[position] if len(first_row) > position else ""
    driver = candidate if re.match(r"^\d+(\.\d+)+$", candidate) else None
    header = _run([smi], timeout)
    cuda = parse_nvidia_smi_cuda(header[1]) if isinstance(header, tuple) else None
    if driver is None:
        return "nvidia-smi reported no driver version"
    return driver, cuda, gpus


def detect(env: dict[str, str] | None = None, use_nvml: bool = True,
           nvidia_smi_timeout: float = NVIDIA_SMI_TIMEOUT_S) -> Detection:
    """Detect this machine's GPUs and driver. Never raises; failures end up in `notes`."""
    env = os.environ if env is None else env
    info = Detection(platform=host_platform(), glibc=host_glibc(), driver_version=None, driver_cuda=None)

    if info.platform.startswith("osx"):
        info.notes.append("macOS has no CUDA driver")
    else:
        found = _from_nvml() if use_nvml else "NVML not tried"
        if isinstance(found, tuple):
            info.driver_version, info.driver_cuda, info.gpus = found
            info.source = "nvml"
        else:
            info.notes.append(found)
            found = _from_nvidia_smi(nvidia_smi_timeout)
            if isinstance(found, tuple):
                info.driver_version, info.driver_cuda, info.gpus = found
                info.source = "nvidia-smi"
            else:
                info.notes.append(found)
        if info.driver_version and info.driver_cuda is None:
            from solver.knowledge import load

            info.driver_cuda = load().driver_max_cuda(info.driver_version)
        _fill_compute_capabilities(info)

    _apply_overrides(info, env)
    return info


def _fill_compute_capabilities(info: Detection) -> None:
    """GPUs whose driver did not report a compute capability get it from the name table."""
    missing = [g for g in info.gpus if g.compute_capability is None]
    if not missing:
        return
    from solver.knowledge import load

    kb = load()
    for gpu in missing:
        gpu.compute_capability = kb.gpu_compute_capability(gpu.name)
        if gpu.compute_capability:
            info.notes.append(f"compute capability of {gpu.name} taken from the GPU table: {gpu.compute_capability}")


def _apply_overrides(info: Detection, env) -> None:
    if "CONDA_OVERRIDE_CUDA" in env:
        value = env["CONDA_OVERRIDE_CUDA"].strip()
        if value == "":
            info.driver_cuda, info.driver_version, info.gpus = None, None, []
            info.source = "override"
            info.notes.append("CONDA_OVERRIDE_CUDA is empty: planning for a machine without a GPU")
            return
        match = re.match(r"^(\d+)(?:\.(\d+))?", value)
        if match:
            info.driver_cuda = f"{match.group(1)}.{match.group(2) or 0}"
            info.source = "override"
            info.notes.append(f"CONDA_OVERRIDE_CUDA={value}: driver CUDA version {info.driver_cuda}")
        else:
            info.notes.append(f"ignored CONDA_OVERRIDE_CUDA={value!r}: expected a version such as 12.4")
    arch = env.get("CONDA_OVERRIDE_CUDA_ARCH", "").strip()
    if arch:
        cc = normalize_compute_capability(arch)
        if cc is None:
            info.notes.append(f"ignored CONDA_OVERRIDE_CUDA_ARCH={arch!r}: expected major.minor such as 8.6")
        elif info.driver_cuda is None:
            info.notes.append("ignored CONDA_OVERRIDE_CUDA_ARCH: it needs a driver (CONDA_OVERRIDE_CUDA) as well")
        else:
            if info.gpus:
                for gpu in info.gpus:
                    gpu.compute_capability = cc
            else:
                info.gpus = [GpuInfo(index=0, name=f"sm_{cc.replace('.', '')} GPU", compute_capability=cc)]
            info.source = "override"
            info.notes.append(f"CONDA_OVERRIDE_CUDA_ARCH={arch}: compute capability {cc}")

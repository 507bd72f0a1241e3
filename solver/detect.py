"""Detect this machine: platform, glibc, NVIDIA driver and its CUDA version, each GPU's name and
compute capability.

Order: NVML (nvidia-ml-py, when installed), then `nvidia-smi`, each with a time limit, then
nothing. "No driver here" (no NVML library, no nvidia-smi, "No devices were found") is a machine
without a GPU; a driver that does not answer, is not loaded or prints garbage is a `problem`, which
callers report as a failure, never as "no GPU". CONDA_OVERRIDE_CUDA / CONDA_OVERRIDE_CUDA_ARCH are
honoured as conda and rattler do (solver.overrides): an empty CONDA_OVERRIDE_CUDA means "no driver";
CONDA_OVERRIDE_CUDA_ARCH replaces the compute capability; a malformed value is reported in
`override_error` and nothing is overridden.

    info = detect()                   # -> Detection (a plain dataclass), never raises
    parse_nvidia_smi_csv(text)        # -> list[GpuInfo] from `--query-gpu ... --format=csv`
    parse_nvidia_smi_cuda(text)       # -> "13.0" from plain `nvidia-smi` or `nvidia-smi -q`
    is_wsl_kernel(text)               # -> True for /proc/version of a WSL kernel

Under WSL2 the driver is the Windows host's: nvidia-smi prints its Windows number ("Driver
Version: 537.13" beside "NVIDIA-SMI 535.103"); `Detection.wsl` says so, and the planner compares
that number with Windows minimums.
"""

from __future__ import annotations

import os
import platform as _platform
import re
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from solver import bounded
from solver.errors import UsageError
from solver.overrides import Overrides, read_overrides
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
    platform: str  # conda subdir of this machine, e.g. "linux-64"
    glibc: str | None  # "2.36" on glibc Linux, else None
    driver_version: str | None  # "550.54.14"; None when no NVIDIA driver answered
    driver_cuda: str | None  # highest CUDA the driver runs, e.g. "12.4"
    gpus: list[GpuInfo] = field(default_factory=list)
    source: str = "none"  # "nvml", "nvidia-smi", "override" or "none"
    notes: list[str] = field(default_factory=list)  # why a step failed or what was overridden
    problem: str = ""  # the driver is there but broken: "nvidia-smi does not answer ..."
    override_error: str = ""  # a malformed CONDA_OVERRIDE_* (then no override was applied)
    wsl: bool = False  # Linux under WSL: driver_version is the Windows host driver's number

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


# WSL's kernel names itself in /proc/version ("...-microsoft-standard-WSL2 ..."), and WSL mounts the
# Windows driver's user-mode libraries and nvidia-smi at /usr/lib/wsl/lib.
PROC_VERSION = "/proc/version"
WSL_LIB_DIR = "/usr/lib/wsl/lib"


def is_wsl_kernel(proc_version: str) -> bool:
    """Whether /proc/version's text is that of a WSL kernel."""
    text = proc_version.lower()
    return "microsoft" in text or "wsl" in text


def host_is_wsl() -> bool:
    """Whether this Linux runs under WSL: nvidia-smi and NVML there report the Windows host's
    driver, numbered as Windows drivers are (537.13 beside NVIDIA-SMI 535.103)."""
    try:
        with open(PROC_VERSION, encoding="utf-8", errors="replace") as handle:
            if is_wsl_kernel(handle.read(4096)):
                return True
    except OSError:
        pass
    return os.path.isdir(WSL_LIB_DIR)


def _is_version(text: str) -> bool:
    return bool(re.match(r"^\d+(\.\d+)+$", text))


def parse_nvidia_smi_csv(text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> list[GpuInfo]:
    """GPUs from `nvidia-smi --query-gpu=<fields> --format=csv[,noheader]` output.

    A header line (csv without noheader) names the columns; without it `fields` does. nvidia-smi
    does not quote values, so a GPU name with a comma spreads over several columns: the columns
    beyond the expected count belong to the name. Rows that are not GPU rows (no index, no driver
    version where one was asked) are left out. Unknown or '[N/A]' compute capabilities become None.
    """
    return _parse_rows(text, fields)[0]


def _parse_rows(text: str, fields: tuple[str, ...]) -> tuple[list[GpuInfo], list[str]]:
    """(GPUs, lines that are not GPU rows)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0].split(",")[0].strip().lower() == "index":
        fields = tuple(col.strip().split(" ")[0].lower() for col in lines[0].split(","))
        lines = lines[1:]
    gpus, rejected = [], []
    for line in lines:
        cols = [c.strip() for c in line.split(",")]
        extra = len(cols) - len(fields)
        if extra < 0:
            rejected.append(line)
            continue
        if extra and "name" in fields:
            at = fields.index("name")
            cols[at : at + extra + 1] = [", ".join(cols[at : at + extra + 1])]
        row = dict(zip(fields, cols, strict=False))
        if not row.get("index", "").isdigit() or (
            "driver_version" in row and not _is_version(row["driver_version"])
        ):
            rejected.append(line)
            continue
        cc_text = row.get("compute_cap", "")
        cc = normalize_compute_capability(cc_text) if cc_text else None
        gpus.append(
            GpuInfo(index=int(row["index"]), name=row.get("name") or "unknown GPU", compute_capability=cc)
        )
    return gpus, rejected


def parse_nvidia_smi_driver(text: str) -> str | None:
    """Driver version from plain `nvidia-smi`, `nvidia-smi -q` or a CSV with driver_version."""
    match = re.search(r"Driver Version\s*:?\s*([\d.]+)", text)
    return match.group(1) if match else None


def parse_nvidia_smi_cuda(text: str) -> str | None:
    """The driver's CUDA version from plain `nvidia-smi` ("CUDA Version: 13.0") or `-q`."""
    match = re.search(r"CUDA Version\s*:\s*(\d+\.\d+)", text)
    return match.group(1) if match else None


@dataclass
class _Failure:
    note: str  # why this source gave nothing
    problem: str = ""  # set when the driver is there but broken (not answering, not loaded)


# nvidia-smi's words for a driver that is installed but not running.
_NOT_LOADED_WORDS = (
    "couldn't communicate with the nvidia driver",
    "driver not loaded",
    "driver is not loaded",
    "no nvidia kernel module",
)


def _nvml_readings(pynvml) -> tuple[str, str, list[GpuInfo]]:
    pynvml.nvmlInit()
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode(errors="replace") if isinstance(driver, bytes) else str(driver)
        cuda_int = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        cuda = f"{cuda_int // 1000}.{(cuda_int % 1000) // 10}"
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
                cc = f"{major}.{minor}"
            except Exception:
                cc = None
            gpus.append(GpuInfo(index=index, name=name, compute_capability=cc))
        return driver, cuda, gpus
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _from_nvml(timeout: float) -> tuple[str, str, list[GpuInfo]] | _Failure:
    """(driver, cuda, gpus) through NVML, or why not. NVML runs in this process, so it gets a thread
    with a time limit: a wedged driver can block nvmlInit forever."""
    try:
        import pynvml
    except ImportError:
        return _Failure("nvidia-ml-py is not installed")
    outcome: dict[str, object] = {}

    def read() -> None:
        try:
            outcome["value"] = _nvml_readings(pynvml)
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            outcome["error"] = exc

    worker = threading.Thread(target=read, name="nvml", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return _Failure(
            f"NVML did not answer within {timeout:g} s",
            f"NVML does not answer (no reply within {timeout:g} s): the NVIDIA driver may be hung",
        )
    if "value" in outcome:
        return outcome["value"]  # type: ignore[return-value]
    error = outcome.get("error")
    text = str(error) or type(error).__name__
    lowered = f"{type(error).__name__} {text}".lower()
    if "driver not loaded" in lowered or "drivernotloaded" in lowered:
        return _Failure(f"NVML unavailable ({text})", f"the NVIDIA driver is not loaded (NVML: {text})")
    return _Failure(f"NVML unavailable ({text})")  # no libnvidia-ml: no driver here


# WSL ships nvidia-smi with the Windows driver here, often outside PATH.
_EXTRA_NVIDIA_SMI = ("/usr/lib/wsl/lib/nvidia-smi",)


def _nvidia_smi() -> str:
    import shutil

    found = shutil.which("nvidia-smi")
    if found:
        return found
    return next((path for path in _EXTRA_NVIDIA_SMI if os.access(path, os.X_OK)), "nvidia-smi")


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]


def _smi_failure(done: bounded.Completed, timeout: float) -> _Failure:
    """Why an nvidia-smi call gave nothing usable, and whether that is a broken driver."""
    if done.start_error == "not found":
        return _Failure("nvidia-smi not found")
    if done.start_error:
        return _Failure(
            f"nvidia-smi could not be started ({done.start_error})",
            f"nvidia-smi could not be started ({done.start_error})",
        )
    if done.timed_out:
        return _Failure(
            f"nvidia-smi did not answer within {timeout:g} s",
            f"nvidia-smi does not answer (no reply within {timeout:g} s): the NVIDIA driver may be hung",
        )
    first = _first_line(done.output) or bounded.signal_text(done.returncode or 0)
    lowered = done.output.lower()
    if "no devices were found" in lowered:
        return _Failure(f"nvidia-smi: {first}")
    if any(word in lowered for word in _NOT_LOADED_WORDS):
        return _Failure(
            f"nvidia-smi failed: {first}", f"the NVIDIA driver is not loaded (nvidia-smi: {first})"
        )
    return _Failure(
        f"nvidia-smi failed: {first}",
        f"nvidia-smi fails ({bounded.signal_text(done.returncode or 0)}: {first})",
    )


def _from_nvidia_smi(timeout: float) -> tuple[str, str | None, list[GpuInfo], list[str]] | _Failure:
    """(driver, cuda, gpus, notes) from nvidia-smi, or why not."""
    fields = QUERY_FIELDS
    smi = _nvidia_smi()

    def query(asked: tuple[str, ...]) -> bounded.Completed:
        return bounded.run([smi, f"--query-gpu={','.join(asked)}", "--format=csv,noheader"], timeout)

    done = query(fields)
    if done.returncode not in (0, None) and "compute_cap" in done.output:  # R470-era: ask without it
        fields = tuple(f for f in QUERY_FIELDS if f != "compute_cap")
        done = query(fields)
    if not done.ok:
        return _smi_failure(done, timeout)
    gpus, rejected = _parse_rows(done.stdout, fields)
    if rejected or not gpus:
        what = _first_line(rejected[0] if rejected else done.output) or "nothing"
        return _Failure(
            f"nvidia-smi printed no GPU list ({what})",
            f"nvidia-smi answers, but not with a GPU list: {what!r}",
        )
    rows = [line for line in done.stdout.splitlines() if line.strip()]
    columns = [c.strip() for c in rows[0].split(",")]
    driver = columns[-1] if fields[-1] == "driver_version" else None
    notes = []
    header = bounded.run([smi], timeout)
    cuda = parse_nvidia_smi_cuda(header.stdout) if header.ok else None
    if not header.ok:
        notes.append(_smi_failure(header, timeout).note)
    return driver or "", cuda, gpus, notes


def detect(
    env: Mapping[str, str] | None = None, use_nvml: bool = True, nvidia_smi_timeout: float | None = None
) -> Detection:
    """Detect this machine's GPUs and driver. Never raises; failures end up in `notes`, a broken
    driver in `problem`, a malformed CONDA_OVERRIDE_* in `override_error`. Each of NVML and
    nvidia-smi gets `nvidia_smi_timeout` seconds (default NVIDIA_SMI_TIMEOUT_S, read at call time)."""
    env = os.environ if env is None else env
    if nvidia_smi_timeout is None:
        nvidia_smi_timeout = NVIDIA_SMI_TIMEOUT_S
    info = Detection(platform=host_platform(), glibc=host_glibc(), driver_version=None, driver_cuda=None)

    if info.platform.startswith("osx"):
        info.notes.append("macOS has no CUDA driver")
    else:
        info.wsl = info.platform.startswith("linux") and host_is_wsl()
        found = _from_nvml(nvidia_smi_timeout) if use_nvml else _Failure("NVML not tried")
        if isinstance(found, tuple):
            info.driver_version, info.driver_cuda, info.gpus = found
            info.source = "nvml"
        else:
            info.notes.append(found.note)
            nvml_problem = found.problem
            smi = _from_nvidia_smi(nvidia_smi_timeout)
            if isinstance(smi, tuple):
                info.driver_version, info.driver_cuda, info.gpus, notes = smi
                info.notes += notes
                info.source = "nvidia-smi"
            else:
                info.notes.append(smi.note)
                info.problem = smi.problem or nvml_problem
        if info.driver_version and info.driver_cuda is None:
            from solver.knowledge import load

            info.driver_cuda = load().driver_max_cuda(info.driver_version)
        _fill_compute_capabilities(info)

    try:
        overrides = read_overrides(env)
    except UsageError as exc:
        info.override_error = exc.one_line()
    else:
        _apply_overrides(info, overrides)
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
            info.notes.append(
                f"compute capability of {gpu.name} taken from the GPU table: {gpu.compute_capability}"
            )


def _apply_overrides(info: Detection, overrides: Overrides) -> None:
    if overrides.cuda == "":
        info.driver_cuda, info.driver_version, info.gpus = None, None, []
        info.source = "override"
        info.notes.append("CONDA_OVERRIDE_CUDA is empty: planning for a machine without a GPU")
        return
    if overrides.cuda is not None:
        info.driver_cuda = overrides.cuda
        info.source = "override"
        info.notes.append(f"CONDA_OVERRIDE_CUDA={overrides.cuda}: driver CUDA version {overrides.cuda}")
    cc = overrides.cuda_arch
    if cc is not None:
        if info.driver_cuda is None:
            info.notes.append(
                "ignored CONDA_OVERRIDE_CUDA_ARCH: it needs a driver (CONDA_OVERRIDE_CUDA) as well"
            )
            return
        if info.gpus:
            for gpu in info.gpus:
                gpu.compute_capability = cc
        else:
            info.gpus = [GpuInfo(index=0, name=f"sm_{cc.replace('.', '')} GPU", compute_capability=cc)]
        info.source = "override"
        info.notes.append(f"CONDA_OVERRIDE_CUDA_ARCH={cc}: compute capability {cc}")

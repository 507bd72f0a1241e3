"""The facts doctor reasons about, as plain data.

Gathering them (gather.py) touches the machine; the checks only read these objects, so a test can
describe a broken machine (a prefix with conda-meta records, captured nvidia-smi text, Windows paths
and DLL versions) without having one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .dists import DistOrigin


@dataclass
class GpuFact:
    name: str
    compute_capability: str | None  # "9.0"; None when the source did not say


@dataclass
class DriverFacts:
    version: str | None = None  # "580.159.04"
    cuda: str | None = None  # newest CUDA the driver supports, "13.0"
    gpus: list[GpuFact] = field(default_factory=list)
    source: str = ""  # where the readings came from: "nvml", "nvidia-smi", "CONDA_OVERRIDE_CUDA"
    error: str = ""  # why detection found nothing, when it did not
    problem: str = ""  # the driver is there but broken: "nvidia-smi does not answer ...", "... not loaded"
    override_error: str = ""  # a malformed CONDA_OVERRIDE_* value (then nothing was overridden)
    wsl: bool = False  # Linux under WSL2: version is the Windows host driver's, numbered as on Windows


@dataclass
class TorchFacts:
    importable: bool = False
    version: str | None = None  # torch.__version__
    cuda: str | None = None  # torch.version.cuda; None for a CPU build
    arch_list: list[str] = field(default_factory=list)  # torch.cuda.get_arch_list()
    cuda_available: bool | None = None
    device_capabilities: list[str] = field(default_factory=list)  # "9.0" per visible device
    import_error: str = ""
    cuda_error: str = ""  # torch.cuda raised while being asked
    location: str = ""
    cuda_visible_devices: str | None = None  # the CUDA_VISIBLE_DEVICES variable, when set
    libstdcxx: str = ""  # the libstdc++.so.6 the interpreter has mapped after importing torch


@dataclass
class PointopsFacts:
    installed: bool = False
    build_info: dict | None = None  # pointops.build_info()
    error: str = ""  # import or build_info() failure text
    path: str = ""  # the package directory `import pointops` resolves to (empty: none)
    stage: str = ""  # where `error` happened: "import" or "build_info"
    source_tree: str = ""  # the checkout `path` sits in, when it is not an installed package


@dataclass
class BinaryFact:
    """One compiled file of a point-cloud package, as its ELF headers describe it."""

    path: str
    package: str  # the top-level package (or module) it belongs to: "mmcv", "pointops"
    origin: DistOrigin | None = None  # the distribution that installed it, when a RECORD lists it
    needs_libstdcxx: bool = False  # libstdc++.so.6 is in its DT_NEEDED
    carried: list[str] = field(default_factory=list)  # libstdc++ iostream symbols it defines itself
    exports_carried: bool = False  # some of them are in its dynamic symbol table
    needed_versions: list[str] = field(default_factory=list)  # GLIBCXX_*/CXXABI_* it needs from libstdc++
    error: str = ""  # why it could not be read


@dataclass
class LibstdcxxFacts:
    path: str = ""  # the libstdc++ the environment's Python loads with torch ("": not known)
    versions: list[str] = field(default_factory=list)  # the GLIBCXX_*/CXXABI_* versions it defines
    error: str = ""  # why its versions could not be read


@dataclass
class ToolchainFacts:
    nvcc_path: str | None = None
    nvcc_version: str | None = None  # "13.0"
    gcc_path: str | None = None
    gcc_version: str | None = None  # "12.2.0"
    cuda_home: str | None = None  # CUDA_HOME / CUDA_PATH


@dataclass
class CondaRecord:
    """One conda-meta/*.json record, reduced to what the checks read."""

    name: str
    version: str
    build: str
    depends: list[str] = field(default_factory=list)
    constrains: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    channel: str = ""


@dataclass
class PythonDist:
    """One installed Python distribution (a *.dist-info or *.egg-info folder in site-packages)."""

    name: str  # normalised: lower case, '-' separated
    version: str
    installer: str  # "pip", "conda", "uv", ... ("" when the folder does not say)
    path: str  # the metadata folder, relative to the prefix when inside it


@dataclass
class CondaFacts:
    prefix: Path | None = None  # None: not a conda environment
    records: list[CondaRecord] = field(default_factory=list)
    dists: list[PythonDist] = field(default_factory=list)
    read_errors: list[str] = field(default_factory=list)  # records that could not be parsed
    resolve_problem: str | None = None  # the offline re-solve: "" consistent, else why not; None: not run


@dataclass
class ImportFact:
    """The outcome of importing one compiled extension module in a child interpreter."""

    module: str
    distribution: str = ""  # the distribution that ships it, when known
    distribution_version: str = ""
    error: str = ""  # "" when the import worked (or before it was tried)
    torch_requirement: str = ""  # what the distribution says about torch, e.g. "torch==2.4.0"
    origin: DistOrigin | None = None  # where the distribution came from, for the fix
    path: str = ""  # the folder its top-level package was found in by the import ("" unknown)


@dataclass
class MmcvInstall:
    """One installed mmcv package folder and the distribution that put it there."""

    package: str  # the package folder: .../site-packages/mmcv
    distribution: str  # as its METADATA spells it: "mmcv", "mmcv-lite", "mmcv-full", a fork's name
    version: str
    origin: DistOrigin | None = None
    others: list[str] = field(default_factory=list)  # other distributions whose RECORD lists the folder
    recorded_ext: list[str] = field(default_factory=list)  # "mmcv/_ext.cpython-312-x86_64-linux-gnu.so"
    ext_files: list[str] = field(default_factory=list)  # the _ext files in the folder now
    cuda_archs: list[str] = field(default_factory=list)  # "sm_90", "compute_90" in _ext ([]: CPU only)
    archs_error: str = ""  # why _ext's archs could not be read


@dataclass
class MmcvDependent:
    """An installed package that requires mmcv (mmdet, mmdet3d, mmseg ...)."""

    module: str  # its top-level module: "mmdet"
    distribution: str
    version: str
    requirement: str  # its Requires-Dist on mmcv: "mmcv<2.2.0,>=2.0.0rc4; extra == \"mim\""


@dataclass
class MmcvFacts:
    installs: list[MmcvInstall] = field(default_factory=list)
    dependents: list[MmcvDependent] = field(default_factory=list)


@dataclass
class DllCopy:
    path: str  # full path of the DLL file
    version: tuple[int, ...] | None  # file version from its version resource


@dataclass
class WindowsFacts:
    path_entries: list[str] = field(default_factory=list)  # PATH, in order
    prefix: str = ""  # the Python environment doctor runs in
    active_prefix: str = ""  # CONDA_PREFIX
    conda_dll_search_modification: str | None = None  # CONDA_DLL_SEARCH_MODIFICATION_ENABLE
    env_dlls: list[DllCopy] = field(default_factory=list)  # the environment's own CRT DLLs
    path_dlls: list[DllCopy] = field(default_factory=list)  # CRT DLLs found in PATH directories


@dataclass
class ConfigSetting:
    key: str
    value: str
    source: str  # the file or variable it came from


@dataclass
class ProbeResult:
    url: str
    ok: bool
    detail: str  # HTTP status, or the error text


@dataclass
class NetworkFacts:
    env: dict[str, str] = field(default_factory=dict)  # TLS and proxy variables that are set
    settings: list[ConfigSetting] = field(default_factory=list)  # from pip, conda and rattler config
    channels: list[str] = field(default_factory=list)  # channel URLs to probe
    probes: list[ProbeResult] | None = None  # None: no probe was asked for
    files: dict[str, str] = field(default_factory=dict)  # CA path named in a setting -> "pem", "not-pem",
    #                                                      "missing" or "folder" (what is there)


@dataclass
class Facts:
    platform: str = ""  # conda subdir of this machine: "linux-64", "win-64", "osx-arm64"
    driver: DriverFacts = field(default_factory=DriverFacts)
    torch: TorchFacts = field(default_factory=TorchFacts)
    pointops: PointopsFacts = field(default_factory=PointopsFacts)
    toolchain: ToolchainFacts = field(default_factory=ToolchainFacts)
    conda: CondaFacts = field(default_factory=CondaFacts)
    imports: list[ImportFact] = field(default_factory=list)
    pointops_installs: list = field(default_factory=list)  # pointops_owners.PointopsInstall, one per package
    torch_dependents: list[str] = field(default_factory=list)  # "pointops 0.1.0 requires torch>=2.10"
    binaries: list[BinaryFact] = field(default_factory=list)  # compiled files of point-cloud packages
    mmcv: MmcvFacts = field(default_factory=MmcvFacts)
    libstdcxx: LibstdcxxFacts = field(default_factory=LibstdcxxFacts)
    windows: WindowsFacts | None = None  # None off Windows
    network: NetworkFacts = field(default_factory=NetworkFacts)
    virtual_packages: list[str] | None = None  # "__cuda=13.0=0"; None when they could not be detected
    virtual_packages_error: str = ""
    rattler_missing: str = ""  # why py-rattler could not be imported, when it could not

    @property
    def is_windows(self) -> bool:
        return self.platform.startswith("win")

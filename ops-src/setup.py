"""Builds pointops: one extension library on PyTorch's stable ABI and the Python limited API.

    pip install ./ops-src --no-build-isolation

needs an installed torch >= 2.10 (its headers and libtorch_cpu). CUDA kernels are built when
POINTOPS_CUDA=1, or when POINTOPS_CUDA is unset, nvcc is found and the installed torch is a CUDA
build (a CPU-only torch could not run them; POINTOPS_CUDA=1 still builds them, e.g. to ship one
binary). POINTOPS_CUDA=0 forces a CPU-only build.

Arch list: TORCH_CUDA_ARCH_LIST, then CF_TORCH_CUDA_ARCH_LIST, then pointops/cuda_arch_table.json
for the nvcc version. MAX_JOBS caps parallel compile jobs. The CUDA runtime is linked statically
and libtorch_cuda is not linked, so the same binary loads in CPU and CUDA builds of torch.
The static runtime is taken from POINTOPS_CUDA_TARGET_ROOT when set (a conda build points it at
the host prefix, which holds the target platform's runtime when cross-compiling), else from the
toolkit root.

Progress: one line per step on stdout, `pointops: [3/17] compiling csrc/cpu/knn_cpu.cpp`, then
linking and the load check. pip shows it with `pip install -v` (it captures a build's output
otherwise); `solver wheels build` relays it.

The C++ runtime must be the one torch's process loads (cxx_runtime_check.py): a compiler that
links libstdc++ statically is refused before compiling, and the linked library is loaded beside
torch in a child interpreter before it is installed (POINTOPS_LOAD_CHECK=0 skips that load).
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import setuptools
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
CSRC = HERE / "csrc"
# Oldest PyTorch whose stable ABI we target, in TORCH_ABI_VERSION encoding (major<<56 | minor<<48).
TORCH_TARGET = (2, 10)
TORCH_TARGET_MACRO = f"0x{TORCH_TARGET[0]:02x}{TORCH_TARGET[1]:02x}000000000000"
PY_LIMITED_API = "0x030A0000"  # Python 3.10
IS_WINDOWS = sys.platform == "win32"
# pyproject.toml admits setuptools >= 68, but `project.license` as an SPDX string (the current
# form; the table form is deprecated) is valid only from setuptools 77. The license is dynamic
# there and given here in the form this setuptools understands.
LICENSE = "BSD-3-Clause"
LICENSE_METADATA = (
    {"license_expression": LICENSE}
    if int(setuptools.__version__.split(".")[0]) >= 77
    else {"license": LICENSE}
)


def _load_by_path(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _load_cuda_archs():
    """pointops/cuda_archs.py by path: importing the package would try to load the extension."""
    return _load_by_path("_pointops_cuda_archs", HERE / "pointops" / "cuda_archs.py")


def _fail(message: str) -> None:
    sys.stderr.write(f"\npointops build error: {message}\n\n")
    raise SystemExit(1)


def _torch():
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError:
        _fail(
            "PyTorch is not installed in this environment. Install torch >= 2.10 first, then run "
            "`pip install ./ops-src --no-build-isolation` (build isolation would hide torch)."
        )
    version = tuple(int(x) for x in re.findall(r"\d+", torch.__version__)[:2])
    if version < TORCH_TARGET:
        _fail(
            f"torch {torch.__version__} is too old; pointops needs torch >= "
            f"{TORCH_TARGET[0]}.{TORCH_TARGET[1]} (stable ABI)."
        )
    return torch, cpp_extension


def _max_jobs() -> int:
    value = os.environ.get("MAX_JOBS", "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            _fail(f"MAX_JOBS={value!r} is not a positive integer.")
        return int(value)
    return max(1, os.cpu_count() or 1)


def _find_cuda_home(cpp_extension) -> Path | None:
    """The toolkit root: CUDA_HOME / CUDA_PATH, torch's guess, /usr/local/cuda, or the root of
    the nvcc on PATH (following a wrapper script through `nvcc --dryrun`'s TOP= line)."""
    candidates = [
        os.environ.get("CUDA_HOME"),
        os.environ.get("CUDA_PATH"),
        getattr(cpp_extension, "CUDA_HOME", None),
        "/usr/local/cuda",
    ]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    for candidate in candidates:
        if candidate and (Path(candidate) / "bin" / ("nvcc.exe" if IS_WINDOWS else "nvcc")).exists():
            return Path(candidate)
    if nvcc:
        out = subprocess.run([nvcc, "--dryrun", "x.cu"], capture_output=True, text=True)
        m = re.search(r"TOP=(\S+)", out.stdout + out.stderr)
        if m:
            return Path(m.group(1).strip('"'))
    return None


def _find_nvcc(cuda_home: Path | None) -> str | None:
    if cuda_home is not None:
        candidate = cuda_home / "bin" / ("nvcc.exe" if IS_WINDOWS else "nvcc")
        if candidate.exists():
            return str(candidate)
    return shutil.which("nvcc")


def _nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"release (\d+\.\d+)", out)
    if not m:
        _fail(f"could not read the CUDA version from `{nvcc} --version`:\n{out}")
    return m.group(1)


def _find_cudart_static(cuda_home: Path) -> Path:
    name = "cudart_static.lib" if IS_WINDOWS else "libcudart_static.a"
    target_root = os.environ.get("POINTOPS_CUDA_TARGET_ROOT", "").strip()
    root = Path(target_root) if target_root else cuda_home
    patterns = ["lib64", "lib", "lib/x64", "targets/*/lib", "targets/*/lib64"]
    for pattern in patterns:
        for directory in sorted(glob.glob(str(root / pattern))):
            if (Path(directory) / name).exists():
                return Path(directory)
    where = "POINTOPS_CUDA_TARGET_ROOT" if target_root else "CUDA_HOME"
    _fail(
        f"{name} (the static CUDA runtime) was not found under {root}; set {where} to the "
        "root that holds it (the toolkit root, or the conda host prefix with cuda-cudart-static)."
    )


def _compiler_version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60)
        text = (out.stdout or out.stderr).strip().splitlines()
        return text[0] if text else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _want_cuda(torch) -> bool:
    value = os.environ.get("POINTOPS_CUDA", "").strip()
    if value not in ("", "0", "1"):
        _fail(f"POINTOPS_CUDA={value!r}: use 1 (build CUDA kernels), 0 (CPU only) or leave it unset.")
    if value:
        return value == "1"
    return torch.version.cuda is not None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def _write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class _Progress:
    """Counted progress lines on stdout ("pointops: [3/17] compiling csrc/cpu/knn_cpu.cpp"), from
    the compile threads too: plain lines, the same on a terminal and in a log."""

    def __init__(self, total: int):
        self.total = total
        self.done = 0
        self.lock = threading.Lock()

    @staticmethod
    def say(message: str) -> None:
        print(f"pointops: {message}", flush=True)

    def compiling(self, source: str) -> None:
        shown = Path(source)
        if shown.is_absolute() and shown.is_relative_to(HERE):
            shown = shown.relative_to(HERE)
        with self.lock:
            self.done += 1
            self.say(f"[{self.done}/{self.total}] compiling {shown.as_posix()}")


class BuildPointops(build_ext):
    """Compiles the C++ (and, when enabled, CUDA) sources in parallel and links one library."""

    def get_export_symbols(self, ext):
        return []  # a library of torch ops, not a Python module: there is no PyInit_ to export

    def build_extensions(self):
        torch, cpp_extension = _torch()
        ext = self.extensions[0]
        cuda_home = _find_cuda_home(cpp_extension)
        nvcc = _find_nvcc(cuda_home)
        with_cuda = _want_cuda(torch) and (nvcc is not None or os.environ.get("POINTOPS_CUDA") == "1")
        if with_cuda and nvcc is None:
            _fail("POINTOPS_CUDA=1 but nvcc was not found; put nvcc on PATH or set CUDA_HOME.")
        if not with_cuda and torch.version.cuda is not None and os.environ.get("POINTOPS_CUDA") != "0":
            print(
                f"pointops: torch {torch.__version__} is a CUDA build but nvcc was not found; "
                "building the CPU kernels only (install the CUDA toolkit or set CUDA_HOME)",
                flush=True,
            )
        cu_sources = sorted(str(p) for p in (CSRC / "cuda").glob("*.cu"))
        if with_cuda and not cu_sources:
            _fail("CUDA build requested but csrc/cuda/ has no .cu sources.")
        # CPU-only and CUDA objects share names but not macros (POINTOPS_WITH_CUDA): keep them
        # in separate directories so one variant never links the other's stale objects.
        base_temp = self.build_temp
        self.build_temp = os.path.join(base_temp, "cuda" if with_cuda else "cpu")
        progress = _Progress(len(ext.sources) + (len(cu_sources) if with_cuda else 0))

        # Headers count as dependencies: an edited header rebuilds the library.
        ext.depends += sorted(str(p) for p in CSRC.rglob("*.h")) + sorted(str(p) for p in CSRC.rglob("*.cuh"))
        ext.include_dirs += [str(CSRC)] + cpp_extension.include_paths()
        ext.library_dirs += cpp_extension.library_paths()
        ext.libraries += ["torch_cpu"]
        ext.define_macros += [
            ("TORCH_TARGET_VERSION", TORCH_TARGET_MACRO),
            ("Py_LIMITED_API", PY_LIMITED_API),
        ]
        if IS_WINDOWS:
            ext.extra_compile_args += ["/O2", "/std:c++17", "/EHsc", "/permissive-"]
        else:
            # -ffp-contract=off: no fused multiply-add (gcc contracts by default where the target
            # has FMA, e.g. aarch64), so distances round exactly as in the CUDA kernels and in
            # the kernels' own bounds, and CPU and GPU pick the same indices. MSVC's default
            # /fp:precise does not contract.
            ext.extra_compile_args += ["-O3", "-std=c++17", "-fvisibility=hidden", "-ffp-contract=off"]
            if sys.platform.startswith("linux"):
                ext.extra_link_args += ["-Wl,--as-needed"]

        info = {
            "torch_target_version": f"{TORCH_TARGET[0]}.{TORCH_TARGET[1]}",
            "built_against_torch": torch.__version__,
            "python_abi": "abi3 (cp310)",
            "platform": f"{sys.platform}-{platform.machine()}",
            "cuda": with_cuda,
            "cuda_version": None,
            "sass_archs": [],
            "ptx_arch": None,
            "arch_source": None,
            "compiler": self._cxx_description(),
            "nvcc": None,
        }
        jobs = _max_jobs()
        if with_cuda:
            cuda_version = _nvcc_version(nvcc)
            archs = _load_cuda_archs()
            try:
                plan, source = archs.choose_plan(dict(os.environ), cuda_version)
            except archs.ArchListError as e:
                _fail(str(e))
            ext.define_macros.append(("POINTOPS_WITH_CUDA", "1"))
            objects = self._compile_cuda(nvcc, cu_sources, plan, jobs, progress)
            ext.extra_objects += objects
            # setuptools relinks only when a listed source or dependency is newer than the
            # library; the freshly compiled CUDA objects must count, or an edited .cu file
            # would leave the old kernels in the installed library.
            ext.depends += objects
            ext.library_dirs.append(str(_find_cudart_static(cuda_home)))
            ext.libraries.append("cudart_static")
            if not IS_WINDOWS:
                ext.libraries += ["dl", "rt", "pthread"]
            info.update(
                cuda_version=cuda_version,
                sass_archs=list(plan.sass),
                ptx_arch=plan.ptx[-1] if plan.ptx else None,
                arch_source=source,
                nvcc=f"nvcc {cuda_version} ({nvcc})",
            )
        elif not IS_WINDOWS:
            ext.libraries.append("dl")
        self._check_cxx_runtime_link()
        self._parallel_compile_cxx(ext, jobs, progress)
        stamp = Path(base_temp) / "pointops-build-config.json"
        config = json.dumps(
            {
                "info": info,
                "macros": ext.define_macros,
                "compile_args": ext.extra_compile_args,
                "libraries": ext.libraries,
            },
            sort_keys=True,
            default=str,
        )
        if _read_text(stamp) != config:
            # setuptools skips an extension whose library is newer than its sources, even when
            # the configuration (CPU-only vs CUDA, flags) changed: rebuild everything then.
            self.force = True
        super().build_extensions()
        if progress.done:
            _Progress.say(f"linked {self.get_ext_fullpath(ext.name)}")
        self._check_product_loads(ext)
        _write_text_atomic(stamp, config)
        self._write_build_info(info)

    def _check_cxx_runtime_link(self) -> None:
        """Refuses a compiler that would link libstdc++ statically (cxx_runtime_check.py says why)."""
        if IS_WINDOWS:
            return
        linker = getattr(self.compiler, "linker_so_cxx", None) or self.compiler.linker_so
        checks = _load_by_path("_pointops_cxx_runtime_check", HERE / "cxx_runtime_check.py")
        sign = checks.static_libstdcxx_sign(list(linker))
        if sign is not None:
            _fail(checks.static_link_message(list(linker), sign, self._cxx_description()))

    def _check_product_loads(self, ext) -> None:
        """Loads the linked library beside torch in a child and makes it format an error message."""
        checks = _load_by_path("_pointops_cxx_runtime_check", HERE / "cxx_runtime_check.py")
        skipped = checks.load_check_skipped()
        if skipped:
            print(f"pointops: not loading the built library to check it ({skipped})", flush=True)
            return
        library = self.get_ext_fullpath(ext.name)
        _Progress.say("loading the built library beside torch (a check)")
        problem = checks.load_problem(library)
        if problem is not None:
            os.remove(library)  # never leave a library behind that crashes its user
            linker = getattr(self.compiler, "linker_so_cxx", None) or self.compiler.linker_so
            _fail(
                f"the built library {library} is not usable: {problem}. Compiler: "
                f"{self._cxx_description()}. {checks.compiler_fix(linker[0])} (POINTOPS_LOAD_CHECK=0 skips "
                "this check, e.g. where torch cannot be imported during the build.)"
            )

    def _cxx_description(self) -> str:
        if IS_WINDOWS:
            return "msvc"
        cxx = os.environ.get("CXX") or "c++"
        return _compiler_version([cxx, "--version"]) or cxx

    def _parallel_compile_cxx(self, ext, jobs: int, progress: _Progress) -> None:
        """Make setuptools compile the C++ sources of `ext` on `jobs` threads (it is serial), one
        progress line per source."""
        original = self.compiler.compile

        def compile_one(source, **kwargs):
            progress.compiling(source)
            return original([source], **kwargs)

        def compile_parallel(sources, **kwargs):
            with ThreadPoolExecutor(max(1, min(jobs, len(sources)))) as pool:
                results = list(pool.map(lambda s: compile_one(s, **kwargs), sources))
            return [obj for objs in results for obj in objs]

        self.compiler.compile = compile_parallel

    def _compile_cuda(self, nvcc: str, sources: list[str], plan, jobs: int, progress: _Progress) -> list[str]:
        out_dir = Path(self.build_temp) / "cuda"
        out_dir.mkdir(parents=True, exist_ok=True)
        common = [
            nvcc,
            "-c",
            "-O3",
            "-std=c++17",
            f"-I{CSRC}",
            "-DPOINTOPS_WITH_CUDA=1",
            "--expt-relaxed-constexpr",
            *plan.gencode_flags(),
        ]
        common += ["-Xcompiler", "/MD"] if IS_WINDOWS else ["-Xcompiler", "-fPIC"]
        # nvcc compiles one source for several archs; give each job a share of the threads.
        threads = max(1, jobs // max(1, len(sources)))
        common += ["--threads", str(threads)]
        suffix = ".obj" if IS_WINDOWS else ".o"

        def compile_one(source: str) -> str:
            obj = str(out_dir / (Path(source).stem + suffix))
            cmd = [*common, source, "-o", obj]
            progress.compiling(source)
            print(" ".join(cmd), flush=True)
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError(f"nvcc failed on {source}:\n{result.stdout}{result.stderr}")
            return obj

        try:
            with ThreadPoolExecutor(max(1, min(jobs, len(sources)))) as pool:
                return list(pool.map(compile_one, sources))
        except RuntimeError as e:
            _fail(str(e))

    def _write_build_info(self, info: dict) -> None:
        target = Path(self.build_lib) / "pointops" / "_build_info.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, target)
        if self.inplace:
            inplace_target = HERE / "pointops" / "_build_info.json"
            shutil.copyfile(target, inplace_target)


setup(
    **LICENSE_METADATA,
    packages=["pointops", "pointops.compat"],
    py_modules=["pointnet2_batch_cuda"],  # openpoints' ops module, served by pointops
    package_data={"pointops": ["cuda_arch_table.json", "_build_info.json"]},
    ext_modules=[
        Extension(
            "pointops._C",
            sources=sorted(
                str(p.relative_to(HERE))
                for p in [
                    *CSRC.glob("*.cpp"),
                    *(CSRC / "binding").glob("*.cpp"),
                    *(CSRC / "cpu").glob("*.cpp"),
                ]
            ),
            py_limited_api=True,
        )
    ],
    cmdclass={"build_ext": BuildPointops},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)

"""Stand-ins of conda-forge's packages, generated from tests/data/conda_forge_metadata.yaml.

`conda_forge_records(...)` gives the package records (name, version, build, depends, constrains,
run_exports) of one platform as the data file describes them; `write_channel(...)` writes them as
conda packages and indexes the channel. A package is metadata only unless `files` gives it
content (tests/recipes/standin_toolchain.py wraps this machine's compiler, Python and torch that
way). Both the recipe tests and the solver tests build their channels from here.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import tarfile
from functools import cache
from pathlib import Path

import yaml

DATA = Path(__file__).resolve().parent / "data" / "conda_forge_metadata.yaml"
SUBDIR_ARCH = {
    "win-64": ("win", "x86_64"),
    "linux-64": ("linux", "x86_64"),
    "linux-aarch64": ("linux", "aarch64"),
    "osx-64": ("osx", "x86_64"),
    "osx-arm64": ("osx", "arm64"),
}
GLIBC = {"12.8": "2.17", "12.9": "2.17", "13.0": "2.28", None: "2.17"}


@cache
def metadata() -> dict:
    return yaml.safe_load(DATA.read_text())


def _packages() -> dict:
    return metadata()["packages"]


def _fill(items, **values) -> list[str]:
    return [str(item).format(**values) for item in items or ()]


def _hash(*parts: str) -> str:
    return hashlib.sha1("/".join(parts).encode()).hexdigest()[:7]


def _next_minor(version: str) -> str:
    major, minor = version.split(".")[:2]
    return f"{major}.{int(minor) + 1}"


def _next_patch(version: str) -> str:
    major, minor, patch = version.split(".")[:3]
    return f"{major}.{minor}.{int(patch) + 1}"


def record(
    name: str,
    version: str,
    build: str,
    subdir: str,
    build_number: int = 0,
    depends=(),
    constrains=(),
    run_exports: dict | None = None,
    noarch: str | None = None,
    track_features: str | None = None,
) -> dict:
    out = {
        "name": name,
        "version": str(version),
        "build": build,
        "build_number": int(build_number),
        "subdir": "noarch" if noarch else subdir,
        "depends": list(depends),
        "constrains": list(constrains),
    }
    if noarch:
        out["noarch"] = noarch
    if run_exports:
        out["run_exports"] = {k: list(v) for k, v in run_exports.items() if v}
    if track_features:
        out["track_features"] = track_features
    return out


def _cuda_values(cuda: str | None) -> dict:
    if cuda is None:
        return {}
    versions = metadata()["cuda"][cuda]
    major = int(cuda.split(".")[0])
    return {
        "cuda": cuda,
        "cuda_major": major,
        "cuda_next_major": major + 1,
        "cuda_next_minor": _next_minor(cuda),
        "nvcc": versions["nvcc"],
        "cudart": versions["cudart"],
        "cupti": versions["cupti"],
        "cupti_next_patch": _next_patch(versions["cupti"]),
    }


def cuda_records(subdir: str, cuda: str) -> list[dict]:
    """cuda-version, cuda-nvcc_<subdir> and the cuda-cudart family of one CUDA version."""
    pkgs = _packages()
    os_name = SUBDIR_ARCH[subdir][0]
    values = {**_cuda_values(cuda), "platform": subdir}
    aarch64 = subdir == "linux-aarch64"
    out = []
    cv = pkgs["cuda-version"]
    out.append(
        record(
            "cuda-version",
            cuda,
            cv["build"],
            subdir,
            cv["build_number"],
            _fill(cv["depends"], **values),
            _fill(cv["constrains"], **values),
            noarch="generic",
        )
    )
    nvcc = pkgs["cuda-nvcc_{platform}"]
    depends = _fill(nvcc["depends"][os_name], **values) + (
        _fill(nvcc["depends"]["aarch64"], **values) if aarch64 else []
    )
    strong = _fill(nvcc["run_exports"]["strong"], **values) + (
        _fill(nvcc["run_exports"]["strong_aarch64"], **values) if aarch64 else []
    )
    out.append(
        record(
            f"cuda-nvcc_{subdir}",
            values["nvcc"],
            nvcc["build"],
            subdir,
            nvcc["build_number"],
            depends,
            run_exports={"strong": strong},
        )
    )
    for name in (
        "cuda-cudart",
        "cuda-cudart-dev",
        "cuda-cudart-static",
        "cuda-cudart-dev_{platform}",
        "cuda-cudart-static_{platform}",
        "cuda-cudart_{platform}",
    ):
        spec = pkgs[name]
        depends = _fill(spec["depends"], **values) + (
            _fill(spec.get("depends_aarch64"), **values) if aarch64 else []
        )
        run_exports = None
        if "run_exports" in spec and os_name in spec["run_exports_on"][cuda]:
            run_exports = {k: _fill(v, **values) for k, v in spec["run_exports"].items()}
        out.append(
            record(
                name.format(platform=subdir),
                values["cudart"],
                spec["build"],
                subdir,
                0,
                depends,
                run_exports=run_exports,
                noarch=spec.get("noarch"),
            )
        )
    return out


def torch_records(
    subdir: str,
    torch: str,
    pythons: list[str],
    variants: list[str] | None = None,
    blas: list[str] | None = None,
) -> list[dict]:
    """libtorch and pytorch of one release for every variant (cpu, cuda1xx), blas and Python."""
    pkgs = _packages()
    release = pkgs["pytorch_releases"][torch]
    platform = pkgs["pytorch_variants"][subdir]
    os_name = SUBDIR_ARCH[subdir][0]
    tags = ["cpu"] + ["cuda" + c.replace(".", "") for c in platform["cuda"]]
    out = []
    for variant in variants or tags:
        cuda = None if variant == "cpu" else f"{variant[4:-1]}.{variant[-1]}"
        for blas_impl in blas or platform["blas"]:
            if blas_impl not in platform["blas"]:
                continue
            number = release["build"] + (200 if cuda else 0) + (100 if blas_impl == "mkl" else 0)
            values = {
                "version": torch,
                "minor_next": _next_minor(torch),
                "variant": variant,
                "blas": blas_impl,
                "number": number,
                "triton": release["triton"],
                "glibc": GLIBC[cuda],
                "gcc": platform.get("gcc", ""),
                **_cuda_values(cuda),
            }
            lib = pkgs["libtorch"]
            lib_build = lib["build"].format(
                hash=_hash("libtorch", torch, variant, blas_impl, subdir), **values
            )
            deps = lib["depends"]
            depends = (_fill(deps["mkl"], **values) if blas_impl == "mkl" else []) + _fill(
                deps[f"derived_{os_name}"], **values
            )
            if cuda:
                depends += _fill(deps["derived_cuda"], **values)
                if os_name == "win" and torch.startswith("2.13"):
                    depends += _fill(deps["win_cuda_2.13"], **values)
            constrains = _fill(lib["constrains"]["cuda" if cuda else "cpu"], **values)
            if os_name != "win" and blas_impl != "mkl":
                constrains += _fill(lib["constrains"]["unix_generic"], **values)
            out.append(
                record(
                    "libtorch",
                    torch,
                    lib_build,
                    subdir,
                    number,
                    depends,
                    constrains,
                    run_exports={k: _fill(v, **values) for k, v in lib["run_exports"].items()},
                )
            )
            spec = pkgs["pytorch"]
            deps = spec["depends"]
            for py in pythons:
                py_values = {
                    **values,
                    "libtorch_build": lib_build,
                    "py": py,
                    "py_nodot": py.replace(".", ""),
                    "py_next": _next_minor(py),
                }
                depends = _fill(deps["all"], **py_values) + _fill(deps[torch], **py_values)
                depends += _fill(deps["mkl" if blas_impl == "mkl" else "generic"], **py_values)
                if cuda:
                    depends += _fill(deps["cuda"], **py_values)
                    if os_name == "linux":
                        depends += _fill(deps["cuda_linux"], **py_values)
                    if os_name == "win" and torch.startswith("2.13"):
                        depends += _fill(deps["win_cuda_2.13"], **py_values)
                    depends += _fill(deps["derived_cuda"], **py_values)
                depends += _fill(deps["derived_python"], **py_values) + _fill(
                    deps[f"derived_{os_name}"], **py_values
                )
                build = spec["build"].format(
                    hash=_hash("pytorch", torch, variant, blas_impl, py, subdir), **py_values
                )
                out.append(
                    record(
                        "pytorch",
                        torch,
                        build,
                        subdir,
                        number,
                        depends,
                        _fill(spec["constrains"]["cuda" if cuda else "cpu"], **py_values),
                        run_exports={k: _fill(v, **py_values) for k, v in spec["run_exports"].items()},
                    )
                )
    return out


def python_records(subdir: str, py: str, full_version: str) -> list[dict]:
    """python (a cpython build, run_exports python_abi), python_abi, python-abi3 and its support."""
    pkgs = _packages()
    os_name = SUBDIR_ARCH[subdir][0]
    tag = "cp" + py.replace(".", "")
    # conda-forge's CPython builds end in _cpython up to 3.12 and in their cp tag from 3.13 on
    # (the pinning's python key: "3.12.* *_cpython", "3.13.* *_cp313").
    flavour = tag if int(py.split(".")[1]) >= 13 else "cpython"
    depends = (
        ["__glibc >=2.17,<3.0.a0"]
        if os_name == "linux"
        else (["ucrt >=10.0.20348.0", "vc14_runtime >=14.44.35208"] if os_name == "win" else [])
    )
    out = [
        record(
            "python",
            full_version,
            f"h0_0_{flavour}",
            subdir,
            0,
            depends + [f"python_abi {py}.* *_{tag}"],
            run_exports={"weak": [f"python_abi {py}.* *_{tag}"]},
        ),
        record("python_abi", py, f"8_{tag}", subdir, 8, constrains=[f"python {py}.* *_{flavour}"]),
    ]
    abi3 = pkgs["python-abi3"]
    unix_or_win = "win" if os_name == "win" else "unix"
    values = {"py": py, "os": unix_or_win}
    out.append(
        record(
            "python-abi3",
            py,
            abi3["build"].format(**values),
            subdir,
            abi3["build_number"],
            _fill(abi3["depends"], **values),
            noarch="generic",
            run_exports={k: _fill(v, **values) for k, v in abi3["run_exports"].items()},
        )
    )
    support = pkgs["_python_abi3_support"]
    out.append(
        record(
            "_python_abi3_support",
            support["version"],
            support["build"],
            subdir,
            support["build_number"],
            support["depends"],
            noarch="generic",
        )
    )
    return out


MSVC_RUNTIME = ("vc", "vc14_runtime", "vcomp14", "ucrt")


def compiler_records(subdir: str) -> list[dict]:
    """gcc_/gxx_ (14 and 15) and sysroot_ (2.17, 2.28) of a linux platform; vs2022 on win-64."""
    pkgs = _packages()
    out = []
    if subdir == "win-64":
        for name in ("vs2022_win-64", "vs_win-64"):
            out.append(_plain(name, pkgs[name], subdir))
        return out
    for gcc, full in pkgs["gcc_versions"].items():
        values = {"platform": subdir, "gcc": gcc, "gcc_full": full}
        for name in ("gcc_{platform}", "gxx_{platform}"):
            spec = pkgs[name]
            out.append(
                record(
                    name.format(**values),
                    full,
                    spec["build"],
                    subdir,
                    0,
                    _fill(spec["depends"], **values),
                    run_exports={k: _fill(v, **values) for k, v in spec["run_exports"].items()},
                )
            )
    for glibc in pkgs["sysroot_versions"]:
        spec = pkgs["sysroot_{platform}"]
        values = {"glibc": glibc}
        out.append(
            record(
                f"sysroot_{subdir}",
                glibc,
                spec["build"],
                subdir,
                0,
                _fill(spec["depends"], **values),
                run_exports={k: _fill(v, **values) for k, v in spec["run_exports"].items()},
                noarch="generic",
            )
        )
    return out


def _plain(name: str, spec: dict, subdir: str) -> dict:
    return record(
        name,
        spec["version"],
        spec["build"],
        subdir,
        spec.get("build_number", 0),
        spec.get("depends"),
        spec.get("constrains", ()),
        spec.get("run_exports"),
        track_features=spec.get("track_features"),
    )


def leaf_records(subdir: str, pythons: dict[str, str]) -> list[dict]:
    """The closure leaves (and the MSVC runtime on win-64) of one platform."""
    pkgs = _packages()
    leaves = pkgs["leaves"]
    out = [_plain(name, pkgs[name], subdir) for name in MSVC_RUNTIME] if subdir == "win-64" else []
    for name, version in leaves["versioned"].items():
        out.append(
            record(name.format(platform=subdir), version, "sbsa" if name == "arm-variant" else "h0_0", subdir)
        )
    for name in leaves["per_python"]:
        out += [record(name, full, "h0_0", subdir) for full in pythons.values()]
    for cuda in metadata()["cuda"]:
        values = _cuda_values(cuda)
        for name, key in leaves["per_cuda"].items():
            out.append(record(name.format(platform=subdir), values[key], "h0_0", subdir))
    for full in pkgs["gcc_versions"].values():
        out += [record(name.format(platform=subdir), full, "h0_0", subdir) for name in leaves["per_gcc"]]
    out += [record("triton", version, "h0_0", subdir) for version in leaves["triton"]]
    blas = leaves["libblas_mkl"]
    out.append(record("libblas", blas["version"], blas["build"], subdir, blas["build_number"]))
    for name, (version, depends) in leaves["python"].items():
        out.append(record(name, version, "pyh0_0", subdir, 0, ["python >=3.10", *depends], noarch="python"))
    return out


def conda_forge_records(
    subdir: str,
    pythons: dict[str, str],
    torch_versions=("2.13.0",),
    cuda_versions: list[str] | None = None,
    toolchain: bool = True,
) -> list[dict]:
    """Everything one platform needs: pythons ({"3.11": "3.11.7"}), pytorch/libtorch of each
    release, the CUDA packages and (toolchain=True) compilers and sysroots."""
    if cuda_versions is None:
        cuda_versions = _packages()["pytorch_variants"][subdir]["cuda"]
    out = []
    for py, full in pythons.items():
        out += python_records(subdir, py, full)
    for torch in torch_versions:
        variants = ["cpu"] + ["cuda" + c.replace(".", "") for c in cuda_versions]
        out += torch_records(subdir, torch, list(pythons), variants)
    for cuda in cuda_versions:
        out += cuda_records(subdir, cuda)
    if toolchain:
        out += compiler_records(subdir)
    out += leaf_records(subdir, pythons)
    unique = {(r["subdir"], r["name"], r["version"], r["build"]): r for r in out}
    return list(unique.values())


def package_archive(record: dict, files: dict[str, object] | None) -> bytes:
    """A .tar.bz2 conda package: info/index.json, info/paths.json, info/run_exports.json and the
    files ({path: bytes | ("symlink", target) | ("script", text)})."""
    index = {k: v for k, v in record.items() if k != "run_exports"}
    index.setdefault("license", "BSD-3-Clause")
    index["timestamp"] = 1767225600000
    if record["subdir"] != "noarch":
        index["platform"], index["arch"] = SUBDIR_ARCH[record["subdir"]]
    paths = []
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:bz2") as tar:
        for path, content in sorted((files or {}).items()):
            info = tarfile.TarInfo(path)
            info.mtime = 1767225600
            if isinstance(content, tuple) and content[0] == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = str(content[1])
                tar.addfile(info)
                paths.append(
                    {
                        "_path": path,
                        "path_type": "softlink",
                        "sha256": hashlib.sha256(b"").hexdigest(),
                        "size_in_bytes": 0,
                    }
                )
                continue
            data = content[1].encode() if isinstance(content, tuple) else bytes(content)
            info.size = len(data)
            info.mode = 0o755 if isinstance(content, tuple) else 0o644
            tar.addfile(info, io.BytesIO(data))
            paths.append(
                {
                    "_path": path,
                    "path_type": "hardlink",
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "size_in_bytes": len(data),
                }
            )
        meta = {"info/index.json": index, "info/paths.json": {"paths": paths, "paths_version": 1}}
        if record.get("run_exports"):
            meta["info/run_exports.json"] = record["run_exports"]
        for member, payload in meta.items():
            data = json.dumps(payload).encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            info.mtime = 1767225600
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write_channel(
    root: Path, records: list[dict], files: dict[tuple[str, str, str], dict] | None = None
) -> Path:
    """Write the records as packages under root/<subdir>/ and index them with py-rattler.
    `files` maps (name, version, build) to a package's content."""
    from rattler.index import index_fs

    root = Path(root)
    (root / "noarch").mkdir(parents=True, exist_ok=True)
    for rec in records:
        subdir = root / rec["subdir"]
        subdir.mkdir(parents=True, exist_ok=True)
        content = (files or {}).get((rec["name"], rec["version"], rec["build"]))
        path = subdir / f"{rec['name']}-{rec['version']}-{rec['build']}.tar.bz2"
        path.write_bytes(package_archive(rec, content))
    asyncio.run(index_fs(root, write_zst=False, write_shards=False))
    return root

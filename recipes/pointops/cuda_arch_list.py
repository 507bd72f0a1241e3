"""The TORCH_CUDA_ARCH_LIST a conda build of pointops compiles, derived from ops-src's arch table.

    python cuda_arch_list.py POINTOPS_DIR CUDA_VERSION TARGET_PLATFORM [--output FILE]

POINTOPS_DIR is the pointops package directory (in the build: `pointops` of the source tree; in
the recipe test: the installed package). Prints (or writes to FILE) e.g. "7.5;8.0;...;12.0+PTX":
the table entry's SASS archs for this CUDA version, the entry's extra SASS archs for this
platform, and its PTX arch. Feedstocks derive the list in the build script from the CUDA version
rather than zipping an arch-list key with cuda_compiler_version (that zip breaks the CUDA
migrations); pointops/cuda_arch_table.json stays the one place the lists are decided.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path


def _cuda_archs(pointops_dir: Path):
    """pointops/cuda_archs.py by path: importing the package would load the extension."""
    path = Path(pointops_dir) / "cuda_archs.py"
    if not path.is_file():
        raise SystemExit(f"cuda_arch_list.py: {path} does not exist; pass the pointops package directory")
    spec = importlib.util.spec_from_file_location("_pointops_cuda_archs_for_recipe", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _capability(arch: str) -> tuple[int, int]:
    major, minor = arch.split(".")
    return int(major), int(minor.rstrip("af"))


def archs_for(pointops_dir: Path, cuda_version: str, target_platform: str) -> tuple[list[str], str | None]:
    """(SASS archs in ascending order, PTX arch) of a conda build for this CUDA version and platform."""
    cuda_archs = _cuda_archs(pointops_dir)
    _, entry = cuda_archs.table_entry(
        cuda_version, cuda_archs.load_table(Path(pointops_dir) / "cuda_arch_table.json")
    )
    sass = set(entry["sass"]) | set(entry.get("extra_sass", {}).get(target_platform, []))
    return sorted(sass, key=_capability), entry.get("ptx")


def arch_list(pointops_dir: Path, cuda_version: str, target_platform: str) -> str:
    sass, ptx = archs_for(pointops_dir, cuda_version, target_platform)
    return ";".join(f"{arch}+PTX" if arch == ptx else arch for arch in sass)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pointops_dir", type=Path)
    parser.add_argument("cuda_version")
    parser.add_argument("target_platform")
    parser.add_argument("--output", type=Path, help="write the list to this file instead of stdout")
    args = parser.parse_args(argv)
    text = arch_list(args.pointops_dir, args.cuda_version, args.target_platform)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

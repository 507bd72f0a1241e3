"""The compilers someone building another CUDA extension will use: nvcc against torch.version.cuda
(torch.utils.cpp_extension refuses a different major), and the host gcc against the newest gcc that
nvcc accepts (nvcc stops with "unsupported GNU version" otherwise).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping

from solver.knowledge import Knowledge, parse_version

from .facts import Facts, ToolchainFacts
from .findings import Finding, failed, info, passed, warned

TOOL_TIMEOUT_S = 15.0


# ---------------------------------------------------------------- gathering


def parse_nvcc_version(text: str) -> str | None:
    """'Cuda compilation tools, release 13.0, V13.0.88' -> '13.0'."""
    match = re.search(r"release (\d+\.\d+)", text)
    return match.group(1) if match else None


def parse_gcc_version(text: str) -> str | None:
    """First line of `gcc --version`: 'gcc (Debian 12.2.0-14+deb12u1) 12.2.0' -> '12.2.0'."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if "clang" in first.lower():
        return None
    match = re.search(r"(\d+\.\d+(\.\d+)?)\s*$", first) or re.search(r"\s(\d+\.\d+\.\d+)", first)
    return match.group(1) if match else None


def _version_output(executable: str) -> str:
    from solver import bounded

    return bounded.run([executable, "--version"], TOOL_TIMEOUT_S).output


def gather_toolchain(env: Mapping[str, str]) -> ToolchainFacts:
    facts = ToolchainFacts(cuda_home=env.get("CUDA_HOME") or env.get("CUDA_PATH"))
    path = env.get("PATH", os.defpath)
    facts.nvcc_path = shutil.which("nvcc", path=path)
    if facts.nvcc_path:
        facts.nvcc_version = parse_nvcc_version(_version_output(facts.nvcc_path))
    # nvcc uses NVCC_CCBIN / CUDAHOSTCXX when set, else the gcc on PATH.
    host = env.get("NVCC_CCBIN") or env.get("CUDAHOSTCXX") or shutil.which("gcc", path=path)
    if host:
        facts.gcc_path = host
        facts.gcc_version = parse_gcc_version(_version_output(host))
    return facts


# ---------------------------------------------------------------- checks


def _major_minor(version: str) -> tuple[int, ...]:
    return parse_version(version)[:2]


def check_nvcc(facts: Facts) -> list[Finding]:
    check = "toolchain.nvcc"
    tools, torch = facts.toolchain, facts.torch
    if not tools.nvcc_path:
        return [
            info(
                check,
                "nvcc is not on PATH (needed only to build other CUDA extensions)",
                f"CUDA_HOME={tools.cuda_home}" if tools.cuda_home else "",
            )
        ]
    if not tools.nvcc_version:
        return [
            warned(
                check,
                f"{tools.nvcc_path} did not report its version",
                "",
                f"run `{tools.nvcc_path} --version`",
            )
        ]
    evidence = f"nvcc {tools.nvcc_version} at {tools.nvcc_path}; torch {torch.version or '-'} CUDA {torch.cuda or '-'}"
    findings = []
    if tools.cuda_home:
        home = os.path.normcase(os.path.abspath(tools.cuda_home))
        if not os.path.normcase(os.path.abspath(tools.nvcc_path)).startswith(home):
            findings.append(
                warned(
                    check,
                    "CUDA_HOME points at another toolkit than the nvcc on PATH; torch.utils.cpp_extension uses "
                    "CUDA_HOME",
                    f"CUDA_HOME={tools.cuda_home}; {evidence}",
                    f"export CUDA_HOME={os.path.dirname(os.path.dirname(tools.nvcc_path))}  (or put $CUDA_HOME/bin first on PATH)",
                )
            )
    if not torch.importable or not torch.cuda:
        return findings + [
            info(
                check,
                f"nvcc {tools.nvcc_version} found; torch is not a CUDA build, nothing to match",
                evidence,
            )
        ]
    nvcc, built = _major_minor(tools.nvcc_version), _major_minor(torch.cuda)
    conda_fix = f'conda install -c conda-forge "cuda-nvcc={torch.cuda}" "cuda-version={torch.cuda}"'
    if nvcc[0] != built[0]:
        findings.append(
            failed(
                check,
                f"nvcc {tools.nvcc_version} and torch's CUDA {torch.cuda} differ in major version: building CUDA "
                "extensions fails (torch.utils.cpp_extension raises a CUDA version mismatch)",
                evidence,
                f"{conda_fix}  (or point CUDA_HOME at a CUDA {torch.cuda} toolkit)",
            )
        )
    elif nvcc != built:
        findings.append(
            warned(
                check,
                f"nvcc {tools.nvcc_version} and torch's CUDA {torch.cuda} differ in minor version; extensions "
                "usually build, but can use features this torch's runtime lacks",
                evidence,
                conda_fix,
            )
        )
    else:
        findings.append(
            passed(check, f"nvcc {tools.nvcc_version} matches torch's CUDA {torch.cuda}", evidence)
        )
    return findings


def check_host_compiler(facts: Facts, kb: Knowledge) -> list[Finding]:
    check = "toolchain.host-compiler"
    tools = facts.toolchain
    if facts.is_windows or not tools.nvcc_version:
        return []
    if not tools.gcc_version:
        return [
            info(
                check,
                "no gcc found for nvcc to use",
                tools.gcc_path or "gcc is not on PATH",
                "conda install -c conda-forge gxx  (or set NVCC_CCBIN)",
            )
        ]
    try:
        gcc_max = kb.toolkit(tools.nvcc_version).gcc_max
    except KeyError:
        return [
            info(
                check,
                f"no knowledge of the newest gcc that nvcc {tools.nvcc_version} accepts",
                f"gcc {tools.gcc_version}",
            )
        ]
    gcc_major = parse_version(tools.gcc_version)[0]
    evidence = (
        f"gcc {tools.gcc_version} ({tools.gcc_path}); nvcc {tools.nvcc_version} accepts gcc <= {gcc_max}"
    )
    if gcc_major > gcc_max:
        return [
            failed(
                check,
                f"gcc {gcc_major} is newer than nvcc {tools.nvcc_version} supports "
                '("unsupported GNU version")',
                evidence,
                f'conda install -c conda-forge "gxx={gcc_max}" and export NVCC_CCBIN=$CONDA_PREFIX/bin/g++  '
                f"(or a system g++-{gcc_max})",
            )
        ]
    return [passed(check, f"gcc {gcc_major} is supported by nvcc {tools.nvcc_version}", evidence)]


def check_toolchain(facts: Facts, kb: Knowledge) -> list[Finding]:
    return check_nvcc(facts) + check_host_compiler(facts, kb)

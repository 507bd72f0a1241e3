"""Extension import failures: a real shared library with an undefined torch symbol, a module that
crashes the interpreter and one that hangs, each imported by the runtime probe in a child process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
from doctor_helpers import write_dist

from solver.doctor_checks.dists import read_installed
from solver.doctor_checks.facts import CondaRecord, Facts, ImportFact, TorchFacts
from solver.doctor_checks.gather import run_runtime_probe
from solver.doctor_checks.imports import (
    check_imports,
    classify_import_error,
    discover_extensions,
    finding_for_import,
)

TORCH_SYMBOL = "_ZN3c1015SmallVectorBaseIjE8grow_podEPKvmm"


def _site_with(tmp_path, name: str, init_code: str, requires=("torch>=2.4",), version="0.3.1+pt24cu121"):
    site = write_dist(
        tmp_path,
        name,
        version,
        "pip",
        requires=requires,
        record_files=[f"{name}/__init__.py", f"{name}/_C.abi3.so"],
    )
    package = site / name
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(init_code)
    return site


def _env(site, without_torch=False):
    """The child's environment: the test site first; optionally a torch that refuses to import, so that
    tests of crash and hang handling do not wait for the real torch to load."""
    paths = [str(site)]
    if without_torch:
        (site.parent / "notorch" / "torch").mkdir(parents=True, exist_ok=True)
        (site.parent / "notorch" / "torch" / "__init__.py").write_text(
            "raise ImportError('torch left out')\n"
        )
        paths.insert(0, str(site.parent / "notorch"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*paths, env.get("PYTHONPATH")]))
    return env


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the broken extension")
def test_undefined_torch_symbol_is_named_as_an_abi_mismatch(tmp_path):
    site = _site_with(tmp_path, "oldext", "from . import _C\n")
    source = tmp_path / "ext.c"
    # A library built against another torch: it references a libc10 symbol the installed torch lacks.
    source.write_text(f"extern void {TORCH_SYMBOL}(void);\nvoid oldext_entry(void) {{ {TORCH_SYMBOL}(); }}\n")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(site / "oldext" / "_C.abi3.so"), str(source)], check=True
    )
    modules = discover_extensions(read_installed([site]))
    assert [(m.module, m.distribution, m.distribution_version, m.torch_requirement) for m in modules] == [
        ("oldext", "oldext", "0.3.1+pt24cu121", "torch>=2.4")
    ]
    assert modules[0].origin.kind == "index" and modules[0].origin.installer == "pip"
    torch, _, imports = run_runtime_probe(sys.executable, modules, _env(site), timeout_s=120)
    [result] = imports
    assert f"undefined symbol: {TORCH_SYMBOL}" in result.error
    finding = finding_for_import(result, torch.version or "2.13.0", torch.cuda)
    assert finding.status == "fail" and "ABI mismatch" in finding.summary
    assert TORCH_SYMBOL in finding.evidence and "built for torch 2.4" in finding.evidence
    assert "oldext 0.3.1+pt24cu121 requires torch>=2.4" in finding.evidence
    assert f"installed torch {torch.version}" in finding.summary
    assert finding.fix.startswith("pip install --force-reinstall --no-cache-dir --no-deps oldext")


def test_a_crashing_and_a_hanging_extension_cost_one_module_each(tmp_path):
    crash_site = _site_with(
        tmp_path / "a", "crashext", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
    )
    modules = discover_extensions(read_installed([crash_site]))
    torch, _, imports = run_runtime_probe(
        sys.executable, modules, _env(crash_site, without_torch=True), timeout_s=60
    )
    assert torch.import_error == "ImportError: torch left out"  # reported before the crash
    [crashed] = imports
    assert crashed.error == f"crashed the interpreter with SIGSEGV (signal {int(signal.SIGSEGV)})"
    assert finding_for_import(crashed, torch.version, torch.cuda).status == "fail"

    hang_site = _site_with(tmp_path / "b", "hangext", "import time\ntime.sleep(60)\n")
    _, _, imports = run_runtime_probe(
        sys.executable,
        discover_extensions(read_installed([hang_site])),
        _env(hang_site, without_torch=True),
        timeout_s=3,
    )
    [hung] = imports
    assert hung.error.startswith("timed out after 3 s")
    assert finding_for_import(hung, "2.13.0", None).status == "warn"


def test_a_module_named_like_a_file_next_to_the_probe_is_the_environments(tmp_path):
    """The probe runs as a script, so Python puts its folder (solver/doctor_checks: mmcv.py,
    network.py ...) first on sys.path: the environment's `network` or `mmcv` must win."""
    site = tmp_path / "site"
    for name in ("network", "mmcv"):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text("FROM_THE_ENVIRONMENT = True\n")
    modules = [ImportFact("network"), ImportFact("mmcv")]
    _, _, imports = run_runtime_probe(sys.executable, modules, _env(site, without_torch=True), timeout_s=60)
    assert [(m.module, m.error, m.path) for m in imports] == [
        ("network", "", str(site / "network")),
        ("mmcv", "", str(site / "mmcv")),
    ]


def test_discovery_skips_distributions_that_do_not_need_torch(tmp_path):
    site = _site_with(tmp_path, "numlike", "", requires=("numpy",))
    write_dist(
        tmp_path,
        "safetensors",
        "0.8.0",
        "pip",
        requires=["torch>=1.10 ; extra == 'torch'"],
        record_files=["safetensors/_safetensors_rust.abi3.so"],
    )
    write_dist(
        tmp_path,
        "torchext",
        "1.0",
        "pip",
        requires=["torch (>=2.4) ; python_version >= '3.10'", "numpy"],
        record_files=[
            "torchext/_ops.cpython-311-x86_64-linux-gnu.so",
            "torchext.libs/libgomp.so.1",
            "top_level_ext.cpython-311-x86_64-linux-gnu.so",
        ],
    )
    assert [
        (m.module, m.distribution, m.distribution_version)
        for m in discover_extensions(read_installed([site]))
    ] == [
        ("torchext", "torchext", "1.0"),
        ("top_level_ext", "torchext", "1.0"),
    ]


@pytest.mark.parametrize(
    ("error", "cause", "detail"),
    [
        (f"ImportError: /x/_C.so: undefined symbol: {TORCH_SYMBOL}", "abi", TORCH_SYMBOL),
        (
            "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory",
            "missing-library",
            "libcudart.so.11.0",
        ),
        (
            "ImportError: DLL load failed while importing _ext: The specified module could not be found. (fbgemm.dll)",
            "dll",
            "fbgemm.dll",
        ),
        (
            "ImportError: DLL load failed while importing _ext: The specified procedure could not be found.",
            "abi",
            "a procedure in a torch DLL",
        ),
        ("ModuleNotFoundError: No module named 'yaml'", "missing-module", "yaml"),
        (
            "ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.32' not found "
            "(required by /env/site-packages/mmcv/_ext.cpython-311-x86_64-linux-gnu.so)",
            "libstdcxx",
            "GLIBCXX_3.4.32",
        ),
        (
            "crashed the interpreter with SIGBUS (signal 7)",
            "crash",
            "crashed the interpreter with SIGBUS (signal 7)",
        ),
        ("RuntimeError: something else", "other", "RuntimeError: something else"),
    ],
)
def test_classify_import_errors(error, cause, detail):
    assert classify_import_error(error) == (cause, detail)


def test_conda_extension_names_the_pytorch_it_was_built_for():
    records = [
        CondaRecord(
            "torchvision",
            "0.20.1",
            "cuda126_py311_h0_1",
            depends=["libtorch >=2.5.1,<2.6.0a0", "pytorch >=2.5.1,<2.6.0a0", "python"],
        )
    ]
    result = ImportFact(
        "torchvision", "torchvision", "0.20.1", f"ImportError: x.so: undefined symbol: {TORCH_SYMBOL}"
    )
    finding = finding_for_import(result, "2.6.0", "12.6", records)
    assert finding.status == "fail" and "installed torch 2.6.0 (CUDA 12.6)" in finding.summary
    assert (
        "conda torchvision 0.20.1 (cuda126_py311_h0_1) needs libtorch >=2.5.1,<2.6.0a0, "
        "pytorch >=2.5.1,<2.6.0a0"
    ) in finding.evidence
    assert finding.fix.startswith('conda install "torchvision" "pytorch=2.6.0"')


def test_missing_cuda_runtime_names_a_cuda_mismatch():
    result = ImportFact(
        "mmcv", "mmcv", "2.1.0", "ImportError: libcudart.so.11.0: cannot open shared object file"
    )
    finding = finding_for_import(result, "2.5.1", "12.4")
    assert (
        finding.status == "fail"
        and "built for another CUDA than the installed torch 2.5.1 (CUDA 12.4)" in finding.summary
    )


def test_no_extensions_or_no_torch_are_notes():
    assert [f.status for f in check_imports(Facts(torch=TorchFacts(importable=False)), None)] == ["info"]
    assert [
        f.status for f in check_imports(Facts(torch=TorchFacts(importable=True, version="2.13.0")), None)
    ] == ["info"]


def _package(site, name: str, init_code: str) -> None:
    (site / name).mkdir(parents=True, exist_ok=True)
    (site / name / "__init__.py").write_text(init_code)


def test_a_crash_in_the_pointops_step_is_named_and_the_other_imports_still_run(tmp_path):
    """The probe child dies in `import pointops` (SIGBUS, as a truncated _C does); doctor runs it again
    without pointops, so the modules after it are still imported, and each death is named."""
    site = tmp_path / "site"
    _package(site, "pointops", "import os, signal\nos.kill(os.getpid(), signal.SIGBUS)\n")
    _package(site, "exits", "import os\nos._exit(3)\n")
    _package(site, "fine", "")
    modules = [ImportFact("exits"), ImportFact("fine")]
    torch, pointops, imports = run_runtime_probe(
        sys.executable, modules, _env(site, without_torch=True), timeout_s=60
    )
    assert torch.import_error == "ImportError: torch left out"
    assert (pointops.installed, pointops.stage, pointops.path) == (True, "import", str(site / "pointops"))
    assert pointops.error == f"crashed the interpreter with SIGBUS (signal {int(signal.SIGBUS)})"
    assert [(m.module, m.error) for m in imports] == [
        ("exits", "ended the interpreter with exit status 3 before it finished"),
        ("fine", ""),
    ]
    assert classify_import_error(imports[0].error)[0] == "crash"


def test_a_death_reported_by_a_wrapper_as_128_plus_the_signal_is_named():
    from solver.bounded import Completed
    from solver.doctor_checks.gather import describe_death

    assert (
        describe_death(Completed(135), 60)
        == "crashed the interpreter with SIGBUS (signal 7) (exit status 135)"
    )
    assert describe_death(Completed(-11), 60) == "crashed the interpreter with SIGSEGV (signal 11)"
    assert describe_death(Completed(None, timed_out=True), 60) == "timed out after 60 s"
    assert describe_death(Completed(0), 60) == "ended the interpreter with exit status 0 before it finished"


def test_an_import_error_shown_whole_gets_a_fix_not_a_rerun_of_the_import():
    short = ImportFact("ext", "ext", "1.0", "RuntimeError: built for another numpy")
    finding = finding_for_import(short, "2.13.0", None)
    assert finding.status == "warn" and "python -c" not in finding.fix and "--no-deps" in finding.fix
    long = ImportFact("ext", "ext", "1.0", "RuntimeError: " + "x" * 700)
    assert finding_for_import(long, "2.13.0", None).fix == "python -c 'import ext' for the full error"
    missing = ImportFact("ext", "ext", "1.0", "ModuleNotFoundError: No module named 'yaml'")
    finding = finding_for_import(missing, "2.13.0", None)
    assert "needs the module yaml" in finding.summary and "pip check" in finding.fix


FAKE_TORCH_CUDA_CRASH = """
import os, signal, types
__version__ = "2.13.0+cu130"
version = types.SimpleNamespace(cuda="13.0")
def _crash():
    os.kill(os.getpid(), signal.SIGSEGV)
cuda = types.SimpleNamespace(is_available=_crash)
"""


def test_a_crash_while_importing_torch_or_asking_cuda_is_a_failure_never_a_missing_torch(tmp_path):
    from solver.doctor_checks.gpu import check_gpu
    from solver.knowledge import load

    crashing = tmp_path / "a"
    _package(crashing, "torch", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    torch, pointops, imports = run_runtime_probe(
        sys.executable, [ImportFact("json")], _env(crashing), timeout_s=60
    )
    assert (
        torch.import_error
        == f"importing torch crashed the interpreter with SIGSEGV (signal {int(signal.SIGSEGV)})"
    )
    assert (pointops.stage, imports) == ("not tried", [])
    [finding] = [
        f for f in check_gpu(Facts(platform="linux-64", torch=torch), load()) if f.check == "gpu.torch-build"
    ]
    assert finding.status == "fail" and finding.summary == "torch does not import"

    cuda_crash = tmp_path / "b"
    _package(cuda_crash, "torch", FAKE_TORCH_CUDA_CRASH)
    _package(cuda_crash, "pointops", "")
    torch, pointops, imports = run_runtime_probe(
        sys.executable, [ImportFact("json")], _env(cuda_crash), timeout_s=60
    )
    assert torch.importable and torch.version == "2.13.0+cu130"
    assert torch.cuda_error.startswith("asking torch.cuda crashed the interpreter with SIGSEGV")
    assert pointops.installed and [(m.module, m.error) for m in imports] == [("json", "")]  # tried again
    findings = check_gpu(Facts(platform="linux-64", torch=torch), load())
    assert [f.status for f in findings if f.summary.startswith("torch imports, but asking torch.cuda")] == [
        "fail"
    ]


def test_pointops_gets_one_import_verdict_from_the_probes_pointops_step():
    from solver.doctor_checks.facts import PointopsFacts
    from solver.doctor_checks.gather import with_pointops_import

    asked = [ImportFact("pointops", "pointops", "0.1.0"), ImportFact("json")]
    tried = [ImportFact("json")]
    crashed = PointopsFacts(
        installed=True, stage="import", error="crashed the interpreter with SIGBUS (signal 7)"
    )
    assert [(m.module, m.error) for m in with_pointops_import(asked, tried, crashed)] == [
        ("pointops", crashed.error),
        ("json", ""),
    ]
    absent = PointopsFacts(installed=False, stage="")  # --import pointops where there is none
    [pointops, _] = with_pointops_import(asked, tried, absent)
    assert pointops.error == "ModuleNotFoundError: No module named 'pointops'"
    source_tree = PointopsFacts(installed=True, stage="", path="/src/ops-src/pointops")  # no dist-info
    assert [m.module for m in with_pointops_import([ImportFact("json")], tried, source_tree)] == [
        "pointops",
        "json",
    ]
    assert with_pointops_import(asked, [], PointopsFacts(stage="not tried")) == []

"""`solver channel build` drives rattler-build for real: it renders this platform's variants,
resolves the build and host environments from the given channel, copies ops-src, and runs
build.sh with the variant's settings, printing progress.

The channel here is a local one of metadata-only packages (no conda channel is reachable from
CI), so its `python` has no interpreter and build.sh stops at `$PYTHON -m pip install`: the test
checks everything up to that point and that the failure comes back as one clear error.
"""

from __future__ import annotations

import pytest

from solver import cli
from solver.channel import current_platform

pytestmark = pytest.mark.skipif(current_platform() != "linux-64", reason="the stand-in channel describes linux-64")


def test_build_runs_the_recipe_and_reports_the_failing_variant(linux_dependency_channel, tmp_path, capsys):
    output = tmp_path / "channel"
    code = cli.main(["channel", "build", "--channel", linux_dependency_channel.as_uri(), "--variant", "cpu",
                     "--no-test", "--output", str(output)])
    err = capsys.readouterr().err
    assert code == 1
    assert "[1/1 cpu_h" in err and "building pointops for linux-64" in err
    assert "solver channel: error: building cpu_h" in err and "Traceback" not in err
    (work,) = output.glob("bld/rattler-build_pointops_*/work")
    assert (work / "setup.py").is_file() and (work / "pointops" / "cuda_arch_table.json").is_file()
    build_env = (work / "build_env.sh").read_text()
    assert "export POINTOPS_CUDA=0" in build_env
    assert "pip install . -vv --no-deps --no-build-isolation" in (work / "conda_build.sh").read_text()


def test_an_unknown_variant_is_refused(linux_dependency_channel, tmp_path, capsys):
    code = cli.main(["channel", "build", "--channel", linux_dependency_channel.as_uri(), "--variant", "cuda999",
                     "--output", str(tmp_path / "channel")])
    assert code == 1
    assert "no variant of linux-64 matches ['cuda999']" in capsys.readouterr().err

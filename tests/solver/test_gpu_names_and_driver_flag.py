"""Issue 44 item 9: GPU names typed without spaces, the hint for an unknown name, `--driver 550`.

- `--gpu "GTX 1080Ti"` was "unknown GPU" with the hint `--gpu 'GTX 1080Ti:8.6'`: the docs say case
  and punctuation are ignored, and the card is 6.1 (NVIDIA's legacy CUDA GPU page). Spacing is
  ignored too now, and a hint never names a compute capability: it says where to read it.
- `--driver 550` was a usage error: a branch number is read as that branch's first driver in the
  tables (R550: 550.54.14 on Linux, CUDA 12.4's 551.61 on Windows), and the plan says so.
"""

from __future__ import annotations

import re

import pytest

from solver import cli
from solver.knowledge import load
from solver.plan import make_plan
from solver.target import TargetError, build_target

pytestmark = pytest.mark.usefixtures("no_overrides")


@pytest.mark.parametrize(
    "name,cc",
    [
        ("GTX 1080Ti", "6.1"),
        ("GeForce GTX1080Ti", "6.1"),
        ("1080Ti", "6.1"),
        ("gtx 1080 ti", "6.1"),
        ("RTX4090", "8.9"),
        ("RTX 3050Ti", "8.6"),
        ("RTX3050A Laptop GPU", "8.9"),
        ("Quadro RTX5000", "7.5"),
        ("RTXA6000", "8.6"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
    ],
)
def test_spacing_is_ignored_in_gpu_names(kb, name, cc):
    assert kb.gpu_compute_capability(name) == cc


@pytest.mark.parametrize(
    "name,expected",
    [
        ("Quadro K6000M", None),  # a mobile GK104 part, not the K6000
        ("NVIDIA L40S", "NVIDIA L40S"),  # not the L40 or the L4
        ("NVIDIA L4", "NVIDIA L4"),
        ("NVIDIA A10G", "NVIDIA A10G"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100"),  # not the A10
        ("NVIDIA GH200 480GB", "NVIDIA GH200"),  # not the H200
        ("NVIDIA GB200", "NVIDIA GB200"),  # not the B200
        ("GeForce 940MX", "GeForce 940MX"),  # not the 940M
        ("Tesla K40m", "Tesla K40"),
    ],
)
def test_words_run_together_still_end_where_a_word_ends(kb, name, expected):
    entry = kb.gpu_lookup(name)
    assert (entry.name if entry else None) == expected


@pytest.mark.parametrize("name", ["NVIDIA Quantum X9", "Foo 9000", "RTX 4090D", "Lab GPU"])
def test_an_unknown_name_is_never_given_a_compute_capability(capsys, name):
    kb = load()
    if kb.gpu_lookup(name) is not None:
        pytest.skip(f"{name} is known")
    with pytest.raises(TargetError) as info:
        build_target(kb, gpu=name, driver="550.54.14", platform="linux-64")
    message = str(info.value)
    assert info.value.exit_code == 2
    assert f"--gpu '{name}:X.Y'" in message and "compute_cap" in message and "cuda-gpus" in message
    assert not re.search(r":\d+\.\d", message), message  # no number offered as the answer


def test_the_reported_1080ti_plans_as_pascal(capsys):
    code = cli.main(
        ["make-env", "--offline", "--gpu", "GTX 1080Ti", "--driver", "550.54.14", "--platform", "linux-64"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "compute capability 6.1" in out and "cuda-version=12.9" in out


@pytest.mark.parametrize(
    "driver,platform,read_as,words",
    [
        ("550", "linux-64", "550.54.14", ["first R550 Linux driver", "full version"]),
        ("570", "linux-64", "570.26", ["first R570 Linux driver"]),
        ("550", "win-64", "551.61", ["first R550 Windows driver"]),
        ("565", "win-64", "565", ["oldest R565 Windows driver", "no build number"]),
        ("580", "linux-aarch64", "580.65.06", ["first R580 Linux driver"]),
    ],
)
def test_a_branch_number_is_read_as_its_first_driver(driver, platform, read_as, words):
    kb = load()
    target = build_target(kb, gpu="RTX 4090", driver=driver, platform=platform)
    assert target.driver_version == read_as
    assert target.driver_cuda == kb.driver_branch(read_as).max_cuda
    note = next(n for n in target.notes if n.startswith(f"--driver {driver} read as"))
    for word in words:
        assert word in note, note
    plan = make_plan(kb, target)
    assert note in plan.reasons


def test_a_branch_number_through_the_cli(capsys):
    code = cli.main(
        ["make-env", "--offline", "--gpu", "RTX 4090", "--driver", "550", "--platform", "linux-64"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "driver 550.54.14" in out and "--driver 550 read as 550.54.14" in out


@pytest.mark.parametrize("driver", ["540", "999", "449"])
def test_a_number_that_is_no_branch_is_a_usage_error(capsys, driver):
    code = cli.main(
        ["make-env", "--offline", "--gpu", "RTX 4090", "--driver", driver, "--platform", "linux-64"]
    )
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert f"--driver {driver} is not a driver branch" in err and "nvidia-smi" in err
    assert len(err.strip().splitlines()) == 1


def test_a_branch_for_a_product_with_later_first_drivers_is_refused_with_its_own():
    """R570's first driver (570.26) does not drive the RTX PRO 5000 Blackwell (570.153.02)."""
    from solver.plan import PlanError

    kb = load()
    with pytest.raises(PlanError, match="570.153.02"):
        make_plan(
            kb, build_target(kb, gpu="NVIDIA RTX PRO 5000 Blackwell", driver="570", platform="linux-64")
        )

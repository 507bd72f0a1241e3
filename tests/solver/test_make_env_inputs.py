"""make-env's flags and environment variables that used to give a silently wrong answer: conda's
owner/label/name channel syntax, environment names YAML would retype, an exact --torch pin, and
malformed CONDA_OVERRIDE_* values; plus the one-line usage errors of the `solver` command."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from solver_cli import one_line
from solver_cli import run_cli as run

from solver import __version__
from solver.solve import channel_for_env_file, channel_location, is_local_channel

GPU = ["--gpu", "RTX 4090", "--driver", "550.54.14", "--platform", "linux-64"]


pytestmark = pytest.mark.usefixtures("no_overrides")


# -- channels ------------------------------------------------------------------------------------


def test_conda_label_syntax_is_a_channel_name(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out" / "channel").mkdir(parents=True)
    code, out, err = run(
        capsys,
        "make-env",
        "--offline",
        *GPU,
        "--channel",
        "conda-forge/label/pytorch_rc",
        "--channel",
        "out/channel",
        "--channel",
        "./missing",
        "--channel",
        "https://x.org/c",
    )
    assert code == 0, err
    assert yaml.safe_load(out)["channels"] == [
        "conda-forge/label/pytorch_rc",
        (tmp_path / "out/channel").as_uri(),
        (tmp_path / "missing").as_uri(),
        "https://x.org/c",
    ]


@pytest.mark.parametrize(
    "channel,local",
    [
        ("conda-forge", False),
        ("owner/label/name", False),
        ("pytorch/label/nightly", False),
        ("https://conda.anaconda.org/conda-forge", False),
        ("file:///srv/channel", False),
        ("./channel", True),
        ("../channel", True),
        ("/srv/channel", True),
        ("~/channel", True),
        ("C:\\channels\\x", True),
    ],
)
def test_what_counts_as_a_local_channel(channel, local, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert is_local_channel(channel) is local
    if not local:
        assert channel_location(channel) == channel and channel_for_env_file(channel) == channel


# -- environment names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "null",
        "Null",
        "~",
        "yes",
        "No",
        "on",
        "y",
        "true",
        "0x1F",
        "1e3",
        "012",
        "1_000",
        ".inf",
        "-.5x",
        "*star",
        "&anchor",
        "!tag",
        "@at",
        "%pct",
        "name,with,commas",
        "[list]",
        "{map}",
        "it's",
        'say"hi"',
        "ünïcödé",
        "a=b",
    ],
)
def test_names_yaml_would_retype_read_back_as_given(capsys, name):
    code, out, err = run(capsys, "make-env", "--offline", "--gpu", "none", "--name", name)
    if code == 2:  # refused outright: only for characters conda forbids
        assert any(c in name for c in "/\\:# ") or name.startswith("-"), err
        return
    assert code == 0, err
    loaded = yaml.safe_load(out)
    assert loaded["name"] == name and isinstance(loaded["name"], str)


@pytest.mark.parametrize(
    "name", ["two\nlines", "tab\there", "nul\x00", "a b", "a/b", "a:b", "a#b", " ", "", "-x"]
)
def test_unusable_names_are_usage_errors(capsys, name):
    code, out, err = run(capsys, "make-env", "--offline", "--gpu", "none", "--name", name)
    assert code == 2 and out == "" and "--name" in one_line(err)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(min_size=0, max_size=20))
def test_any_accepted_name_reads_back_as_given(capsys, name):
    code, out, err = run(capsys, "make-env", "--offline", "--gpu", "none", "--name", name)
    assert code in (0, 2)
    if code == 0:
        assert yaml.safe_load(out)["name"] == name
    else:
        assert out == "" and "--name" in one_line(err)


# -- --torch -------------------------------------------------------------------------------------


def test_an_exact_torch_pin_is_written_exactly(capsys):
    code, out, err = run(capsys, "make-env", "--offline", *GPU, "--torch", "2.12.0", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert "pytorch=2.12.0=cuda129*" in doc["dependencies"] and doc["pytorch_version"] == "2.12.0"
    code, out, _ = run(capsys, "make-env", "--offline", *GPU, "--torch", "2.12")
    assert "pytorch=2.12.*=cuda129*" in yaml.safe_load(out)["dependencies"]
    code, out, err = run(capsys, "make-env", "--offline", *GPU, "--torch", "2.12.7")
    assert code == 1 and "no pytorch 2.12.7" in one_line(err)


# -- CONDA_OVERRIDE_* ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variable,value",
    [
        ("CONDA_OVERRIDE_CUDA", "twelve"),
        ("CONDA_OVERRIDE_CUDA", "12.x"),
        ("CONDA_OVERRIDE_CUDA_ARCH", "sm_86"),
        ("CONDA_OVERRIDE_CUDA_ARCH", "8"),
        ("CONDA_OVERRIDE_GLIBC", "glibc2.28"),
    ],
)
@pytest.mark.parametrize("gpu", [["--gpu", "auto"], ["--gpu", "RTX 4090"], ["--gpu", "none"], GPU])
def test_a_malformed_override_is_a_usage_error_on_every_path(
    capsys, monkeypatch, tmp_path, variable, value, gpu
):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    monkeypatch.setenv(variable, value)
    code, out, err = run(capsys, "make-env", "--offline", "--platform", "linux-64", *gpu)
    assert code == 2 and out == ""
    line = one_line(err)
    assert f"{variable}={value!r}" in line and "unset it" in line


def test_an_override_reads_the_same_with_and_without_a_gpu_name(capsys, monkeypatch, tmp_path):
    """CONDA_OVERRIDE_CUDA=12 means CUDA 12.0 to conda; --gpu auto and --gpu NAME both read it so."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12")
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA_ARCH", "8.9")
    _, auto, _ = run(capsys, "make-env", "--offline", "--platform", "linux-64", "--json")
    _, named, _ = run(
        capsys, "make-env", "--offline", "--platform", "linux-64", "--gpu", "RTX 4090", "--json"
    )
    assert json.loads(auto)["driver"]["cuda"] == json.loads(named)["driver"]["cuda"] == "12.0"


def test_glibc_override_is_used(capsys, monkeypatch):
    monkeypatch.setenv("CONDA_OVERRIDE_GLIBC", "2.17")
    code, out, err = run(
        capsys,
        "make-env",
        "--offline",
        "--gpu",
        "H100",
        "--driver",
        "580.65.06",
        "--platform",
        "linux-64",
        "--json",
    )
    assert code == 0 and json.loads(out)["pytorch_build"] == "cuda129*"  # CUDA 13 builds need glibc 2.28


@pytest.mark.parametrize("arch", ["13.5", "99.9", "9.9"])
@pytest.mark.parametrize("gpu", [["--gpu", "auto"], ["--gpu", "none"], ["--gpu", "RTX 4090"], GPU])
def test_an_override_no_gpu_has_is_refused_as_the_flag_is(capsys, monkeypatch, tmp_path, arch, gpu):
    """CONDA_OVERRIDE_CUDA_ARCH=13.5 is refused (exit 2, one line) as --gpu 13.5 is, on every path."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "13.0")
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA_ARCH", arch)
    code, out, err = run(capsys, "make-env", "--offline", "--platform", "linux-64", *gpu)
    assert code == 2 and out == ""
    line = one_line(err)
    assert (
        line.startswith(
            f"solver make-env: error: CONDA_OVERRIDE_CUDA_ARCH={arch}: no NVIDIA GPU has compute "
            f"capability {arch}; set it as major.minor"
        )
        and "unset it" in line
    )
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA_ARCH")
    code, out, err = run(capsys, "make-env", "--offline", "--platform", "linux-64", "--gpu", arch)
    assert code == 2 and f"no NVIDIA GPU has compute capability {arch}" in one_line(err)


# flags, CONDA_OVERRIDE_*, the note make-env prints, and what the plan follows (the flags): compute
# capability and driver CUDA ("assumed": no driver given, the newest for the GPU is assumed).
PRECEDENCE = [
    (
        ["--gpu", "RTX 4090"],
        {"CONDA_OVERRIDE_CUDA": "12.4", "CONDA_OVERRIDE_CUDA_ARCH": "8.6"},
        "CONDA_OVERRIDE_CUDA_ARCH=8.6 ignored: --gpu 'RTX 4090' gives compute capability 8.9",
        "8.9",
        "12.4",
    ),
    (
        ["--gpu", "8.0"],
        {"CONDA_OVERRIDE_CUDA": "12.8", "CONDA_OVERRIDE_CUDA_ARCH": "8.6"},
        "CONDA_OVERRIDE_CUDA_ARCH=8.6 ignored: --gpu '8.0' gives compute capability 8.0",
        "8.0",
        "12.8",
    ),
    (
        ["--gpu", "RTX 4090", "--driver", "550.54.14"],
        {"CONDA_OVERRIDE_CUDA": "12.8"},
        "CONDA_OVERRIDE_CUDA=12.8 ignored: --driver 550.54.14 runs CUDA <= 12.4",
        "8.9",
        "12.4",
    ),
    (
        ["--driver", "550.54.14"],
        {"CONDA_OVERRIDE_CUDA": "12.8", "CONDA_OVERRIDE_CUDA_ARCH": "8.6"},
        "CONDA_OVERRIDE_CUDA=12.8 ignored: --driver 550.54.14 runs CUDA <= 12.4",
        "8.6",
        "12.4",
    ),
    (
        ["--gpu", "none"],
        {"CONDA_OVERRIDE_CUDA": "12.8", "CONDA_OVERRIDE_CUDA_ARCH": "8.6"},
        "CONDA_OVERRIDE_CUDA=12.8 and CONDA_OVERRIDE_CUDA_ARCH=8.6 ignored: --gpu none plans a CPU environment",
        None,
        None,
    ),
    (
        ["--gpu", "RTX 4090"],
        {"CONDA_OVERRIDE_CUDA": ""},
        "CONDA_OVERRIDE_CUDA is empty (no driver) but --gpu 'RTX 4090' asks for a GPU: the variable was ignored",
        "8.9",
        "assumed",
    ),
]


@pytest.mark.parametrize(
    "flags,env,note,cc,cuda",
    PRECEDENCE,
    ids=[" ".join(p[0]) + " " + " ".join(f"{k[15:]}={v}" for k, v in p[1].items()) for p in PRECEDENCE],
)
def test_a_flag_wins_over_the_override_and_says_so(capsys, monkeypatch, tmp_path, flags, env, note, cc, cuda):
    """CONDA_OVERRIDE_CUDA / _ARCH replace detection, as in conda; a flag stating the same wins, with a note."""
    monkeypatch.setenv("PATH", str(tmp_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, out, err = run(capsys, "make-env", "--offline", "--platform", "linux-64", *flags, "--json")
    assert code == 0, err
    assert err.count(note) == 1 and err.count("ignored") == 1, err
    doc = json.loads(out)
    assert doc["gpu"]["compute_capability"] == cc
    assert doc["driver"]["assumed"] if cuda == "assumed" else doc["driver"]["cuda"] == cuda
    assert note in " ".join(doc["reasons"])
    code, _, err = run(capsys, "make-env", "--offline", "--platform", "linux-64", *flags, "--quiet")
    assert code == 0 and err == ""


@pytest.mark.parametrize(
    "flags,env",
    [
        (["--gpu", "RTX 4090"], {"CONDA_OVERRIDE_CUDA_ARCH": "8.9"}),
        (["--gpu", "RTX 4090", "--driver", "550.54.14"], {"CONDA_OVERRIDE_CUDA": "12.4"}),
        (["--gpu", "none"], {"CONDA_OVERRIDE_CUDA": ""}),
        (["--gpu", "auto"], {"CONDA_OVERRIDE_CUDA": "12.4", "CONDA_OVERRIDE_CUDA_ARCH": "8.6"}),
    ],
)
def test_no_note_when_the_override_agrees_or_is_what_is_used(capsys, monkeypatch, tmp_path, flags, env):
    monkeypatch.setenv("PATH", str(tmp_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, _, err = run(capsys, "make-env", "--offline", "--platform", "linux-64", *flags)
    assert code == 0 and "ignored" not in err, err


# -- the command itself --------------------------------------------------------------------------


def test_version(capsys):
    code, out, err = run(capsys, "--version")
    assert code == 0 and out.strip() == f"solver {__version__} (pointops-solver)"


@pytest.mark.parametrize(
    "args,words",
    [
        ([], "choose a command"),
        (["frobnicate"], "invalid choice"),
        (["make-env", "--gpu"], "expected one argument"),
        (["make-env", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["doctor", "--probe-timeout", "soon"], "invalid float value"),
    ],
)
def test_usage_errors_are_one_line(capsys, args, words):
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    line = one_line(err)
    assert line.startswith("solver") and ": error: " in line and words in line


def test_quiet_leaves_only_problems(capsys, tmp_path):
    code, out, err = run(capsys, "make-env", "--offline", *GPU, "--quiet", "-o", str(tmp_path / "env.yml"))
    assert code == 0 and out == "" and err == ""
    code, out, err = run(
        capsys,
        "make-env",
        "--offline",
        "--gpu",
        "RTX 5090",
        "--driver",
        "566.03",
        "--platform",
        "linux-64",
        "--quiet",
    )
    assert code == 1 and out == "" and len(err.splitlines()) == 1 and "R570" in err  # the refusal stays

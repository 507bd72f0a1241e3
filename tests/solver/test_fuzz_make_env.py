"""Fuzzing make-env's flags and environment variables (hypothesis). Whatever the input:

- the exit status is 0, 1 or 2;
- a failure (1 or 2) prints exactly one line on stderr, and no traceback, no "internal error";
- a failure changes no file (the output paths include existing files, a symlink, a directory, a
  missing directory and repeats of one path);
- a success that prints env.yml prints YAML whose name is the one asked for.

The CLI runs in this process (a solve runs in its own child interpreter); nvidia-smi is absent,
or a stand-in that reports a driver that is not loaded or prints garbage.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import fake_nvidia_smi as fake
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from solver import cli

TEXT = st.text(max_size=12)
ENV_TEXT = st.text(st.characters(blacklist_characters="\x00"), max_size=12)  # the OS allows no NUL there

# flag -> (well-formed values, malformed or odd ones); a malformed draw may also be any text.
FLAGS = {
    "--gpu": (["auto", "none", "cpu", "RTX 4090", "8.6", "sm_86", "H200", "GeForce GTX 1080", "Tesla K80", "13.0",
               "Lab GPU:8.9"], ["Foo 9000", "Foo:abc", "13.5", "99.9", "", " "]),
    "--driver": (["550.54.14", "580.65.06", "566.03", "470.82.01", "590.44.01"], ["abc", "55", "999.99.99", ""]),
    "--platform": (["linux-64", "win-64", "osx-arm64", "linux-aarch64"], ["win-32", "", "linux"]),
    "--python": (["3.12", "3.14", "3.10"], ["3.9", "3", "x", ""]),
    "--torch": (["2.13", "2.12.0", "2.11", "2.10"], ["2.12.7", "2.9", "2.20", "two", ""]),
    "--cuda": (["12.9", "13.0", "12.8"], ["12.4", "12", "x"]),
    "--name": (["pointops", "null", "yes", "0x1F", "ünï", "1e3"], ["a b", "a\nb", "", "-x", "a/b"]),
}
CHANNELS = (["conda-forge", "owner/label/dev", "https://x.org/c", "./local", "null", "yes", "a: b", "#x"],
            ["", " ", "a\nb", "\x7f"])
OVERRIDES = {
    "CONDA_OVERRIDE_CUDA": (["12.4", "12.8", "13.0", "", "12", "12.4.1"], ["twelve", "12.x"]),
    "CONDA_OVERRIDE_CUDA_ARCH": (["8.6", "9.0", ""], ["sm_86", "8", "x.y"]),
    "CONDA_OVERRIDE_GLIBC": (["2.17", "2.28", ""], ["2.x", "glibc"]),
}
# Output paths, relative to a fresh folder holding: a.yml and b.yml (regular files), link.yml ->
# a.yml, dir/ (a directory); "missing/x" has no directory.
GOOD_OUTPUTS = ["a.yml", "b.yml", "link.yml", "new.yml", "other.txt"]
BAD_OUTPUTS = ["dir", "missing/x.yml", "", "a.yml"]


def value(draw, good: list[str], bad: list[str], broken: bool, text=TEXT) -> str:
    if not broken:
        return draw(st.sampled_from(good))
    return draw(st.one_of(st.sampled_from(bad), st.sampled_from(bad), text))


@st.composite
def invocations(draw):
    """Mostly well-formed invocations with a few things broken, so that every exit status occurs."""
    names = list(FLAGS) + list(OVERRIDES) + ["outputs", "--channel"]
    broken = set(draw(st.lists(st.sampled_from(names), max_size=2, unique=True)))
    args: list[str] = []
    for flag, (good, bad) in FLAGS.items():
        if flag in broken or draw(st.booleans()):
            args += [flag, value(draw, good, bad, flag in broken)]
    if draw(st.integers(0, 9)) > 0:  # one in ten tries to solve against a channel that is not there
        args.append("--offline")
        if "--channel" in broken or draw(st.booleans()):
            args += ["--channel", value(draw, *CHANNELS, "--channel" in broken)]
    else:
        args += ["--channel", "./no-such-channel"]
    outputs = {}
    for flag in ("-o", "--explicit", "--lock"):
        if draw(st.integers(0, 3)) == 0:
            outputs[flag] = value(draw, GOOD_OUTPUTS, BAD_OUTPUTS, "outputs" in broken,
                                  text=st.sampled_from(BAD_OUTPUTS))
    for flag in ("--json", "--quiet"):
        if draw(st.booleans()):
            args.append(flag)
    env = {name: value(draw, good, bad, name in broken, ENV_TEXT) for name, (good, bad) in OVERRIDES.items()
           if name in broken or draw(st.integers(0, 3)) == 0}
    smi = draw(st.sampled_from(["none", "none", "none", "not-loaded", "garbage"]))
    return args, outputs, env, smi


def _snapshot(folder: Path) -> dict:
    state = {}
    for path in sorted(folder.rglob("*")):
        st_ = os.lstat(path)
        if stat.S_ISLNK(st_.st_mode):
            state[str(path)] = ("link", os.readlink(path))
        elif stat.S_ISDIR(st_.st_mode):
            state[str(path)] = ("dir", stat.S_IMODE(st_.st_mode))
        else:
            state[str(path)] = ("file", stat.S_IMODE(st_.st_mode), path.read_bytes())
    return state


@pytest.fixture(scope="module")
def nvidia_smi_paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("smi")
    empty = root / "empty"
    empty.mkdir()
    return {"none": str(empty), "not-loaded": fake.driver_not_loaded(root / "not-loaded", path=str(empty)),
            "garbage": fake.garbage(root / "garbage", path=str(empty))}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(invocation=invocations())
def test_make_env_under_any_flags_and_environment(invocation, capsys, tmp_path, nvidia_smi_paths):
    args, outputs, env, smi = invocation
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    (folder / "a.yml").write_text("name: a\n")
    (folder / "b.yml").write_text("name: b\n")
    (folder / "b.yml").chmod(0o640)
    (folder / "link.yml").symlink_to(folder / "a.yml")
    (folder / "dir").mkdir()
    for flag, name in outputs.items():
        args += [flag, str(folder / name) if name else ""]
    before = _snapshot(folder)
    with pytest.MonkeyPatch.context() as mp:
        for name in ("CONDA_OVERRIDE_CUDA", "CONDA_OVERRIDE_CUDA_ARCH", "CONDA_OVERRIDE_GLIBC"):
            mp.delenv(name, raising=False)
        for name, value in env.items():
            mp.setenv(name, value)
        mp.setenv("PATH", nvidia_smi_paths[smi])
        mp.chdir(folder)
        code = cli.main(["make-env", *args])
    out, err = capsys.readouterr()
    event(f"exit {code}")
    assert code in (0, 1, 2), (code, args, env, err)
    assert "Traceback" not in err and "internal error" not in err, (args, env, err)
    if code != 0:
        assert len(err.splitlines()) == 1, (args, env, err)
        assert err.startswith("solver make-env: error: ")
        assert _snapshot(folder) == before, (args, env, err)
    elif "--json" not in args and "-o" not in outputs:
        name = args[args.index("--name") + 1] if "--name" in args else "pointops"
        env_yml = yaml.safe_load(out)
        assert env_yml["name"] == name and all(isinstance(c, str) for c in env_yml["channels"])
        if "--channel" in args and "--offline" in args:
            given_channel = args[args.index("--channel") + 1]
            assert env_yml["channels"][0] == given_channel or env_yml["channels"][0].startswith("file://")

"""Fuzzing make-env's flags and environment variables (hypothesis). Whatever the input:

- the exit status is 0, 1 or 2;
- a failure (1 or 2) prints exactly one line on stderr, and no traceback, no "internal error";
- a failure changes no file (the output paths include existing files, a symlink, a dangling
  symlink, a FIFO with a reader, a null device, a directory, a missing directory and repeats of one
  path), and writes nothing into the FIFO;
- a success loses nothing the user had: every file, link, FIFO and device is still there, of the
  same kind (a symlink still points where it did, a special file is not replaced by a regular one),
  and only the file -o names (or the one its symlink names) has new content, the env.yml;
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
    "--gpu": (
        [
            "auto",
            "none",
            "cpu",
            "RTX 4090",
            "8.6",
            "sm_86",
            "H200",
            "GeForce GTX 1080",
            "Tesla K80",
            "13.0",
            "Lab GPU:8.9",
        ],
        ["Foo 9000", "Foo:abc", "13.5", "99.9", "", " "],
    ),
    "--driver": (
        ["550.54.14", "580.65.06", "566.03", "470.82.01", "590.44.01"],
        ["abc", "55", "999.99.99", ""],
    ),
    "--platform": (["linux-64", "win-64", "osx-arm64", "linux-aarch64"], ["win-32", "", "linux"]),
    "--python": (["3.12", "3.14", "3.10"], ["3.9", "3", "x", ""]),
    "--torch": (["2.13", "2.12.0", "2.11", "2.10"], ["2.12.7", "2.9", "2.20", "two", ""]),
    "--cuda": (["12.9", "13.0", "12.8"], ["12.4", "12", "x"]),
    "--name": (["pointops", "null", "yes", "0x1F", "ünï", "1e3"], ["a b", "a\nb", "", "-x", "a/b"]),
    "--with": (
        ["mmcv", "mmcv<2.2", "pointnet2_ops", "mmcv >=2.1"],
        ["mmcv<2.0", "numpy", "mmcv=2.1=cuda*", "<2", "", "mm\x01cv", "mmcv[md5=1]", "pointops"],
    ),
}
CHANNELS = (
    ["conda-forge", "owner/label/dev", "https://x.org/c", "./local", "null", "yes", "a: b", "#x"],
    ["", " ", "a\nb", "\x7f"],
)
OVERRIDES = {
    "CONDA_OVERRIDE_CUDA": (["12.4", "12.8", "13.0", "", "12", "12.4.1"], ["twelve", "12.x"]),
    "CONDA_OVERRIDE_CUDA_ARCH": (["8.6", "9.0", ""], ["sm_86", "8", "x.y"]),
    "CONDA_OVERRIDE_GLIBC": (["2.17", "2.28", ""], ["2.x", "glibc"]),
}
# Output paths, relative to a fresh folder holding: a.yml and b.yml (regular files), link.yml ->
# a.yml, dangling.yml -> made.yml (not there), fifo (a FIFO a reader holds open), null (a null
# device: a private node as root, else /dev/null when writable), dir/ (a directory); "missing/x"
# has no directory.
GOOD_OUTPUTS = ["a.yml", "b.yml", "link.yml", "new.yml", "other.txt", "dangling.yml", "fifo", "null"]
BAD_OUTPUTS = ["dir", "missing/x.yml", "", "a.yml"]


def value(draw, good: list[str], bad: list[str], broken: bool, text=TEXT) -> str:
    if not broken:
        return draw(st.sampled_from(good))
    return draw(st.one_of(st.sampled_from(bad), st.sampled_from(bad), text))


@st.composite
def invocations(draw, wellformed: bool = False):
    """Mostly well-formed invocations with a few things broken, so that every exit status occurs.
    wellformed: nothing broken on purpose, and only -o, always one of GOOD_OUTPUTS (so that the
    special files are written by successes, not only refused by failures)."""
    names = list(FLAGS) + list(OVERRIDES) + ["outputs", "--channel"]
    broken = set() if wellformed else set(draw(st.lists(st.sampled_from(names), max_size=2, unique=True)))
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
    for flag in ("-o",) if wellformed else ("-o", "--explicit", "--lock"):  # no solve succeeds here
        if wellformed or draw(st.integers(0, 3)) == 0:
            outputs[flag] = value(
                draw, GOOD_OUTPUTS, BAD_OUTPUTS, "outputs" in broken, text=st.sampled_from(BAD_OUTPUTS)
            )
    for flag in ("--json", "--quiet"):
        if draw(st.booleans()):
            args.append(flag)
    env = {
        name: value(draw, good, bad, name in broken, ENV_TEXT)
        for name, (good, bad) in OVERRIDES.items()
        if name in broken or draw(st.integers(0, 3)) == 0
    }
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
        elif stat.S_ISFIFO(st_.st_mode):
            state[str(path)] = ("fifo", stat.S_IMODE(st_.st_mode))
        elif stat.S_ISCHR(st_.st_mode):
            state[str(path)] = ("chr", st_.st_rdev)
        else:
            state[str(path)] = ("file", stat.S_IMODE(st_.st_mode), path.read_bytes())
    return state


@pytest.fixture(scope="module")
def nvidia_smi_paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("smi")
    empty = root / "empty"
    empty.mkdir()
    return {
        "none": str(empty),
        "not-loaded": fake.driver_not_loaded(root / "not-loaded", path=str(empty)),
        "garbage": fake.garbage(root / "garbage", path=str(empty)),
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(invocation=invocations())
def test_make_env_under_any_flags_and_environment(invocation, capsys, tmp_path, nvidia_smi_paths):
    check_invocation(invocation, capsys, tmp_path, nvidia_smi_paths)


@pytest.mark.parametrize("output", GOOD_OUTPUTS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(invocation=invocations(wellformed=True))
def test_make_env_writing_to_any_kind_of_file(output, invocation, capsys, tmp_path, nvidia_smi_paths):
    args, outputs, env, smi = invocation
    check_invocation((args, {**outputs, "-o": output}, env, smi), capsys, tmp_path, nvidia_smi_paths)


def check_invocation(invocation, capsys, tmp_path, nvidia_smi_paths) -> None:
    args, outputs, env, smi = invocation
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    (folder / "a.yml").write_text("name: a\n")
    (folder / "b.yml").write_text("name: b\n")
    (folder / "b.yml").chmod(0o640)
    (folder / "link.yml").symlink_to(folder / "a.yml")
    (folder / "dangling.yml").symlink_to(folder / "made.yml")
    (folder / "dir").mkdir()
    os.mkfifo(folder / "fifo")
    null = _null_device(folder)
    paths = {name: (null if name == "null" else str(folder / name)) for name in outputs.values() if name}
    for flag, name in outputs.items():
        args += [flag, paths[name] if name else ""]
    before = _snapshot(folder)
    # A reader that never blocks: what make-env writes waits in the pipe (env.yml is far below its size).
    reader = os.open(folder / "fifo", os.O_RDONLY | os.O_NONBLOCK)
    try:
        code, out, err = _run(args, env, nvidia_smi_paths[smi], folder, capsys)
        received = _drain(reader)
    finally:
        os.close(reader)
    event(f"exit {code}")
    assert code in (0, 1, 2), (code, args, env, err)
    assert "Traceback" not in err and "internal error" not in err, (args, env, err)
    assert stat.S_ISCHR(os.stat(null).st_mode), (args, err)
    if code != 0:
        assert len(err.splitlines()) == 1, (args, env, err)
        assert err.startswith("solver make-env: error: ")
        assert _snapshot(folder) == before and received == b"", (args, env, err)
        return
    event(f"exit 0 with -o {outputs.get('-o')}")
    _assert_nothing_lost(before, _snapshot(folder), folder, outputs.get("-o"), received, args)
    if "--json" not in args and "-o" not in outputs:
        name = args[args.index("--name") + 1] if "--name" in args else "pointops"
        env_yml = yaml.safe_load(out)
        assert env_yml["name"] == name and all(isinstance(c, str) for c in env_yml["channels"])
        if "--channel" in args and "--offline" in args:
            given_channel = args[args.index("--channel") + 1]
            assert env_yml["channels"][0] == given_channel or env_yml["channels"][0].startswith("file://")


def _null_device(folder: Path) -> str:
    """As root a private node with /dev/null's numbers (a regression replaces it, not the machine's)."""
    if os.geteuid() == 0:
        os.mknod(folder / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        return str(folder / "null")
    if not os.access("/dev/null", os.W_OK):
        pytest.skip("/dev/null is not writable here")
    return "/dev/null"


def _drain(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _run(args, env, path, folder, capsys):
    with pytest.MonkeyPatch.context() as mp:
        for name in ("CONDA_OVERRIDE_CUDA", "CONDA_OVERRIDE_CUDA_ARCH", "CONDA_OVERRIDE_GLIBC"):
            mp.delenv(name, raising=False)
        for name, value in env.items():
            mp.setenv(name, value)
        mp.setenv("PATH", path)
        mp.chdir(folder)
        code = cli.main(["make-env", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _assert_nothing_lost(
    before: dict, after: dict, folder: Path, output: str | None, received: bytes, args
) -> None:
    """After a success (only -o can have been written: --explicit/--lock need a solve, none succeeds here)."""
    links = {"link.yml": "a.yml", "dangling.yml": "made.yml"}
    written = links.get(output, output)  # the regular file that gets env.yml, if any
    for path, state in before.items():
        assert path in after and after[path][:2] == state[:2], (path, state, after.get(path), args)
        if state[0] == "file" and Path(path).name != written:
            assert after[path] == state, (path, args)  # not the output: untouched
    for path, state in after.items():
        if path not in before:  # only what -o created: a new file, or the target of the dangling link
            assert Path(path).name == written and state[0] == "file", (path, args)
    if written in ("fifo", "null") or output is None:
        assert set(after) == set(before) and all(
            after[p] == before[p] for p in before if before[p][0] == "file"
        )
    elif written is not None:
        assert after[str(folder / written)][2].startswith(b"# Environment for"), args
    assert received.startswith(b"# Environment for") if output == "fifo" else received == b"", (
        received[:80],
        args,
    )

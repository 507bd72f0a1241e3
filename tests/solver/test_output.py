"""make-env's output files and standard output: special files are written to, never replaced;
symlinks are written through; permissions follow the umask or the replaced file; a failure writes
nothing (or says what was written) and names the user's path; full disks and closed streams are one
error line, never a traceback."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from solver_cli import one_line, run_cli

from solver import cli
from solver.errors import OutputError, UsageError
from solver.output import Destination, check_destinations, write_files

REPO = Path(__file__).resolve().parents[2]
OFFLINE_CPU = ["make-env", "--offline", "--gpu", "none", "--platform", "linux-64"]


pytestmark = pytest.mark.usefixtures("no_overrides")


def make_env(capsys, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, *OFFLINE_CPU, *args)


def device_like(tmp_path: Path, name: str, minor: int) -> str:
    """A character device to write to: as root, a private node with the numbers of /dev/null (3) or
    /dev/full (7), so that a regression replaces this node and not the machine's; otherwise the real
    device (which a non-root process could not replace anyway)."""
    if os.geteuid() != 0:
        return f"/dev/{name}"
    node = tmp_path / name
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    return str(node)


def cli_process(*args: str, stdout=subprocess.PIPE, preexec_fn=None, shell_prefix: str = ""):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA_OVERRIDE_")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"
    command = [sys.executable, "-m", "solver", *args]
    if shell_prefix:
        command = ["bash", "-c", shell_prefix.replace("SOLVER", " ".join(f"'{c}'" for c in command))]
    return subprocess.run(
        command,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
        preexec_fn=preexec_fn,
    )


# -- special files -------------------------------------------------------------------------------


def test_a_null_device_is_written_to_not_replaced(capsys, tmp_path):
    null = device_like(tmp_path, "null", 3)
    code, out, err = make_env(capsys, "-o", null)
    assert code == 0 and out == "" and f"wrote {null}" in err
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert not [p for p in os.listdir(os.path.dirname(null)) if p.endswith(".tmp")]


def test_a_fifo_is_written_to(capsys, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    time.sleep(0.2)  # let the reader open its end
    code, out, err = make_env(capsys, "-o", str(fifo))
    reader.join(10)
    assert code == 0 and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert received and received[0].startswith("# Environment for linux-64, CPU only")


def test_a_fifo_nobody_reads_is_an_error_not_a_hang(capsys, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    code, out, err = make_env(capsys, "-o", str(fifo))
    assert time.monotonic() - started < 10
    assert code == 1 and out == ""
    line = one_line(err)
    assert f"cannot write {fifo}: no process is reading this FIFO" in line and "nothing was written" in line
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_process_substitution(tmp_path):
    """`-o >(cmd)`: the path is /dev/fd/N, a pipe to cmd."""
    captured = tmp_path / "captured.yml"
    done = cli_process(
        *OFFLINE_CPU, shell_prefix=f"SOLVER -o >(cat > '{captured}'); rc=$?; wait $!; exit $rc"
    )
    assert done.returncode == 0, done.stderr
    assert captured.read_text().startswith("# Environment for linux-64, CPU only")
    assert "wrote /dev/fd/" in done.stderr


# -- this process's own descriptors: written through the open file, never replaced ---------------

ENV_START = "# Environment for linux-64, CPU only"


def _shell(command: str, **paths: Path):
    """SOLVER in `command` is the make-env command line; {name} the quoted paths."""
    return cli_process(
        *OFFLINE_CPU, stdout=None, shell_prefix=command.format(**{k: f"'{v}'" for k, v in paths.items()})
    )


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1", "link"])
def test_standard_output_appended_by_the_shell_keeps_what_was_there(tmp_path, name):
    """`>> log`: the file the shell opened is appended to, not replaced (same inode, lines kept)."""
    if name.startswith("/proc/") and not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc")
    log = tmp_path / "log"
    log.write_text("keep\n")
    log.chmod(0o640)
    inode = log.stat().st_ino
    if name == "link":  # a symlink to /dev/stdout is the same descriptor
        (tmp_path / "link").symlink_to("/dev/stdout")
        name = str(tmp_path / "link")
    for _ in range(2):
        done = _shell(f"SOLVER -o {name} >> {{log}}", log=log)
        assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert text.startswith("keep\n" + ENV_START) and text.count(ENV_START) == 2
    assert log.stat().st_ino == inode and stat.S_IMODE(log.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["log"] + (["link"] if "link" in name else [])
    )


@pytest.mark.parametrize(
    "name,fd", [("/dev/stdout", 1), ("/dev/stderr", 2), ("/dev/fd/3", 3), ("/proc/self/fd/1", 1)]
)
def test_output_around_the_command_in_a_group_is_kept(tmp_path, name, fd):
    """`{ echo header; solver make-env -o /dev/stdout; echo footer; } > f`: all three, in order."""
    if name.startswith("/proc/") and not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc")
    out = tmp_path / "f"
    quiet = "--quiet " if fd == 2 else ""  # stderr's notes would land in the file too
    done = _shell(
        f"{{{{ echo header >&{fd}; SOLVER {quiet}-o {name}; echo footer >&{fd}; }}}} {fd}> {{out}}", out=out
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.startswith("header\n" + ENV_START) and text.endswith("  - pointops=0.1.0=cpu*\nfooter\n"), (
        text
    )
    assert text.count(ENV_START) == 1


def test_a_descriptor_that_is_not_open_or_only_read(tmp_path):
    env_yml = tmp_path / "env.yml"
    done = cli_process(*OFFLINE_CPU, "-o", "/dev/fd/9")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("solver make-env: error: cannot write /dev/fd/9: file descriptor 9 is not open")
    with pytest.raises(OutputError) as info:
        write_files([(Destination("-o", str(env_yml)), "a\n"), (Destination("--lock", "/dev/fd/987"), "b\n")])
    assert str(info.value).startswith(
        "cannot write /dev/fd/987: file descriptor 987 is not open; nothing was written"
    )
    assert not env_yml.exists()
    source = tmp_path / "in.txt"
    source.write_text("input\n")
    done = _shell("SOLVER -o /dev/stdin < {source}", source=source)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(
        "solver make-env: error: cannot write /dev/stdin: file descriptor 0 is open for "
        "reading only; nothing was written"
    )
    assert source.read_text() == "input\n" and sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_another_processes_descriptor_is_an_ordinary_path(tmp_path):
    """/proc/PID/fd/N of another process is not this one's descriptor."""
    from solver.output import own_descriptor

    assert own_descriptor("/dev/stdout") == 1 and own_descriptor("/dev/fd/7") == 7
    assert own_descriptor(f"/proc/{os.getpid()}/fd/4") == 4 and own_descriptor("/proc/thread-self/fd/5") == 5
    assert own_descriptor(f"/proc/{os.getppid()}/fd/1") is None
    assert own_descriptor(str(tmp_path / "env.yml")) is None
    (tmp_path / "link").symlink_to(tmp_path / "env.yml")
    assert own_descriptor(str(tmp_path / "link")) is None
    (tmp_path / "err").symlink_to("/dev/stderr")
    (tmp_path / "chain").symlink_to("err")
    assert own_descriptor(str(tmp_path / "chain")) == 2


# -- symlinks and permissions --------------------------------------------------------------------


def test_a_symlink_is_written_through_and_the_mode_kept(capsys, tmp_path):
    target = tmp_path / "real" / "env.yml"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.yml"
    link.symlink_to(target)
    code, _, err = make_env(capsys, "-o", str(link))
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("# Environment for")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["env.yml"]


def test_a_dangling_symlink_creates_its_target(capsys, tmp_path):
    link = tmp_path / "link.yml"
    link.symlink_to(tmp_path / "made.yml")
    code, _, err = make_env(capsys, "-o", str(link))
    assert code == 0, err
    assert link.is_symlink() and (tmp_path / "made.yml").read_text().startswith("# Environment for")


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_follows_the_umask(capsys, tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        code, _, err = make_env(capsys, "-o", str(tmp_path / "env.yml"))
    finally:
        os.umask(old)
    assert code == 0, err
    assert stat.S_IMODE((tmp_path / "env.yml").stat().st_mode) == mode


def test_a_replaced_file_keeps_its_mode(capsys, tmp_path):
    path = tmp_path / "env.yml"
    path.write_text("old\n")
    path.chmod(0o604)
    code, _, _ = make_env(capsys, "-o", str(path))
    assert code == 0 and stat.S_IMODE(path.stat().st_mode) == 0o604 and path.read_text() != "old\n"


# -- usage errors before anything is written -----------------------------------------------------


def test_empty_name_and_directory_are_usage_errors(capsys, tmp_path):
    code, out, err = make_env(capsys, "-o", "")
    assert code == 2 and out == "" and "-o needs a file name" in one_line(err)
    code, out, err = make_env(capsys, "-o", str(tmp_path))
    assert code == 2 and "is a directory" in one_line(err)


def test_two_flags_naming_one_file_are_a_usage_error(capsys, tmp_path, refused_url):
    path = tmp_path / "env.yml"
    path.write_text("keep\n")
    link = tmp_path / "alias.yml"
    link.symlink_to(path)
    for other in (str(path), str(link)):
        code = cli.main(
            ["make-env", "--gpu", "none", "--channel", refused_url, "-o", str(path), "--explicit", other]
        )
        out, err = capsys.readouterr()
        assert code == 2 and out == ""
        assert "-o and --explicit both name" in one_line(err)
        assert path.read_text() == "keep\n"


def test_check_destinations_sees_hard_links_as_one_file(tmp_path):
    (tmp_path / "a").write_text("x")
    os.link(tmp_path / "a", tmp_path / "b")
    with pytest.raises(UsageError, match="--lock and -o both name"):
        check_destinations(
            [Destination("--lock", str(tmp_path / "a")), Destination("-o", str(tmp_path / "b"))]
        )


# -- failures: the user's path, all or nothing ---------------------------------------------------


def test_errors_name_the_users_path_never_the_temp_file(capsys, tmp_path):
    (tmp_path / "file").write_text("")
    for path in (tmp_path / "missing" / "env.yml", tmp_path / "file" / "env.yml"):
        code, out, err = make_env(capsys, "-o", str(path))
        line = one_line(err)
        assert code == 1 and out == "" and line.startswith(f"solver make-env: error: cannot write {path}: ")
        assert ".tmp" not in line


# -- failures: the cause and the fix, for each errno ----------------------------------------------


def fail_temp_files(monkeypatch, code: int) -> None:
    """Creating the temporary file beside the target fails with `code` (the step where a read-only,
    full or forbidden directory shows up)."""
    real_open = os.open

    def refusing_open(path, flags, mode=0o777, *args, **kwargs):
        if str(path).endswith(".tmp") and flags & os.O_CREAT:
            raise OSError(code, os.strerror(code), path)
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)


@pytest.mark.parametrize(
    ("code", "cause", "fix"),
    [
        (errno.EACCES, "Permission denied creating a file in {dir}", "get write permission on {dir}"),
        (errno.EPERM, "Operation not permitted creating a file in {dir}", "choose a directory you may write"),
        (
            errno.EROFS,
            "Read-only file system (its directory {dir} is mounted read-only)",
            "writable file system",
        ),
        (errno.ENOSPC, "No space left on device", "free some space"),
        (errno.EDQUOT, "Disk quota exceeded", "free some space"),
        (errno.EISDIR, "it is a directory", "give the name of a file"),
        (errno.ENAMETOOLONG, "File name too long", "choose a shorter name"),
    ],
)
def test_each_cause_is_named_with_its_fix(monkeypatch, tmp_path, code, cause, fix):
    target = tmp_path / "env.yml"
    fail_temp_files(monkeypatch, code)
    with pytest.raises(OutputError) as info:
        write_files([(Destination("-o", str(target)), "x\n")])
    error = info.value
    assert str(error).startswith(f"cannot write {target}: {cause.format(dir=tmp_path)}")
    assert fix.format(dir=tmp_path) in error.fix and "create" not in error.one_line()
    assert list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_named(tmp_path):
    target = tmp_path / "a" / "b" / "env.yml"
    with pytest.raises(OutputError) as info:
        write_files([(Destination("-o", str(target)), "x\n")])
    assert f"(the directory {tmp_path / 'a'} does not exist)" in str(info.value)
    assert info.value.fix == "create it first or fix the path"


def test_a_file_used_as_a_directory_is_named(tmp_path):
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / "sub" / "env.yml"
    with pytest.raises(OutputError) as info:
        write_files([(Destination("-o", str(target)), "x\n")])
    assert str(info.value).startswith(
        f"cannot write {target}: Not a directory ({tmp_path / 'file'} is not a directory)"
    )
    assert info.value.fix == "fix the path"


@pytest.mark.skipif(not os.path.isfile("/proc/version"), reason="needs Linux's /proc")
def test_a_file_of_proc_is_not_said_to_lack_its_directory(capsys):
    """/proc exists: the cause is that no file can be created there (ENOENT as root, EACCES
    otherwise), never a directory to create."""
    code, out, err = make_env(capsys, "-o", "/proc/version")
    line = one_line(err)
    assert code == 1 and out == "" and "create it" not in line and "create its directory" not in line
    assert (
        "/proc exists, but no file can be created in it" in line
        or "Permission denied creating a file in /proc" in line
    )


def test_nothing_is_written_when_one_output_fails(tmp_path):
    first, second = tmp_path / "env.yml", tmp_path / "missing" / "env.txt"
    with pytest.raises(OutputError) as info:
        write_files([(Destination("-o", str(first)), "a\n"), (Destination("--explicit", str(second)), "b\n")])
    assert str(info.value).startswith(
        f"cannot write {second}: No such file or directory (the directory {second.parent} does not "
        "exist); nothing was written"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_special_file_that_fails_after_a_rename_says_what_was_written(tmp_path):
    full = device_like(tmp_path, "full", 7)
    regular = tmp_path / "env.yml"
    with pytest.raises(OutputError) as info:
        write_files([(Destination("--explicit", full), "x\n"), (Destination("-o", str(regular)), "y\n")])
    assert str(info.value) == f"cannot write {full}: No space left on device; written: {regular}"
    assert regular.read_text() == "y\n"


def test_all_or_nothing_around_a_real_solve(solver_cli, local_channel, tmp_path):
    env_yml, lock = tmp_path / "env.yml", tmp_path / "no-such-dir" / "env.lock"
    result = solver_cli(
        "make-env",
        "--gpu",
        "RTX 4090",
        "--driver",
        "550.54.14",
        "--platform",
        "linux-64",
        "--channel",
        str(local_channel),
        "-o",
        str(env_yml),
        "--lock",
        str(lock),
    )
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert f"cannot write {lock}" in line and "nothing was written" in line
    assert not env_yml.exists()


# -- full disks and closed streams ---------------------------------------------------------------


def test_a_full_device(capsys, tmp_path):
    full = device_like(tmp_path, "full", 7)
    code, out, err = make_env(capsys, "-o", full)
    assert code == 1 and out == ""
    assert one_line(err).startswith(f"solver make-env: error: cannot write {full}: No space left on device")
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_a_regular_file_on_a_full_disk_is_left_as_it_was(tmp_path):
    """The file-size limit makes the write fail as a full disk does (EFBIG instead of ENOSPC)."""
    import resource

    path = tmp_path / "env.yml"
    path.write_text("old content\n")

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    done = cli_process(*OFFLINE_CPU, "-o", str(path), preexec_fn=small_files)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(f"solver make-env: error: cannot write {path}: File too large")
    assert path.read_text() == "old content\n" and [p.name for p in tmp_path.iterdir()] == ["env.yml"]


def test_standard_output_on_a_full_device(tmp_path):
    with open(device_like(tmp_path, "full", 7), "w") as full:
        done = cli_process(*OFFLINE_CPU, stdout=full)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line == "solver make-env: error: cannot write to standard output: No space left on device"


def test_standard_output_closed_by_its_reader():
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read: every write is EPIPE
    try:
        done = cli_process(*OFFLINE_CPU, "--json", stdout=write_end)
    finally:
        os.close(write_end)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert (
        line
        == "solver make-env: error: standard output was closed before everything was written (broken pipe)"
    )


def test_standard_output_not_open_at_all(tmp_path):
    done = cli_process(*OFFLINE_CPU, stdout=None, shell_prefix="SOLVER >&-")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("solver make-env: error: standard output is closed")
    done = cli_process(*OFFLINE_CPU, "-o", str(tmp_path / "env.yml"), stdout=None, shell_prefix="SOLVER >&-")
    assert done.returncode == 0, done.stderr  # nothing goes to stdout with -o


def test_text_that_is_not_utf8_is_escaped_not_taken_for_a_closed_stdout(tmp_path):
    """argv bytes that are not UTF-8 arrive as lone surrogates; written, they are escaped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA_OVERRIDE_")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"
    code = "import sys; from solver.output import write_stdout; write_stdout(sys.argv[1] + '\\n')"
    done = subprocess.run(
        [sys.executable, "-c", code, os.fsdecode(b"a\xffb")],
        capture_output=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"a\\udcffb\n", b"")
    odd = os.fsdecode(b"Lab \xff GPU:8.6")
    output = tmp_path / os.fsdecode(b"env-\xff.yml")
    for args in ([], ["--json"], ["-o", str(output)]):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "solver",
                "make-env",
                "--offline",
                "--platform",
                "linux-64",
                "--gpu",
                odd,
                "--driver",
                "550.54.14",
                *args,
            ],
            capture_output=True,
            cwd=REPO,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        err = done.stderr.decode()  # UTF-8: stderr escapes what it cannot write
        assert "closed" not in err and "Traceback" not in err and "internal error" not in err
        text = output.read_text() if args[:1] == ["-o"] else done.stdout.decode()
        assert "sm_86" in text or "8.6" in text
    assert "wrote " in err and "\\udcff" in err


def test_the_closed_stdout_advice_fits_the_command(tmp_path):
    done = cli_process(*OFFLINE_CPU, stdout=None, shell_prefix="SOLVER >&-")
    assert done.stderr.splitlines() == [
        "solver make-env: error: standard output is closed; redirect it to a file, or pass -o FILE"
    ]
    done = cli_process(
        *OFFLINE_CPU, "--json", stdout=None, shell_prefix="SOLVER >&-"
    )  # -o does not take JSON
    assert done.stderr.splitlines() == [
        "solver make-env: error: standard output is closed; redirect it to a file"
    ]

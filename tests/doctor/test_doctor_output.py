"""doctor's report on standard output: arguments that are not UTF-8 (argv bytes arrive as lone
surrogates) are printed escaped, never taken for a closed stdout; a closed stdout is one line whose
advice fits doctor (it has no -o)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from doctor_helpers import REPO, doctor, without_nvml


def test_arguments_that_are_not_utf8_are_escaped_in_the_report(tmp_path):
    prefix = tmp_path / os.fsdecode(b"env-\xff")
    prefix.mkdir()
    module = os.fsdecode(b"mod\xfe")
    done = doctor(
        "--prefix",
        str(prefix),
        "--python",
        sys.executable,
        "--import",
        module,
        env_updates={"HOME": str(tmp_path), "PATH": str(tmp_path)},
        pythonpath=[str(without_nvml(tmp_path))],
    )
    assert done.returncode in (0, 1) and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert f"environment {tmp_path}/env-\\udcff (python " in lines[0]
    assert any("mod\\udcfe fails to import" in line for line in lines), done.stdout
    assert lines[-1].endswith("notes")  # the whole report, to its summary line


def test_a_probe_url_that_is_not_utf8_is_a_usage_error():
    done = doctor("--probe-url", os.fsdecode(b"http://\xff/"))
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("solver doctor: error: --probe-url 'http://\\udcff/': it is not a URL")
    assert "not UTF-8" in line


def test_a_closed_stdout_is_not_told_to_use_a_flag_doctor_lacks(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path), PATH=str(tmp_path), PYTHONPATH=str(REPO))
    done = subprocess.run(
        [shutil.which("bash"), "-c", 'exec "$@" >&-', "-", sys.executable, "-m", "solver", "doctor"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "solver doctor: error: standard output is closed; redirect it to a file"
    ]

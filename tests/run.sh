#!/usr/bin/env bash
# Installs everything the tests need into ./.venv (from this repo's own files) and runs the whole
# suite: ruff, then pytest. CI (.ci/run) runs exactly this. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
PY=.venv/bin/python
$PY -m pip install -q --disable-pip-version-check --upgrade pip
# torch 2.13.0 is the CPU build this machine kind carries; the pointops binary targets the stable
# ABI of torch >= 2.10, so any such torch works.
$PY -m pip install -q --disable-pip-version-check -e '.[test]' 'torch==2.13.0'
# pointops itself, CPU extension (the CUDA sources are compile-checked by tests/ops).
$PY -m pip install -q --disable-pip-version-check --no-build-isolation ./ops-src

echo "== ruff"
.venv/bin/ruff check .
echo "== pytest"
$PY -m pytest -q "$@"

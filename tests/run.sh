#!/usr/bin/env bash
# Installs everything the tests need into ./.venv (from this repo's own files) and runs the whole
# suite: ruff, then pytest. CI (.ci/run) runs exactly this. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

# tests/windows cross-compiles ops-src with mingw-w64 and runs the result under wine. CI (a clean
# Debian, as root) installs both here; elsewhere, without them, those tests skip and say why.
have_windows_tools() {
  command -v x86_64-w64-mingw32-g++ >/dev/null &&
    { command -v wine64 >/dev/null || command -v wine >/dev/null || [ -x /usr/lib/wine/wine64 ]; }
}
if ! have_windows_tools; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== apt-get install g++-mingw-w64-x86-64 wine64 (for tests/windows)"
    start=$SECONDS
    if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends g++-mingw-w64-x86-64 wine64 >/dev/null; then
      echo "   installed in $((SECONDS - start)) s"
    else
      echo "   apt-get failed: tests/windows will skip"
    fi
  else
    echo "== mingw-w64 or wine64 missing (install needs root and apt-get): tests/windows will skip"
  fi
fi

# One line per step before it starts, and its time after it, so that a long quiet step is visible
# (pip -q prints nothing while it downloads and installs).
step() { echo "== $*"; STEP_START=$SECONDS; }
done_step() { echo "   done in $((SECONDS - STEP_START)) s"; }

if [ ! -x .venv/bin/python ]; then
  step "python -m venv .venv"
  "${PYTHON:-python3}" -m venv .venv
  done_step
fi
PY=.venv/bin/python
step "pip install --upgrade pip"
$PY -m pip install -q --disable-pip-version-check --upgrade pip
done_step
# torch 2.13.0 is the CPU build this machine kind carries; the pointops binary targets the stable
# ABI of torch >= 2.10, so any such torch works.
step "pip install -e '.[test]' torch==2.13.0 (the solver, the test tools, torch)"
$PY -m pip install -q --disable-pip-version-check -e '.[test]' 'torch==2.13.0'
done_step
# pointops itself: the CPU wheel pip users get (`solver wheels build pointops`: built, repaired
# by auditwheel, audited), installed next to that torch. The CUDA sources are compile-checked by
# tests/ops. Its progress (one counted line per compiled source) goes to stderr.
rm -rf out/ci-wheel
step "solver wheels build pointops (compiles ops-src)"
.venv/bin/solver wheels build pointops -o out/ci-wheel > /dev/null
done_step
step "pip install out/ci-wheel/pointops-*.whl"
$PY -m pip install -q --disable-pip-version-check --no-deps --force-reinstall out/ci-wheel/pointops-*.whl
done_step

# The peers' own code that the drop-in proofs run (Pointnet2_PyTorch's models), fetched at a
# pinned commit into .peers/ (git-ignored). Without network the fetch says so and those tests skip.
step "fetch the peers the drop-in tests run (tests/helpers/peers.py)"
$PY tests/helpers/peers.py || echo "   not fetched: the tests that need it will skip"
done_step

echo "== ruff, ruff format, clang-format"
.venv/bin/ruff check .
.venv/bin/ruff format --check --quiet .
find ops-src/csrc tests/gpu tests/windows -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' |
  xargs .venv/bin/clang-format --dry-run --Werror
echo "== pytest"
$PY -m pytest -q "$@"

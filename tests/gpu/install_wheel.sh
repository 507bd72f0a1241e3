#!/usr/bin/env bash
# Installs a pointops wheel on the GPU host the way a pip user does, next to the host's own torch,
# plus the helper wheels carried in .whl/ (peers' pure-Python dependencies, ninja for the peer
# builds, pykdtree for the CPU benchmark) into /tmp/whl. Prints the site-packages directory that
# holds pointops. Idempotent: a later device call on the same machine runs it again for free.
#
#   SITE=$(bash tests/gpu/install_wheel.sh out/wheels/pointops_cu13-*.whl)
set -euo pipefail
WHEEL=${1:?usage: install_wheel.sh WHEEL}
PY="${PYTHON:-python3}"
# --no-index: the wheel's torch>=2.10 requirement must be met by the torch already installed
$PY -m pip install -q --no-index --disable-pip-version-check "$WHEEL" >&2
# ninja for the peer builds, where the host lacks it
if ! command -v ninja >/dev/null && ls .whl/ninja-*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --disable-pip-version-check .whl/ninja-*.whl >&2
fi
helpers=$(ls .whl/*.whl 2>/dev/null | grep -v /ninja- || true)
if [ -n "$helpers" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check --target /tmp/whl \
    $helpers >&2
fi
command -v ninja >/dev/null || echo "install_wheel.sh: ninja is not on PATH; peer builds will be serial" >&2
(cd /tmp && $PY -c 'import os, pointops; print(os.path.dirname(os.path.dirname(pointops.__file__)))')

#!/usr/bin/env bash
# The GPU proof of recipes/mmcv (issue 46), on the GPU host (torch 2.11.0+cu130, nvcc 13.0,
# Python 3.12, 16 cores, no network):
#
#   tests/gpu/mmcv_proof.sh
#
# 1. deps     installs the carried wheels (WHEELS, default .whl/) into $WORK/deps: mmcv needs
#             mmengine, addict, yapf, termcolor and platformdirs, which the host lacks; mmdet
#             3.3.0 with pycocotools, shapely and terminaltables makes step 5 possible.
# 2. build    builds mmcv from the release sdist (SDIST, default .peers/mmcv-2.1.0/mmcv-2.1.0.tar.gz)
#             with recipes/mmcv/patches and the recipe's flags (MMCV_WITH_OPS=1 FORCE_CUDA=1
#             MMCV_OPENCV_FROM_CONDA=1) for this GPU (TORCH_CUDA_ARCH_LIST=9.0, MAX_JOBS=16) with
#             CC=/usr/bin/gcc CXX=/usr/bin/g++ (the default g++ here links libstdc++ statically),
#             pip install --no-build-isolation --target $WORK/site.
# 3. import   imports the build, prints its CUDA version and runs nms on the GPU.
# 4. mmdet    only where WHEELS holds mmdet-3.3.0: builds RetinaNet and Faster R-CNN R-50 from
#             mmdet's own configs with random weights (no checkpoint), one training step
#             (forward, loss, backward) and one prediction on a random batch on the GPU.
# 5. test_ops upstream's tests/test_ops (UPSTREAM_TESTS, default .peers/mmcv-2.1.0/tests: tag
#             v2.1.0's tests/, which the sdist lacks), run from a copy outside any source tree
#             (inside one, the source package shadows the build and every test fails on
#             mmcv._ext) on PYTEST_WORKERS (8) xdist workers, with what is left of the deadline;
#             junit XML, then summary.txt counts and lists every failure.
#
# Every step is bounded with `timeout` (tests/gpu/bounded_steps.sh) and the whole run by
# DEADLINE (default 525 s). Logs and summary.txt go to ${OUT:-/tmp/mmcv-proof}.
# Rehearsal without a GPU: FORCE_CUDA=0 DEVICE=cpu MMCV_SITE=<an installed CPU build> skips the
# build and runs steps 3-5 on the CPU.
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
START=$SECONDS
DEADLINE=${DEADLINE:-525}
LOGS="${OUT:-/tmp/mmcv-proof}"
WORK=${WORK:-/tmp/mmcv-proof-work}
PY="${PYTHON:-python3}"
SDIST=${SDIST:-.peers/mmcv-2.1.0/mmcv-2.1.0.tar.gz}
UPSTREAM_TESTS=${UPSTREAM_TESTS:-.peers/mmcv-2.1.0/tests}
WHEELS=${WHEELS:-.whl}
FORCE_CUDA=${FORCE_CUDA:-1}
DEVICE=${DEVICE:-cuda}
SUMMARY="$LOGS/summary.txt"
RESULT_LINE='passed|failed|error|Error|mmcv proof'
STEPS=${STEPS:-" deps build import mmdet test_ops "}
mkdir -p "$LOGS"
: > "$SUMMARY"
rm -rf "$WORK" && mkdir -p "$WORK"
# shellcheck source=tests/gpu/bounded_steps.sh
source tests/gpu/bounded_steps.sh

note() { echo "$*" | tee -a "$SUMMARY"; }

note "== mmcv proof on $(hostname): $($PY -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")' 2>&1)"
note "nvcc: $(nvcc --version 2>/dev/null | tail -1)"

# 1. the wheels: one version of each, installed without their dependencies (the host has the rest)
if ! ls "$WHEELS"/mmengine-*.whl > /dev/null 2>&1; then
  note "deps: no mmengine wheel in $WHEELS: mmcv cannot be imported without it (see docs/mmcv.md)"
  exit 2
fi
step deps "$LOGS/deps.log" $PY -m pip install --no-index --no-deps --no-compile --no-cache-dir \
  --target "$WORK/deps" "$WHEELS"/*.whl
export PYTHONPATH="$WORK/site:$WORK/deps"

# 2. the build, from the sdist and the recipe's patches
build_mmcv() {
  local began=$SECONDS
  mkdir -p "$WORK/src" && tar -xzf "$SDIST" -C "$WORK/src" || return 1
  local src
  src=$(echo "$WORK"/src/mmcv-*)
  for patch in "$REPO"/recipes/mmcv/patches/*.patch; do
    echo "applying $(basename "$patch")"
    if command -v patch > /dev/null; then
      (cd "$src" && patch -p1 --forward < "$patch") || return 1
    else
      (cd "$src" && git apply -v "$patch") || return 1
    fi
  done
  local cc=()
  [ -x /usr/bin/gcc ] && cc+=(CC=/usr/bin/gcc)
  [ -x /usr/bin/g++ ] && cc+=(CXX=/usr/bin/g++)
  (cd "$src" && env "${cc[@]}" MMCV_WITH_OPS=1 FORCE_CUDA="$FORCE_CUDA" MMCV_OPENCV_FROM_CONDA=1 \
    TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" MAX_JOBS="${MAX_JOBS:-16}" \
    $PY -m pip install -v --no-deps --no-build-isolation --target "$WORK/site" .) || return 1
  echo "mmcv proof: built in $((SECONDS - began)) s"
}
if [ -n "${MMCV_SITE:-}" ]; then
  ln -s "$(readlink -f "$MMCV_SITE")" "$WORK/site"
  note "build: skipped, using MMCV_SITE=$MMCV_SITE"
else
  export -f build_mmcv
  export WORK SDIST REPO FORCE_CUDA PY
  step build "$LOGS/build.log" bash -c build_mmcv || { note "build failed: see build.log"; exit 1; }
fi

# 3. the build imports, reports its CUDA version and runs an op on the device
step import "$LOGS/import.log" $PY - "$DEVICE" <<'EOF'
import sys

import torch

import mmcv
from mmcv.ops import get_compiler_version, get_compiling_cuda_version, nms

device = sys.argv[1]
print(f"mmcv {mmcv.__version__} from {mmcv.__file__}")
print(f"compiled with {get_compiler_version()}, CUDA {get_compiling_cuda_version()}")
boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]], device=device)
_, keep = nms(boxes, torch.tensor([0.9, 0.8, 0.7], device=device), 0.5)
assert keep.tolist() == [0, 2], keep
print(f"mmcv proof: nms on {device} kept {keep.tolist()}")
EOF

# 4. a real client, unmodified: mmdetection 3.3.0's detectors on the device
if ! wanted mmdet; then
  note "mmdet: not in STEPS"
elif ! ls "$WHEELS"/mmdet-3.3.0-*.whl > /dev/null 2>&1; then
  note "mmdet: skipped (no mmdet-3.3.0 wheel in $WHEELS)"
else
  STEP_TIMEOUT=${MMDET_TIMEOUT:-150} step mmdet "$LOGS/mmdet.log" $PY - "$DEVICE" <<'EOF'
import math
import sys
from pathlib import Path

import torch

import mmcv
import mmdet
from mmengine.config import Config
from mmdet.registry import MODELS
from mmdet.testing import demo_mm_inputs
from mmdet.utils import register_all_modules

device = sys.argv[1]
register_all_modules()
print(f"mmdet {mmdet.__version__} with mmcv {mmcv.__version__} from {mmcv.__file__}")
configs = Path(mmdet.__file__).parent / ".mim" / "configs"
detectors = {
    "RetinaNet R-50": "retinanet/retinanet_r50_fpn_1x_coco.py",
    "Faster R-CNN R-50": "faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py",
}
torch.manual_seed(0)
for name, config in detectors.items():
    cfg = Config.fromfile(configs / config)
    cfg.model.backbone.init_cfg = None  # random weights: no ImageNet checkpoint to download
    # keep every scored box, so that the prediction's NMS has boxes to work on
    test_cfg = cfg.model.test_cfg.get("rcnn", cfg.model.test_cfg)
    test_cfg.score_thr = 0.0
    model = MODELS.build(cfg.model)
    model.init_weights()
    model.to(device).train()
    packed = demo_mm_inputs(2, [(3, 320, 320), (3, 288, 352)], num_items=[3, 5], num_classes=80)
    data = model.data_preprocessor(packed, True)
    losses = model(**data, mode="loss")
    loss, log_vars = model.parse_losses(losses)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
    grad_norm = torch.stack([g.norm() for g in grads]).norm().item()
    assert math.isfinite(loss.item()) and math.isfinite(grad_norm) and grad_norm > 0, (loss, grad_norm)
    model.eval()
    with torch.no_grad():
        results = model(**model.data_preprocessor(packed, False), mode="predict")
    boxes = [len(r.pred_instances.bboxes) for r in results]
    assert all(boxes), f"no boxes predicted: {boxes}"
    print(f"mmcv proof: {name} on {device}: loss {loss.item():.4f} "
          f"({', '.join(f'{k} {v:.3f}' for k, v in log_vars.items() if k != 'loss')}), "
          f"grad norm {grad_norm:.3f}, {len(grads)} parameters with gradients, predicted boxes {boxes}")
EOF
fi

# 5. upstream's op tests, from a copy outside the source tree (tests/data is read by path)
test_ops() {
  mkdir -p "$WORK/run" && cp -r "$UPSTREAM_TESTS" "$WORK/run/tests"
  local plugins=() left
  $PY -c "import xdist" 2> /dev/null && plugins+=(-n "${PYTEST_WORKERS:-8}")
  $PY -c "import pytest_timeout" 2> /dev/null && plugins+=(--timeout 120)
  # The rest of the deadline; pytest is interrupted (SIGINT) 20 s before it, so that it still
  # writes the junit report of what ran.
  left=$(budget)
  (cd "$WORK/run" && step test_ops "$LOGS/test_ops.log" timeout -s INT -k 10 $((left > 30 ? left - 20 : 10)) \
    $PY -m pytest tests/test_ops -q -rfE -p no:cacheprovider --continue-on-collection-errors "${plugins[@]}" --junitxml "$LOGS/test_ops.xml")
}
if wanted test_ops; then
  test_ops
  $PY - "$LOGS/test_ops.xml" >> "$SUMMARY" <<'EOF'
"""Counts of the junit report, then every failure and error by test file, with its first line."""
import collections
import sys
import xml.etree.ElementTree as ET

try:
    cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
except (OSError, ET.ParseError) as exc:
    sys.exit(print(f"test_ops: no junit report ({exc})"))
outcome = collections.Counter()
failures = collections.defaultdict(list)
for case in cases:
    if case.get("name") is None:  # the test running when pytest was interrupted
        continue
    bad = case.find("failure") if case.find("failure") is not None else case.find("error")
    kind = "skipped" if case.find("skipped") is not None else ("failed" if bad is not None else "passed")
    outcome[kind] += 1
    if bad is not None:
        parts = (case.get("classname") or case.get("name", "")).split(".")  # collection errors: name only
        module = next((p for p in parts if p.startswith("test_") and p != "test_ops"), ".".join(parts))
        first = (bad.get("message") or bad.text or "").strip().splitlines()[:1]
        failures[module].append(f"{case.get('name')}: {(first or [''])[0][:160]}")
print("test_ops: " + ", ".join(f"{n} {kind}" for kind, n in sorted(outcome.items())))
for module, lines in sorted(failures.items()):
    print(f"  {module}: {len(lines)} failed")
    for line in lines:
        print(f"    {line}")
EOF
  grep -q KeyboardInterrupt "$LOGS/test_ops.log" && note "test_ops: interrupted at the deadline, not every test ran"
fi

note "== done in $((SECONDS - START)) s"
cat "$SUMMARY"

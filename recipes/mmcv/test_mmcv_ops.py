"""The recipe's own test: runs in the test environment of every built mmcv package.

    python test_mmcv_ops.py --version 2.1.0 --torch 2.13 --cuda None --target-platform linux-64
    python test_mmcv_ops.py --version 2.1.0 --torch 2.13 --cuda 13.0 --target-platform linux-64 \
        --arch-table arch-table

The sdist carries none of upstream's tests/test_ops, so this calls ops with CPU kernels on inputs
whose answers are known by hand or from torch: nms, batched_nms, bbox_overlaps, box_iou_rotated,
roi_align (forward and backward) and deform_conv2d / modulated_deform_conv2d (against conv2d,
with gradients). It also checks that mmcv and the PyTorch minor are the ones the package was
built for, that the extension reports the variant's CUDA version, and for CUDA variants the SASS
and PTX archs in the binary (cuobjdump) and, where a GPU is present, the same ops on it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import mmcv
import torch
import torch.nn.functional as F
from mmcv import ops
from mmcv.ops import info


def close(got: torch.Tensor, want: torch.Tensor, what: str, tol: float = 1e-4) -> None:
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    err = (got - want).abs().max().item() if got.numel() else 0.0
    assert err <= tol, f"{what}: off by {err:g}\n got {got}\nwant {want}"


def check_versions(version: str, torch_minor: str) -> None:
    assert mmcv.__version__ == version, f"mmcv {mmcv.__version__} imported, the package is {version}"
    got = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    assert got == torch_minor, f"torch {torch.__version__} imported, the package is built for {torch_minor}"


def check_build_info(cuda: str) -> None:
    compiled = ops.get_compiling_cuda_version()
    print(f"mmcv._ext: compiler {info.get_compiler_version()}, CUDA {compiled}")
    if cuda == "None":
        assert compiled == "not available", f"cpu variant, but _ext was compiled with CUDA {compiled}"
    else:
        assert compiled.startswith(cuda), f"built for CUDA {cuda}, _ext says {compiled}"


def check_nms(device: str) -> None:
    boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 9]], device=device)
    scores = torch.tensor([0.9, 0.8, 0.7, 0.95], device=device)
    # IoU(3, 0) = 90/100 and IoU(3, 1) = 72/118 are above 0.5: only 3 and 2 survive, by score
    dets, keep = ops.nms(boxes, scores, iou_threshold=0.5)
    assert keep.tolist() == [3, 2], keep
    close(dets[:, 4], torch.tensor([0.95, 0.7]), "nms scores")
    # different classes never suppress each other
    classes = torch.tensor([0, 1, 0, 2], device=device)
    dets, keep = ops.batched_nms(boxes, scores, classes, dict(type="nms", iou_threshold=0.5))
    assert keep.tolist() == [3, 0, 1, 2], keep


def check_box_ious(device: str) -> None:
    a = torch.tensor([[0.0, 0, 10, 10], [0, 0, 4, 4]], device=device)
    b = torch.tensor([[5.0, 0, 15, 10], [0, 0, 10, 10]], device=device)
    want = torch.tensor([[50 / 150, 1.0], [0.0, 16 / 100]])
    close(ops.bbox_overlaps(a, b), want, "bbox_overlaps")

    # the same boxes as (x_center, y_center, w, h, angle 0), then both turned by 90 degrees about
    # their centres (a square stays itself)
    def rotated(boxes: torch.Tensor, angle: float) -> torch.Tensor:
        centre = (boxes[:, :2] + boxes[:, 2:]) / 2
        size = boxes[:, 2:] - boxes[:, :2]
        return torch.cat([centre, size, torch.full_like(size[:, :1], angle)], dim=1)

    close(ops.box_iou_rotated(rotated(a, 0.0), rotated(b, 0.0)), want, "box_iou_rotated")
    square = torch.tensor([[5.0, 5, 10, 10, 0]], device=device)
    turned = torch.tensor([[5.0, 5, 10, 10, torch.pi / 2]], device=device)
    close(ops.box_iou_rotated(square, turned), torch.ones(1, 1), "box_iou_rotated of a turned square")


def check_roi_align(device: str) -> None:
    # a ramp along x: bilinear sampling of a linear function returns the sample position, so each
    # output bin is the x of its centre (aligned=True shifts boxes by half a pixel)
    width = 16
    feature = torch.arange(width, dtype=torch.float32, device=device).repeat(1, 2, 8, 1)
    feature.requires_grad_(True)
    rois = torch.tensor([[0.0, 2, 1, 10, 7]], device=device)
    out = ops.roi_align(feature, rois, (3, 4), 1.0, 2, "avg", True)
    bin_w = (10 - 2) / 4
    centres = torch.tensor([2 - 0.5 + (i + 0.5) * bin_w for i in range(4)])
    close(out, centres.expand(1, 2, 3, 4), "roi_align")
    # each output is an average of interpolation weights that sum to one (all samples inside)
    out.sum().backward()
    close(feature.grad.sum(), torch.tensor(2 * 3 * 4.0), "roi_align gradient total")


def check_deform_conv(device: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 4, 7, 9, device=device, requires_grad=True)
    weight = torch.randn(6, 4, 3, 3, device=device, requires_grad=True)
    bias = torch.randn(6, device=device, requires_grad=True)
    offset = torch.zeros(2, 2 * 9, 7, 9, device=device)
    # zero offsets (and a mask of ones) make a deformable convolution an ordinary one
    got = ops.deform_conv2d(x, offset, weight, 1, 1, 1, 1, 1)
    want = F.conv2d(x, weight, None, 1, 1)
    close(got, want, "deform_conv2d", tol=1e-3)
    grads = torch.autograd.grad(got.square().sum(), (x, weight))
    want_grads = torch.autograd.grad(want.square().sum(), (x, weight))
    for name, g, w in zip(("input", "weight"), grads, want_grads, strict=True):
        close(g, w, f"deform_conv2d gradient of {name}", tol=1e-2)
    mask = torch.ones(2, 9, 7, 9, device=device)
    got = ops.modulated_deform_conv2d(x, offset, mask, weight, bias, 1, 1, 1, 1, 1)
    close(got, F.conv2d(x, weight, bias, 1, 1), "modulated_deform_conv2d", tol=1e-3)


def check_ops(device: str) -> None:
    for check in (check_nms, check_box_ious, check_roi_align, check_deform_conv):
        check(device)
        print(f"{check.__name__[6:]} on {device}: ok")


def _capability(arch: str) -> tuple[int, int]:
    major, minor = arch.split(".")
    return int(major), int(minor.rstrip("af"))


def check_archs(cuda: str, target_platform: str, arch_table: Path) -> None:
    """The SASS and PTX archs in mmcv/_ext are the channel's for this CUDA version and platform."""
    sys.path.insert(0, str(arch_table))
    from cuda_arch_list import archs_for

    want_sass, want_ptx = archs_for(arch_table, cuda, target_platform)
    cuobjdump = shutil.which("cuobjdump")
    if cuobjdump is None:
        print("cuobjdump not installed; skipping the arch check")
        return
    (extension,) = Path(mmcv.__file__).parent.glob("_ext*")

    def listed(flag: str) -> list[str]:
        out = subprocess.run([cuobjdump, flag, str(extension)], capture_output=True, text=True, check=True)
        found = {f"{m[:-1]}.{m[-1]}" for m in re.findall(r"\.sm_(\d+)[af]?\.", out.stdout)}
        return sorted(found, key=_capability)

    got_sass, got_ptx = listed("--list-elf"), listed("--list-ptx")
    assert got_sass == want_sass, f"SASS archs {got_sass}, the variant wants {want_sass}"
    assert got_ptx == [want_ptx], f"PTX archs {got_ptx}, the variant wants [{want_ptx}]"
    print(f"archs: SASS {got_sass}, PTX {got_ptx}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True, help="the mmcv version of the package")
    parser.add_argument("--torch", required=True, help="the PyTorch minor it was built for, e.g. 2.13")
    parser.add_argument("--cuda", required=True, help="the variant's CUDA version, or None")
    parser.add_argument("--target-platform", required=True)
    parser.add_argument("--arch-table", type=Path, default=Path("arch-table"))
    args = parser.parse_args(argv)
    print(f"mmcv {mmcv.__version__} from {mmcv.__file__}; torch {torch.__version__}")
    check_versions(args.version, args.torch)
    check_build_info(args.cuda)
    check_ops("cpu")
    if args.cuda != "None":
        check_archs(args.cuda, args.target_platform, args.arch_table)
        if torch.cuda.is_available():
            check_ops("cuda")
        else:
            print("no GPU here; the CUDA kernels were not run")
    print("mmcv recipe test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

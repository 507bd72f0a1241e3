"""pointnet2_ops.pointnet2_modules on pointops: PointNet++'s set-abstraction and
feature-propagation layers with Pointnet2_PyTorch's (3.0.0) names, arguments, attributes and
output layouts.

- build_shared_mlp(mlp_spec, bn=True): per consecutive pair of widths a 1x1 Conv2d (with a bias
  only when bn is off), a BatchNorm2d when bn is on, and an in-place ReLU.
- PointnetSAModuleMSG(npoint, radii, nsamples, mlps, bn=True, use_xyz=True): forward(xyz
  [B, N, 3], features [B, C, N] or None) -> (new_xyz [B, npoint, 3], new_features
  [B, sum of mlps[k][-1], npoint]). Per scale: ball query and grouping, the shared MLP, a max-pool
  over the ball. With use_xyz the grouped relative coordinates are prepended to the features,
  so each mlps[k][0] is C (the module adds the 3). npoint=None groups the whole cloud in one
  group per scale (new_xyz None, new_features [B, ..., 1]).
- PointnetSAModule(mlp, npoint=None, radius=None, nsample=None, bn=True, use_xyz=True): one scale.
- PointnetFPModule(mlp, bn=True): forward(unknown [B, n, 3], known [B, m, 3],
  unknow_feats [B, C1, n] or None, known_feats [B, C2, m]) -> [B, mlp[-1], n]: known_feats
  interpolated at the unknown points from their three nearest known points (inverse-distance
  weights), concatenated with unknow_feats, through the shared MLP (mlp[0] = C2 + C1).

The attributes (npoint, groupers, mlps, mlp) are upstream's, so state_dict keys, and with them
checkpoints, are interchangeable. The layers call pointnet2_ops.pointnet2_utils' functions
through that module, as upstream's do. Differences from upstream: docs/pointnet2_ops.md.
"""

from __future__ import annotations

import numbers
import operator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pointnet2_ops import pointnet2_utils

__all__ = ["PointnetFPModule", "PointnetSAModule", "PointnetSAModuleMSG", "build_shared_mlp"]

_INT32_MAX = 2**31 - 1  # upstream's kernels take npoint and nsample as int
_EPS = 1e-8  # upstream's inverse-distance weights: 1 / (dist + 1e-8)


# --- arguments --------------------------------------------------------------------------------


def _count(value, name: str, minimum: int, why: str) -> int:
    """An int (numpy's too) in [minimum, 2**31 - 1]; bools are refused."""
    if isinstance(value, bool):
        raise TypeError(f"pointnet2_ops: {name} must be an int, got a bool ({value})")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"pointnet2_ops: {name} must be an int, got {type(value).__name__}") from None
    if not minimum <= value <= _INT32_MAX:
        raise ValueError(
            f"pointnet2_ops: {name} must be between {minimum} and 2**31 - 1 ({why}), got {value}"
        )
    return value


def _radius(value, name: str) -> float:
    """A ball radius: a real number >= 0 (inf takes every point)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"pointnet2_ops: {name} must be a number, got {type(value).__name__}")
    value = float(value)
    if not value >= 0:  # nan fails too
        raise ValueError(f"pointnet2_ops: {name} must be >= 0 (inf takes every point), got {value}")
    return value


def _widths(spec, name: str, first_minimum: int) -> list[int]:
    """A copy of an MLP spec: channel counts [in, hidden..., out], at least the input's."""
    if isinstance(spec, (str, bytes, Tensor)) or not isinstance(spec, (list, tuple)):
        raise TypeError(
            f"pointnet2_ops: {name} must be a list of channel counts [in, ..., out], got {type(spec).__name__}"
        )
    if len(spec) == 0:
        raise ValueError(f"pointnet2_ops: {name} is empty; it needs at least the input channel count")
    why = "a layer width"
    return [_count(w, f"{name}[{i}]", first_minimum if i == 0 else 1, why) for i, w in enumerate(spec)]


def build_shared_mlp(mlp_spec: list[int], bn: bool = True) -> nn.Sequential:
    """1x1 Conv2d (bias only without batch norm), BatchNorm2d when bn, in-place ReLU, for each
    consecutive pair of mlp_spec's widths. A one-entry spec gives an empty Sequential."""
    widths = _widths(mlp_spec, "mlp_spec", first_minimum=1)
    layers: list[nn.Module] = []
    for c_in, c_out in zip(widths, widths[1:], strict=False):
        layers.append(nn.Conv2d(c_in, c_out, kernel_size=1, bias=not bn))
        if bn:
            layers.append(nn.BatchNorm2d(c_out))
        layers.append(nn.ReLU(True))
    return nn.Sequential(*layers)


# --- input checks shared by the layers ----------------------------------------------------------


def _points(value, name: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"pointnet2_ops: {name} must be a tensor [B, N, 3], got {type(value).__name__}")
    if value.dim() != 3 or value.shape[2] != 3:
        raise ValueError(f"pointnet2_ops: {name} must have shape [B, N, 3], got {list(value.shape)}")
    return value


def _features_of(value, name: str, batch: int, points: int, because: str) -> Tensor:
    """features [B, C, N] with B and N given (`because` says where they come from)."""
    if not isinstance(value, Tensor):
        raise TypeError(
            f"pointnet2_ops: {name} must be a tensor [B, C, N] or None, got {type(value).__name__}"
        )
    if value.dim() != 3 or value.shape[0] != batch or value.shape[2] != points:
        raise ValueError(
            f"pointnet2_ops: {name} must have shape [B, C, N] = [{batch}, C, {points}] ({because}), "
            f"got {list(value.shape)}"
        )
    return value


def _matches_parameters(module: nn.Module, value: Tensor, name: str, enters_mlp: bool = True) -> None:
    """value is a floating-point tensor on the parameters' device and, if it enters the shared
    MLP, of their dtype (any floating dtype under autocast, which converts it)."""
    if not value.is_floating_point():
        raise TypeError(f"pointnet2_ops: {name} must be a floating-point tensor, got {value.dtype}")
    parameter = next(module.parameters(), None)
    if parameter is None:
        return
    if value.device != parameter.device:
        raise ValueError(
            f"pointnet2_ops: {name} is on {value.device} but the module's parameters are on "
            f"{parameter.device}; move one of them (.to(device))"
        )
    if enters_mlp and value.dtype != parameter.dtype and not torch.is_autocast_enabled(value.device.type):
        raise TypeError(
            f"pointnet2_ops: {name} has dtype {value.dtype} but the module's parameters are "
            f"{parameter.dtype}; convert the input or the module (.to(dtype)), or run under torch.autocast"
        )


# --- set abstraction ----------------------------------------------------------------------------


class _PointnetSAModuleBase(nn.Module):
    """The forward pass of the set-abstraction layers, for subclasses that set npoint, groupers
    (one per scale: QueryAndGroup, or GroupAll when npoint is None) and mlps (one per scale)."""

    def __init__(self):
        super().__init__()
        self.npoint = None
        self.groupers = None
        self.mlps = None
        self.use_xyz = True
        self.feature_channels = None  # C the mlps expect; None: not checked

    def forward(self, xyz: Tensor, features: Tensor | None = None) -> tuple[Tensor | None, Tensor]:
        """xyz [B, N, 3], features [B, C, N] or None -> (new_xyz [B, npoint, 3] or None,
        new_features [B, sum of the mlps' output widths, npoint or 1])."""
        self._check_inputs(xyz, features)
        new_xyz = None
        if self.npoint is not None:
            xyz_flipped = xyz.transpose(1, 2).contiguous()
            centres = pointnet2_utils.furthest_point_sample(xyz, self.npoint)
            new_xyz = pointnet2_utils.gather_operation(xyz_flipped, centres).transpose(1, 2).contiguous()
        pooled = []
        for grouper, mlp in zip(self.groupers, self.mlps, strict=True):
            grouped = mlp(grouper(xyz, new_xyz, features))  # [B, width, npoint, nsample]
            # max_pool2d, not amax: its gradient goes to one maximum per ball, as upstream's
            pooled.append(F.max_pool2d(grouped, kernel_size=[1, grouped.size(3)]).squeeze(-1))
        # cat of 3-d tensors is contiguous: upstream's layout, also where the groups were channels_last
        return new_xyz, torch.cat(pooled, dim=1)

    def _check_inputs(self, xyz, features) -> None:
        xyz = _points(xyz, "xyz")
        batch, points = xyz.shape[0], xyz.shape[1]
        if points == 0:
            raise ValueError(
                "pointnet2_ops: xyz is an empty cloud (N = 0); a set-abstraction layer needs points"
            )
        if self.npoint is not None and self.npoint > points:
            raise ValueError(
                f"pointnet2_ops: npoint = {self.npoint} centres asked of clouds of N = {points} points; "
                f"give clouds of at least npoint points or build the layer with a smaller npoint"
            )
        channels = 0
        if features is not None:
            channels = _features_of(features, "features", batch, points, "xyz's B and N").shape[1]
        if self.feature_channels is not None and channels != self.feature_channels:
            given = "None (0 channels)" if features is None else f"{channels} channels"
            raise ValueError(
                f"pointnet2_ops: features has {given} but the layer was built for "
                f"{self.feature_channels} (mlp[0] = C, the layer adds xyz's 3 itself when use_xyz)"
            )
        if features is None and not self.use_xyz and self.npoint is not None:
            raise ValueError(
                "pointnet2_ops: features is None and the layer was built with use_xyz=False: "
                "it has no input; pass features or build it with use_xyz=True"
            )
        _matches_parameters(self, xyz, "xyz", enters_mlp=self.use_xyz or features is None)
        if features is not None:
            _matches_parameters(self, features, "features")


class PointnetSAModuleMSG(_PointnetSAModuleBase):
    """Set abstraction with multi-scale grouping: npoint centres by furthest point sampling, and
    per scale k a ball of radii[k] holding nsamples[k] points, grouped, through the shared MLP
    mlps[k] and max-pooled; the scales' outputs are concatenated along the channels. npoint=None
    groups each whole cloud (radii and nsamples are then not used). mlps[k][0] is the feature
    channel count C; with use_xyz the layer adds 3 for the relative coordinates."""

    def __init__(self, npoint, radii, nsamples, mlps, bn=True, use_xyz=True):
        super().__init__()
        scales = _scale_count(radii, nsamples, mlps)
        self.npoint = None if npoint is None else _count(npoint, "npoint", 1, "centres per cloud")
        self.use_xyz = bool(use_xyz)
        self.groupers = nn.ModuleList()
        self.mlps = nn.ModuleList()
        for k in range(scales):
            spec = _widths(mlps[k], f"mlps[{k}]", first_minimum=0)
            if self.npoint is None:
                self.groupers.append(pointnet2_utils.GroupAll(self.use_xyz))
            else:
                radius = _radius(radii[k], f"radii[{k}]")
                nsample = _count(nsamples[k], f"nsamples[{k}]", 1, "points per ball, max-pooled")
                self.groupers.append(pointnet2_utils.QueryAndGroup(radius, nsample, use_xyz=self.use_xyz))
            self.feature_channels = _same_input(self.feature_channels, spec[0], k)
            if self.use_xyz:
                spec[0] += 3  # on this copy: the caller's list stays as given
            if spec[0] == 0:
                raise ValueError(
                    f"pointnet2_ops: mlps[{k}][0] = 0 with use_xyz=False: the layer would have no input "
                    "channels; give the feature count C or build it with use_xyz=True"
                )
            self.mlps.append(build_shared_mlp(spec, bn))


def _scale_count(radii, nsamples, mlps) -> int:
    for name, value in (("radii", radii), ("nsamples", nsamples), ("mlps", mlps)):
        if not isinstance(value, (list, tuple)):
            raise TypeError(
                f"pointnet2_ops: {name} must be a list (one entry per scale), got {type(value).__name__}"
            )
    if not len(radii) == len(nsamples) == len(mlps):
        raise ValueError(
            f"pointnet2_ops: radii, nsamples and mlps need one entry per scale each, got "
            f"{len(radii)}, {len(nsamples)} and {len(mlps)}"
        )
    if len(mlps) == 0:
        raise ValueError("pointnet2_ops: radii, nsamples and mlps are empty; give at least one scale")
    return len(mlps)


def _same_input(previous: int | None, channels: int, k: int) -> int:
    """Every scale groups the same features: the mlps' first widths agree."""
    if previous is not None and channels != previous:
        raise ValueError(
            f"pointnet2_ops: mlps[{k}][0] = {channels} but mlps[0][0] = {previous}; every scale groups "
            "the same features, so their input widths must agree"
        )
    return channels


class PointnetSAModule(PointnetSAModuleMSG):
    """Set abstraction at one scale: PointnetSAModuleMSG with radii=[radius], nsamples=[nsample],
    mlps=[mlp]. npoint=None (the default) groups each whole cloud."""

    def __init__(self, mlp, npoint=None, radius=None, nsample=None, bn=True, use_xyz=True):
        super().__init__(
            mlps=[mlp], npoint=npoint, radii=[radius], nsamples=[nsample], bn=bn, use_xyz=use_xyz
        )


# --- feature propagation ------------------------------------------------------------------------


class PointnetFPModule(nn.Module):
    """Feature propagation: known_feats interpolated at the unknown points (three nearest known
    points, weights 1 / (dist + 1e-8) normalised), concatenated with unknow_feats, through the
    shared MLP. mlp[0] = C2 + C1 (known_feats' channels, then unknow_feats')."""

    def __init__(self, mlp, bn=True):
        super().__init__()
        self.mlp = build_shared_mlp(mlp, bn=bn)
        self.in_channels = _widths(mlp, "mlp", first_minimum=1)[0]

    def forward(
        self, unknown: Tensor, known: Tensor | None, unknow_feats: Tensor | None, known_feats: Tensor
    ) -> Tensor:
        """unknown [B, n, 3], known [B, m, 3], unknow_feats [B, C1, n] or None, known_feats
        [B, C2, m] -> [B, mlp[-1], n]. known=None: known_feats [B, C2, 1] is one feature per
        cloud, given to every unknown point."""
        self._check_inputs(unknown, known, unknow_feats, known_feats)
        if known is not None:
            dist, idx = pointnet2_utils.three_nn(unknown, known)
            if dist.dtype in (torch.float16, torch.bfloat16):
                dist = dist.float()  # 1e-8 vanishes in float16: a coincident point would give inf / inf
            dist_recip = 1.0 / (dist + _EPS)
            weight = dist_recip / torch.sum(dist_recip, dim=2, keepdim=True)
            interpolated = pointnet2_utils.three_interpolate(known_feats, idx, weight.to(known_feats.dtype))
        else:
            interpolated = known_feats.expand(known_feats.shape[0], known_feats.shape[1], unknown.shape[1])
        if unknow_feats is not None:
            interpolated = torch.cat([interpolated, unknow_feats], dim=1)  # [B, C2 + C1, n]
        return self.mlp(interpolated.unsqueeze(-1)).squeeze(-1)

    def _check_inputs(self, unknown, known, unknow_feats, known_feats) -> None:
        unknown = _points(unknown, "unknown")
        batch, n = unknown.shape[0], unknown.shape[1]
        if n == 0:
            raise ValueError(
                "pointnet2_ops: unknown is an empty cloud (n = 0); give at least one point to propagate to"
            )
        if known is None:  # one feature per cloud
            known_feats = _features_of(
                known_feats, "known_feats", batch, 1, "known is None: one feature per cloud"
            )
        else:
            known = _points(known, "known")
            if known.shape[0] != batch:
                raise ValueError(
                    f"pointnet2_ops: known has {known.shape[0]} clouds but unknown has {batch}; give both the same B"
                )
            if known.shape[1] == 0:
                raise ValueError(
                    "pointnet2_ops: known is an empty cloud (m = 0); interpolation needs at least one known point"
                )
            known_feats = _features_of(known_feats, "known_feats", batch, known.shape[1], "known's B and m")
        channels = known_feats.shape[1]
        if unknow_feats is not None:
            channels += _features_of(unknow_feats, "unknow_feats", batch, n, "unknown's B and n").shape[1]
        if channels != self.in_channels:
            raise ValueError(
                f"pointnet2_ops: known_feats and unknow_feats have {channels} channels together but the "
                f"layer was built for mlp[0] = {self.in_channels} (C2 + C1)"
            )
        _matches_parameters(self, unknown, "unknown", enters_mlp=False)
        if known is not None:
            _matches_parameters(self, known, "known", enters_mlp=False)
        _matches_parameters(self, known_feats, "known_feats")
        if unknow_feats is not None:
            _matches_parameters(self, unknow_feats, "unknow_feats")

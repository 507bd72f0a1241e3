"""Point-cloud generators for the operator tests, covering the edge cases peers get wrong."""

from __future__ import annotations

import torch

KINDS = ("random", "duplicates", "identical", "grid", "origin", "large")


def cloud(kind: str, B: int, N: int, dtype=torch.float64, seed: int = 0) -> torch.Tensor:
    """[B, N, 3] points of the given kind:
    random     - uniform in the unit cube (no ties);
    duplicates - every point appears twice;
    identical  - all points equal;
    grid       - small integer coordinates (many exact distance ties, exact in float32 too);
    origin     - random, with the first points exactly at the origin;
    large      - random at 1e5 scale (squared distances far above the 1e10/5e4 sentinels of peers).
    """
    g = torch.Generator().manual_seed(seed)
    if kind == "random":
        x = torch.rand(B, N, 3, generator=g, dtype=torch.float64)
    elif kind == "duplicates":
        half = torch.rand(B, (N + 1) // 2, 3, generator=g, dtype=torch.float64)
        x = half.repeat_interleave(2, dim=1)[:, :N]
    elif kind == "identical":
        x = torch.rand(B, 1, 3, generator=g, dtype=torch.float64).expand(B, N, 3).clone()
    elif kind == "grid":
        x = torch.randint(0, 3, (B, N, 3), generator=g).to(torch.float64)
    elif kind == "origin":
        x = torch.rand(B, N, 3, generator=g, dtype=torch.float64)
        x[:, : min(N, 3)] = 0.0
    elif kind == "large":
        x = (torch.rand(B, N, 3, generator=g, dtype=torch.float64) - 0.5) * 2e5
    else:
        raise ValueError(kind)
    return x.to(dtype)


def queries(kind: str, B: int, M: int, dtype=torch.float64, seed: int = 1) -> torch.Tensor:
    return cloud(kind, B, M, dtype, seed)

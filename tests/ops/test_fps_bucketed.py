"""The CPU kd-tree FPS sampler returns exactly what the brute-force scan returns.

The CPU_FPS_PATH knob (brute|kdtree) forces one CPU sampler; every case runs both and compares
indices bit for bit, on data built to stress the pruning bound and the lowest-index tie rule.
"""

import ops_reference as ref
import pointops
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def run_path(monkeypatch, path, xyz, k, lengths=None, start=0):
    with pointops._tuning.override(CPU_FPS_PATH=path):
        return pointops.furthest_point_sample(xyz, k, lengths, start)


def assert_paths_agree(monkeypatch, xyz, k, lengths=None, start=0):
    brute = run_path(monkeypatch, "brute", xyz, k, lengths, start)
    kdtree = run_path(monkeypatch, "kdtree", xyz, k, lengths, start)
    auto = run_path(monkeypatch, "auto", xyz, k, lengths, start)
    assert torch.equal(brute, kdtree)
    assert torch.equal(brute, auto)
    return brute


def generator(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_random_cloud(monkeypatch, dtype):
    xyz = torch.rand(2, 6000, 3, generator=generator(1), dtype=dtype)
    out = assert_paths_agree(monkeypatch, xyz, 700, start=17)
    assert out.min() >= 0 and len(set(out[0].tolist())) == 700


def test_clustered_cloud(monkeypatch):
    g = generator(2)
    centers = torch.rand(6, 3, generator=g) * 100
    pts = centers[torch.randint(0, 6, (5000,), generator=g)] + 1e-3 * torch.randn(5000, 3, generator=g)
    outliers = torch.rand(20, 3, generator=g) * 1000 - 500
    xyz = torch.cat([pts, outliers])[torch.randperm(5020, generator=g)].unsqueeze(0)
    assert_paths_agree(monkeypatch, xyz, 1500)


@pytest.mark.parametrize("shuffle", [False, True])
def test_lattice_ties_go_to_lowest_index(monkeypatch, shuffle):
    axis = torch.arange(16, dtype=torch.float32)
    grid = torch.cartesian_prod(axis, axis, axis)  # 4096 points, distances full of exact ties
    if shuffle:
        grid = grid[torch.randperm(len(grid), generator=generator(3))]
    xyz = grid.unsqueeze(0)
    out = assert_paths_agree(monkeypatch, xyz, 4096)  # every point: late picks are all ties at 1
    assert sorted(out[0].tolist()) == list(range(4096))


def test_lattice_matches_reference(monkeypatch):
    axis = torch.arange(-5, 6, dtype=torch.float64)
    xyz = torch.cartesian_prod(axis, axis, axis)[:1200].unsqueeze(0)
    out = run_path(monkeypatch, "kdtree", xyz, 300, None, 5)
    assert torch.equal(out, ref.fps(xyz, 300, None, 5))


def test_duplicate_points(monkeypatch):
    base = torch.rand(500, 3, generator=generator(4))
    xyz = base.repeat(6, 1)[torch.randperm(3000, generator=generator(5))].unsqueeze(0)
    # More picks than distinct points: the tail is all ties at distance 0 (repeats allowed).
    out = assert_paths_agree(monkeypatch, xyz, 900)
    assert len({tuple(xyz[0, i].tolist()) for i in out[0].tolist()}) == 500


@pytest.mark.parametrize("scale", [1e5, 1e-4])
def test_coordinate_scales_in_float32(monkeypatch, scale):
    g = generator(6)
    xyz = (scale + torch.rand(1, 5000, 3, generator=g, dtype=torch.float64) * scale * 1e-3).float()
    assert_paths_agree(monkeypatch, xyz, 1000)


def test_distances_near_float32_overflow(monkeypatch):
    # Coordinates up to the accepted limit (2^62): squared distances reach 1.5 * 2^127, close to
    # FLT_MAX; the bound must still never skip wrongly. Larger coordinates are rejected
    # (test_value_checks.py).
    limit = pointops.coordinate_limit(torch.float32)
    xyz = (torch.rand(1, 3000, 3, generator=generator(7)) * 2 - 1) * limit
    xyz[0, :2] = torch.tensor([[limit] * 3, [-limit] * 3])  # the farthest pair the limit admits
    out = assert_paths_agree(monkeypatch, xyz, 300)
    assert out[0, 1] == 1  # from the corner at +limit the farthest point is the one at -limit


@pytest.mark.parametrize("path", ["brute", "kdtree"])
def test_non_finite_coordinates_rejected(monkeypatch, path):
    xyz = torch.rand(1, 3000, 3, generator=generator(8))
    xyz[0, 123, 1] = float("nan")
    with pytest.raises(ValueError, match="must be finite"):
        run_path(monkeypatch, path, xyz, 200)


def test_ragged_lengths_and_starts(monkeypatch):
    xyz = torch.rand(5, 3000, 3, generator=generator(9), dtype=torch.float64)
    lengths = torch.tensor([3000, 0, 1, 1777, 64])
    for start in (0, 63, 2999, 5000):
        out = assert_paths_agree(monkeypatch, xyz, 400, lengths, start)
        assert (out[1] == -1).all() and out[2, 0] == 0 and (out[2, 1:] == -1).all()
        assert (out[4, 64:] == -1).all()


def test_invalid_path_value_is_a_clear_error(monkeypatch):
    with pytest.raises(ValueError, match="knob CPU_FPS_PATH takes one of"):
        run_path(monkeypatch, "fast", torch.rand(1, 10, 3), 3)


def test_unknown_knob_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no tuning knob named 'NO_SUCH_KNOB'"):
        pointops._tuning.set_knob("NO_SUCH_KNOB", 1)


def test_knob_from_the_environment_is_read_once(tmp_path):
    import subprocess
    import sys

    code = (
        "import torch, pointops; xyz = torch.rand(1, 600, 3, dtype=torch.float64); "
        "print(pointops._tuning.set_knob('CPU_FPS_PATH', None))"
    )
    env = {**__import__("os").environ, "POINTOPS_CPU_FPS_PATH": "brute"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "0"  # the environment's "brute", replaced by the call


@st.composite
def clouds(draw):
    B = draw(st.integers(1, 2))
    N = draw(st.integers(0, 700))
    kind = draw(st.sampled_from(["grid", "uniform", "clusters"]))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    g = generator(draw(st.integers(0, 2**16)))
    if kind == "grid":
        xyz = torch.randint(-3, 4, (B, N, 3), generator=g).to(dtype)
    elif kind == "uniform":
        scale = draw(st.sampled_from([1e-3, 1.0, 1e5]))
        xyz = (torch.rand(B, N, 3, generator=g, dtype=torch.float64) * scale).to(dtype)
    else:
        centers = torch.rand(3, 3, generator=g, dtype=torch.float64) * 10
        pick = torch.randint(0, 3, (B, N), generator=g)
        xyz = (centers[pick] + 1e-2 * torch.rand(B, N, 3, generator=g, dtype=torch.float64)).to(dtype)
    lengths = torch.tensor(draw(st.lists(st.integers(0, N), min_size=B, max_size=B)))
    return xyz, (lengths if draw(st.booleans()) else None)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(clouds(), st.integers(1, 720), st.integers(0, 800))
def test_paths_agree_property(monkeypatch, data, k, start):
    xyz, lengths = data
    assert_paths_agree(monkeypatch, xyz, k, lengths, start)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_wide_integer_lattice(monkeypatch, dtype):
    # Integer coordinates: box bounds equal point distances exactly and large distances tie,
    # so a bound even slightly too optimistic skips a box whose points would change. Picking
    # every point makes the order of the late picks depend on every min-distance.
    xyz = torch.randint(-400, 401, (1, 8000, 3), generator=generator(10)).to(dtype)
    assert_paths_agree(monkeypatch, xyz, 8000)

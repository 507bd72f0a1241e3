"""Hostile input for pointops.compat.torch_cluster (fps, knn, knn_graph, radius, radius_graph,
nearest, grid_cluster), eager and under torch.jit.script: empty inputs; zero, negative and huge
k, r, ratio, max_num_neighbors and batch_size; every dtype of the points and of the batch
vectors; nan/inf in every argument; D = 1, 2, 3, 5; unsorted and inconsistent batch vectors;
zero vectors under the cosine metric; 1 and 2 threads. Results are compared with brute-force
references in float64 on integer lattice points (exact in every float dtype, many ties)."""

from __future__ import annotations

import math

import pointops
import pytest
import torch
from bad_values import raises_bad_value
from hostile_params import DEVICES, HAS_CUDA
from pointops.compat import torch_cluster as tc

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
NOT_FLOATS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool]
DIMS = [1, 2, 3, 5]
INT64_MIN = -(2**63)
NAN, INF = float("nan"), float("inf")


@pytest.fixture(params=[1, 2], autouse=True)
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


_SCRIPTED = {}


def api(name: str, mode: str):
    """tc.<name>, or its TorchScript compilation (mode "script")."""
    fn = getattr(tc, name)
    if mode == "eager":
        return fn
    if name not in _SCRIPTED:
        _SCRIPTED[name] = torch.jit.script(fn)
    return _SCRIPTED[name]


@pytest.fixture(params=["eager", "script"])
def mode(request):
    return request.param


def raises(mode: str, error: type, match: str):
    """Eager: that error type. Under TorchScript every error arrives as RuntimeError (the
    interpreter's), with the message inside."""
    return pytest.raises(error if mode == "eager" else Exception, match=match)


# ---------------------------------------------------------------------------------------------
# data and brute-force references (float64, on the CPU)


def lattice(n: int, dim: int, seed: int, device="cpu", dtype=torch.float32) -> torch.Tensor:
    """n distinct points of a small integer grid: exact in every float dtype, with many equal
    distances, and squared distances exact even in bfloat16 where D > 3 is searched in it."""
    side = {1: 32, 2: 8, 3: 5}.get(dim, 4)
    g = torch.Generator().manual_seed(seed)
    cells = torch.randperm(side**dim, generator=g)[:n]
    coords = torch.stack([(cells // side**d) % side for d in range(dim)], 1)
    return coords.to(device, dtype)


def two_clouds(n0: int, n1: int, dim: int, seed: int, device, dtype, batch_dtype=torch.int64):
    pts = lattice(n0 + n1, dim, seed, device, dtype)
    batch = torch.tensor([0] * n0 + [1] * n1, dtype=batch_dtype, device=device)
    return pts, batch


def sq_dist(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a.double() - b.double()) ** 2).sum())


def cos_dist(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    if float(a.norm()) == 0 or float(b.norm()) == 0:
        return 1.0  # the documented convention: a zero vector has similarity 0 with everything
    return 1 - float(a @ b) / (float(a.norm()) * float(b.norm()))


def ref_knn(x, y, k, bx=None, by=None, cosine=False):
    x, y = x.cpu(), y.cpu()
    bx = [0] * len(x) if bx is None else bx.tolist()
    by = [0] * len(y) if by is None else by.tolist()
    edges = []
    for i in range(len(y)):
        cand = [j for j in range(len(x)) if bx[j] == by[i]]
        d = {j: (cos_dist if cosine else sq_dist)(x[j], y[i]) for j in cand}
        edges += [(i, j) for j in sorted(cand, key=lambda j: (d[j], j))[:k]]
    return edges


def ref_radius(x, y, r, bx=None, by=None, cap=32, ignore_same_index=False):
    x, y = x.cpu(), y.cpu()
    bx = [0] * len(x) if bx is None else bx.tolist()
    by = [0] * len(y) if by is None else by.tolist()
    edges = []
    for i in range(len(y)):
        hits = [
            j
            for j in range(len(x))
            if bx[j] == by[i]
            and not (ignore_same_index and i == j)
            and (math.isinf(r) or sq_dist(x[j], y[i]) < r * r)
        ]
        edges += [(i, j) for j in hits[:cap]]
    return edges


def ref_fps(src, ptr, counts):
    """Greedy FPS of each cloud from its first row, ties to the lower row."""
    src = src.cpu().double()
    out = []
    for b in range(len(ptr) - 1):
        pts = src[ptr[b] : ptr[b + 1]]
        if counts[b] == 0:
            continue
        picks = [0]
        best = ((pts - pts[0]) ** 2).sum(1)
        while len(picks) < counts[b]:
            picks.append(int(best.argmax()))
            best = torch.minimum(best, ((pts - pts[picks[-1]]) ** 2).sum(1))
        out += [p + ptr[b] for p in picks]
    return out


def ref_nearest(x, y, bx=None, by=None):
    x, y = x.cpu(), y.cpu()
    bx = [0] * len(x) if bx is None else bx.tolist()
    by = [0] * len(y) if by is None else by.tolist()
    out = []
    for i in range(len(x)):
        cand = [j for j in range(len(y)) if by[j] == bx[i]]
        out.append(min(cand, key=lambda j: (sq_dist(x[i], y[j]), j)))
    return out


def ref_grid(pos, size, start=None, end=None):
    """torch_cluster's formula in float64 (exact for the lattice data used here)."""
    pos = pos.cpu().double().reshape(pos.shape[0], -1)
    size = size.cpu().double().reshape(-1)
    start = pos.min(0)[0] if start is None else start.cpu().double().reshape(-1)
    end = pos.max(0)[0] if end is None else end.cpu().double().reshape(-1)
    cells = ((end - start) / size).long() + 1
    stride = torch.cat([torch.ones(1, dtype=torch.long), torch.cumprod(cells, 0)[:-1]])
    return (((pos - start) / size).long() * stride).sum(1).tolist()


def edges(t: torch.Tensor):
    assert t.dtype == torch.int64 and t.dim() == 2 and t.shape[0] == 2
    return [tuple(e) for e in t.t().tolist()]


# ---------------------------------------------------------------------------------------------
# results against the references: every float dtype, D = 1, 2, 3, 5, int32 / int64 batches


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", DIMS)
def test_knn_and_knn_graph_match_the_reference(device, dtype, dim, mode):
    x, bx = two_clouds(9, 14, dim, seed=dim, device=device, dtype=dtype, batch_dtype=torch.int32)
    y, by = two_clouds(4, 5, dim, seed=dim + 10, device=device, dtype=dtype)
    knn = api("knn", mode)
    for k in (1, 4, 30):
        assert edges(knn(x, y, k, bx, by)) == ref_knn(x, y, k, bx, by)
    assert edges(knn(x, y, 3)) == ref_knn(x, y, 3)  # one cloud
    loops = edges(api("knn_graph", mode)(x, 3, bx, loop=True))
    assert loops == [(j, i) for i, j in ref_knn(x, x, 3, bx, bx)]
    graph = edges(api("knn_graph", mode)(x, 3, bx, flow="target_to_source"))
    assert graph == [(i, j) for i, j in ref_knn(x, x, 4, bx, bx) if i != j]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", DIMS)
def test_radius_and_radius_graph_match_the_reference(device, dtype, dim, mode):
    x, bx = two_clouds(9, 14, dim, seed=dim, device=device, dtype=dtype)
    y, by = two_clouds(4, 5, dim, seed=dim + 10, device=device, dtype=dtype, batch_dtype=torch.int32)
    radius = api("radius", mode)
    for r in (0.0, 1.0, 1.5, 2.5, INF):  # lattice distances are often exactly r: strict d < r
        for cap in (1, 3, 100):
            assert edges(radius(x, y, r, bx, by, cap)) == ref_radius(x, y, r, bx, by, cap), (r, cap)
    graph = edges(api("radius_graph", mode)(x, 2.0, bx, max_num_neighbors=4))
    assert graph == [(j, i) for i, j in ref_radius(x, x, 2.0, bx, bx, 4, ignore_same_index=True)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", DIMS)
def test_fps_matches_the_reference(device, dtype, dim, mode):
    src, batch = two_clouds(8, 12, dim, seed=dim, device=device, dtype=dtype, batch_dtype=torch.int32)
    fps = api("fps", mode)
    for ratio, counts in ((0.25, [2, 3]), (0.5, [4, 6]), (1.0, [8, 12])):
        expect = ref_fps(src, [0, 8, 20], counts)
        assert fps(src, batch, ratio, False).tolist() == expect
        assert fps(src, None, ratio, False, None, [0, 8, 20]).tolist() == expect
        assert fps(src, None, ratio, False, None, torch.tensor([0, 8, 20], device=device)).tolist() == expect
    per_cloud = torch.tensor([0.25, 0.5], device=device)
    assert fps(src, batch, per_cloud, False).tolist() == ref_fps(src, [0, 8, 20], [2, 6])
    assert fps(src, None, 0.5, False).tolist() == ref_fps(src, [0, 20], [10])
    picks = fps(src, batch, 0.5, True)  # a random start: each cloud's picks stay in it, distinct
    assert sorted(set(picks[:4].tolist())) == sorted(picks[:4].tolist()) and bool((picks[:4] < 8).all())
    assert picks[4:].unique().numel() == 6 and bool((picks[4:] >= 8).all())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", DIMS)
def test_nearest_matches_the_reference(device, dtype, dim, mode):
    x, bx = two_clouds(9, 14, dim, seed=dim, device=device, dtype=dtype, batch_dtype=torch.int32)
    y, by = two_clouds(4, 5, dim, seed=dim + 10, device=device, dtype=dtype)
    nearest = api("nearest", mode)
    assert nearest(x, y, bx, by).tolist() == ref_nearest(x, y, bx, by)
    assert nearest(x, y).tolist() == ref_nearest(x, y)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", DIMS)
def test_int32_and_int64_batch_vectors_agree(device, dim):
    x, b64 = two_clouds(6, 7, dim, seed=3, device=device, dtype=torch.float32)
    b32 = b64.int()
    assert torch.equal(tc.knn(x, x, 3, b32, b32), tc.knn(x, x, 3, b64, b64))
    assert torch.equal(tc.radius(x, x, 2.0, b32, b64), tc.radius(x, x, 2.0, b64, b64))
    assert torch.equal(tc.fps(x, b32, 0.5, False), tc.fps(x, b64, 0.5, False))
    assert torch.equal(tc.nearest(x, x, b32, b64), tc.nearest(x, x, b64, b64))


# ---------------------------------------------------------------------------------------------
# cosine kNN with zero vectors (issue 42, item 3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", DIMS)
def test_cosine_knn_with_zero_vectors_is_unique_and_complete(device, dtype, dim, mode):
    g = torch.Generator().manual_seed(dim)
    x = torch.randn(30, dim, generator=g, dtype=torch.float64)
    x[[0, 7, 21]] = 0.0
    y = torch.cat([torch.zeros(2, dim, dtype=torch.float64), torch.randn(4, dim, generator=g).double()])
    x, y = x.to(device, dtype), y.to(device, dtype)
    knn = api("knn", mode)
    for k in (1, 5, 30):
        got = edges(knn(x, y, k, cosine=True))
        assert len(set(got)) == len(got) == 6 * k  # unique, and every query has k neighbours
        # a zero query is at distance 1 from every row: its neighbours are the first k rows
        assert [j for i, j in got if i == 0] == list(range(k))
        assert got == ref_knn(x, y, k, cosine=True)
    # (a zero row is no nearer to itself than to any row: it keeps k + 1 neighbours when its own
    # row is not among the first k + 1, as torch_cluster's knn_graph only drops self loops)
    graph = edges(api("knn_graph", mode)(x, 4, cosine=True))
    assert len(set(graph)) == len(graph) and all(i != j for i, j in graph)
    assert all(4 <= sum(1 for _, t in graph if t == i) <= 5 for i in range(30))


# ---------------------------------------------------------------------------------------------
# nan / inf / huge coordinates: one rule for every D (issue 42, item 4)


def calls_with_points(x, y):
    """Each function with x (and y) as its points: (name, call)."""
    return [
        ("knn", lambda m: api("knn", m)(x, y, 2)),
        ("knn_cosine", lambda m: api("knn", m)(x, y, 2, cosine=True)),
        ("knn_graph", lambda m: api("knn_graph", m)(x, 2)),
        ("radius", lambda m: api("radius", m)(x, y, 1.0)),
        ("radius_graph", lambda m: api("radius_graph", m)(x, 1.0)),
        ("fps", lambda m: api("fps", m)(x, None, 0.5, False)),
        ("nearest", lambda m: api("nearest", m)(x, y)),
    ]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("bad", [NAN, INF, -INF])
def test_non_finite_points_raise_for_every_dimension(device, dtype, dim, bad, mode):
    good = lattice(10, dim, seed=dim, device=device, dtype=dtype)
    broken = good.clone()
    broken[3, dim - 1] = bad
    for name, call in calls_with_points(broken, good):
        arg = "src" if name == "fps" else "x"
        with raises(mode, ValueError, match=f"pointops: {arg} contains nan or inf"):
            call(mode)
    for name, call in calls_with_points(good, broken):
        if name in ("knn", "knn_cosine", "radius", "nearest"):
            with raises(mode, ValueError, match="pointops: y contains nan or inf"):
                call(mode)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", DIMS)
def test_coordinates_beyond_the_limit_raise_for_every_dimension(device, dtype, dim):
    good = lattice(10, dim, seed=dim, device=device, dtype=dtype)
    broken = good.clone()
    broken[5, 0] = 1e19 if dtype == torch.float32 else 1e160  # pointops.coordinate_limit
    for name, call in calls_with_points(broken, good):
        arg = "src" if name == "fps" else "x"
        with pytest.raises(ValueError, match=f"pointops: {arg} holds a coordinate of magnitude"):
            call("eager")


# ---------------------------------------------------------------------------------------------
# dtypes of the points and of the other tensors


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", NOT_FLOATS)
def test_points_that_are_not_floats_raise_type_error(device, dtype, mode):
    pts = lattice(10, 3, seed=1, device=device).to(dtype)
    for name, call in calls_with_points(pts, pts):
        arg = "src" if name == "fps" else "x"
        with raises(mode, TypeError, match=f"pointops: {arg} must be a floating-point tensor"):
            call(mode)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16, torch.bool]
)
def test_batch_vectors_other_than_int32_int64_raise(device, dtype, mode):
    x, batch = two_clouds(5, 5, 3, seed=2, device=device, dtype=torch.float32)
    bad = batch.to(dtype)
    calls = [
        ("batch_x", lambda: api("knn", mode)(x, x, 2, bad, batch)),
        ("batch_y", lambda: api("knn", mode)(x, x, 2, batch, bad)),
        ("batch", lambda: api("knn_graph", mode)(x, 2, bad)),
        ("batch_x", lambda: api("radius", mode)(x, x, 1.0, bad, batch)),
        ("batch", lambda: api("radius_graph", mode)(x, 1.0, bad)),
        ("batch", lambda: api("fps", mode)(x, bad, 0.5, False)),
        ("batch_y", lambda: api("nearest", mode)(x, x, batch, bad)),
    ]
    for name, call in calls:
        with raises(mode, ValueError, match=f"pointops: {name} must be a 1-D int32 or int64 tensor"):
            call()


@pytest.mark.parametrize("device", DEVICES)
def test_fps_ptr_and_ratio_dtypes(device, mode):
    src = lattice(10, 3, seed=4, device=device)
    fps = api("fps", mode)
    with raises(mode, TypeError, match="pointops: ptr must be an int32 or int64 row pointer"):
        fps(src, None, 0.5, False, None, torch.tensor([0.0, 10.0], device=device))
    assert fps(
        src, None, 0.5, False, None, torch.tensor([0, 4, 10], dtype=torch.int32, device=device)
    ).tolist() == (ref_fps(src, [0, 4, 10], [2, 3]))
    with raises(mode, TypeError, match="pointops: ratio must hold real numbers"):
        fps(src, None, torch.tensor(True, device=device), False)
    for ratio in (torch.tensor(0.5, dtype=torch.float64), torch.tensor(1, dtype=torch.int32)):
        assert fps(src, None, ratio.to(device), False).numel() == (5 if ratio.is_floating_point() else 10)
    if mode == "eager":
        assert fps(src, None, 1, False).numel() == 10  # an int ratio (Python)
        with pytest.raises(TypeError, match="pointops: ratio must be a real number"):
            fps(src, None, "half", False)


def test_python_argument_types_raise_type_error():
    x = lattice(10, 3, seed=5)
    with pytest.raises(TypeError, match="pointops: k must be an int, got float"):
        tc.knn(x, x, 2.5)
    with pytest.raises(TypeError, match="pointops: k must be an int, got bool"):
        tc.knn_graph(x, True)
    with pytest.raises(TypeError, match="pointops: max_num_neighbors must be an int"):
        tc.radius(x, x, 1.0, max_num_neighbors=3.0)
    with pytest.raises(TypeError, match="pointops: r must be a real number, got str"):
        tc.radius(x, x, "1")
    with pytest.raises(TypeError, match="pointops: batch_size must be an int"):
        tc.knn(x, x, 2, batch_size=1.0)
    with pytest.raises(TypeError, match="pointops: x must be a torch.Tensor, got list"):
        tc.knn([[0.0]], x, 1)
    with pytest.raises(TypeError, match="pointops: batch must be a torch.Tensor"):
        tc.fps(x, [0] * 10)
    with pytest.raises(TypeError, match="pointops: pos must be a torch.Tensor"):
        tc.grid_cluster(x.tolist(), torch.ones(3))


# ---------------------------------------------------------------------------------------------
# batch vectors: unsorted, negative, inconsistent, batch_size (issue 42, items 5 and 6)


def batch_calls(mode, x, bx, by, batch_size=None):
    return [
        ("knn", lambda: api("knn", mode)(x, x, 2, bx, by, False, 1, batch_size)),
        ("knn_graph", lambda: api("knn_graph", mode)(x, 2, bx, batch_size=batch_size)),
        ("radius", lambda: api("radius", mode)(x, x, 1.5, bx, by, 32, 1, batch_size)),
        ("radius_graph", lambda: api("radius_graph", mode)(x, 1.5, bx, batch_size=batch_size)),
        ("fps", lambda: api("fps", mode)(x, bx, 0.5, False, batch_size)),
    ]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize(
    "ids",
    [[0, 0, 1, 1, 0, 0, 1, 1, 0, 1], [1, 1, 1, 1, 1, 0, 0, 0, 0, 0], [-1, -1, 0, 0, 0, 0, 0, 1, 1, 1]],
)
def test_unsorted_or_negative_batch_vectors_raise(device, batch_dtype, ids, mode):
    x = lattice(10, 3, seed=6, device=device)
    bad = torch.tensor(ids, dtype=batch_dtype, device=device)
    good = torch.tensor(sorted(max(i, 0) for i in ids), dtype=batch_dtype, device=device)
    for name, call in batch_calls(mode, x, bad, good):
        arg = "batch" if name in ("knn_graph", "radius_graph", "fps") else "batch_x"
        with raises(
            mode, ValueError, match=f"pointops: {arg} must hold cloud ids >= 0 in nondecreasing order"
        ):
            call()
    with raises(mode, ValueError, match="pointops: batch_y must hold cloud ids >= 0 in nondecreasing order"):
        api("knn", mode)(x, x, 2, good, bad)
    with raises(mode, ValueError, match="pointops: batch_x must hold cloud ids >= 0 in nondecreasing order"):
        api("nearest", mode)(x, x, bad, good)


# on CUDA a batch_size <= the rows converts without reading the vector (as torch_cluster does):
# the op that reads the row pointer reports a broken vector
BELOW_BATCH_SIZE = {
    "cpu": "pointops: batch_size is 1 but batch(_x)? holds cloud id 1",
    "cuda": r"pointops: batch(_x)? must hold cloud ids >= 0 in nondecreasing order, below batch_size",
}


@pytest.mark.parametrize("device", DEVICES)
def test_batch_size_below_the_ids_raises(device, mode):
    x, batch = two_clouds(5, 5, 3, seed=7, device=device, dtype=torch.float32)
    for _name, call in batch_calls(mode, x, batch, batch, batch_size=1):
        with raises(mode, ValueError, match=BELOW_BATCH_SIZE[device]):
            call()
    unsorted = batch.flip(0)
    for _name, call in batch_calls(mode, x, unsorted, batch, batch_size=2):
        with raises(
            mode, ValueError, match="pointops: batch(_x)? must hold cloud ids >= 0 in nondecreasing order"
        ):
            call()
    for bad in (0, -3):
        for _name, call in batch_calls(mode, x, batch, batch, batch_size=bad):
            with raises(
                mode, ValueError, match=f"pointops: batch_size must be >= 1 \\(or None\\), got {bad}"
            ):
                call()


@pytest.mark.parametrize("device", DEVICES)
def test_batch_size_above_the_ids_adds_empty_clouds(device, mode):
    x, batch = two_clouds(5, 6, 3, seed=8, device=device, dtype=torch.float32)
    for size in (3, 10**12):  # a huge batch_size allocates nothing per cloud
        assert edges(api("knn", mode)(x, x, 3, batch, batch, False, 1, size)) == ref_knn(
            x, x, 3, batch, batch
        )
        got = edges(api("radius", mode)(x, x, 1.5, batch, batch, 32, 1, size))
        assert got == ref_radius(x, x, 1.5, batch, batch)
        assert api("fps", mode)(x, batch, 1.0, False, size).tolist() == ref_fps(x, [0, 5, 11], [5, 6])
    per_example = torch.tensor([0.5, 1.0, 0.5], device=device)
    assert api("fps", mode)(x, batch, per_example, False, 3).tolist() == ref_fps(x, [0, 5, 11], [3, 6])


@pytest.mark.parametrize("device", DEVICES)
def test_strided_points_and_batch_vectors(device, mode):
    wide, batch2 = two_clouds(5, 6, 6, seed=17, device=device, dtype=torch.float32)
    x = wide[:, ::2]
    batch = torch.stack([batch2, batch2], 1)[:, 0]
    assert not x.is_contiguous() and not batch.is_contiguous()
    dense, dense_batch = x.contiguous(), batch.contiguous()
    assert edges(api("knn", mode)(x, x, 3, batch, batch)) == ref_knn(
        dense, dense, 3, dense_batch, dense_batch
    )
    assert torch.equal(api("fps", mode)(x, batch, 0.5, False), tc.fps(dense, dense_batch, 0.5, False))
    assert torch.equal(api("grid_cluster", mode)(x, torch.ones(3)), tc.grid_cluster(dense, torch.ones(3)))


@pytest.mark.parametrize("device", DEVICES)
def test_batch_vectors_of_the_wrong_length_or_missing(device, mode):
    x, batch = two_clouds(5, 5, 3, seed=9, device=device, dtype=torch.float32)
    with raises(mode, ValueError, match=r"pointops: batch_x must have one entry per row \(10\), got 4"):
        api("knn", mode)(x, x, 2, batch[:4], batch)
    with raises(mode, ValueError, match=r"pointops: batch must have one entry per row \(10\), got 11"):
        api("fps", mode)(x, torch.cat([batch, batch[-1:]]), 0.5)
    with raises(mode, ValueError, match="batch_x and batch_y are both needed for more than one cloud"):
        api("knn", mode)(x, x, 2, batch, None)
    with raises(mode, ValueError, match="batch_x and batch_y are both needed for more than one cloud"):
        api("radius", mode)(x, x, 1.0, None, None, 32, 1, 2)
    with raises(mode, ValueError, match="do not occur in 'batch_y'"):
        api("nearest", mode)(x, x, batch, torch.zeros_like(batch))
    # one cloud in the given vector: the missing one is that cloud too
    zeros = torch.zeros_like(batch)
    assert edges(api("knn", mode)(x, x, 2, zeros, None)) == ref_knn(x, x, 2)


@pytest.mark.parametrize("device", DEVICES)
def test_fps_bad_row_pointers(device, mode):
    src = lattice(10, 3, seed=10, device=device)
    fps = api("fps", mode)
    for ptr in ([1, 10], [0, 6, 4, 10], [0, 9], [0, 11]):
        with raises(mode, ValueError, match="pointops: ptr must start at 0, never decrease and end at 10"):
            fps(src, None, 0.5, False, None, torch.tensor(ptr, device=device))
    with raises(mode, ValueError, match="pointops: ratio must be a scalar or have one entry per cloud"):
        fps(src, None, torch.tensor([0.5, 0.5, 0.5], device=device), False, None, [0, 5, 10])


# ---------------------------------------------------------------------------------------------
# k, r, max_num_neighbors, ratio: zero, negative, huge, nan, inf (issue 42, item 10)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", DIMS)
def test_k_zero_negative_and_huge(device, dim, mode):
    x = lattice(12, dim, seed=dim, device=device)
    for k in (0, -1):
        with raises(mode, ValueError, match=f"pointops: k must be > 0, got {k}"):
            api("knn", mode)(x, x, k)
        with raises(mode, ValueError, match=f"pointops: k must be > 0, got {k}"):
            api("knn_graph", mode)(x, k)
    huge = [12, 10**12] + ([2**70] if mode == "eager" else [2**62])
    for k in huge:  # more than the points: all of them, nothing allocated per k
        assert edges(api("knn", mode)(x, x[:3], k)) == ref_knn(x, x[:3], 12)
        assert len(edges(api("knn_graph", mode)(x, k))) == 12 * 11


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", DIMS)
def test_r_nan_negative_and_inf(device, dim, mode):
    x, batch = two_clouds(6, 8, dim, seed=dim, device=device, dtype=torch.float32)
    radius = api("radius", mode)
    for r in (NAN, -1.0, -INF):
        with raises(mode, ValueError, match="pointops: r must be >= 0"):
            radius(x, x, r)
        with raises(mode, ValueError, match="pointops: r must be >= 0"):
            api("radius_graph", mode)(x, r)
    # inf: every point of the example (the same rule for every D), capped by max_num_neighbors
    for cap in (1, 5, 100):
        assert edges(radius(x, x, INF, batch, batch, cap)) == ref_radius(x, x, INF, batch, batch, cap)
    assert len(edges(api("radius_graph", mode)(x, INF, batch, max_num_neighbors=100))) == 6 * 5 + 8 * 7
    assert edges(radius(x, x, 0.0)) == []


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", DIMS)
def test_max_num_neighbors_zero_negative_and_huge(device, dim, mode):
    x = lattice(10, dim, seed=dim, device=device)
    for cap in (0, -2):
        with raises(mode, ValueError, match=f"pointops: max_num_neighbors must be > 0, got {cap}"):
            api("radius", mode)(x, x, 1.0, None, None, cap)
        with raises(mode, ValueError, match=f"pointops: max_num_neighbors must be > 0, got {cap}"):
            api("radius_graph", mode)(x, 1.0, max_num_neighbors=cap)
    for cap in (10**12, 2**62):
        assert edges(api("radius", mode)(x, x, 2.5, None, None, cap)) == ref_radius(x, x, 2.5, cap=10)


@pytest.mark.parametrize("device", DEVICES)
def test_ratio_out_of_range(device, mode):
    src, batch = two_clouds(4, 6, 3, seed=11, device=device, dtype=torch.float32)
    fps = api("fps", mode)
    for ratio in (0.0, -0.5, 1.5, NAN, INF):
        with raises(mode, ValueError, match=r"pointops: ratio must lie in \(0, 1\]"):
            fps(src, batch, ratio)
        with raises(mode, ValueError, match=r"pointops: ratio must lie in \(0, 1\]"):
            fps(src, batch, torch.tensor([0.5, ratio], device=device))
    with raises(mode, ValueError, match="pointops: ratio must be a scalar or have one entry per cloud"):
        fps(src, batch, torch.tensor([0.5, 0.5, 0.5], device=device))
    tiny = fps(src, batch, 1e-30, False)  # at least one point of each cloud
    assert tiny.tolist() == [0, 4]


# ---------------------------------------------------------------------------------------------
# empty inputs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", DIMS)
def test_empty_inputs(device, dim, mode):
    x = lattice(6, dim, seed=12, device=device)
    none = x[:0]
    empty_batch = torch.zeros(0, dtype=torch.int64, device=device)
    batch = torch.zeros(6, dtype=torch.int64, device=device)
    for got in (
        api("knn", mode)(none, x, 3),
        api("knn", mode)(x, none, 3),
        api("knn", mode)(none, none, 3, empty_batch, empty_batch),
        api("knn_graph", mode)(none, 3),
        api("radius", mode)(none, x, 1.0),
        api("radius", mode)(x, none, 1.0, batch, empty_batch),
        api("radius_graph", mode)(none, 1.0, empty_batch),
    ):
        assert got.shape == (2, 0) and got.dtype == torch.int64 and got.device == x.device
    for got in (api("fps", mode)(none), api("fps", mode)(none, empty_batch), api("nearest", mode)(none, x)):
        assert got.shape == (0,) and got.dtype == torch.int64
    with raises(mode, ValueError, match="pointops: y is empty"):
        api("nearest", mode)(x, none)
    # empty clouds among others
    bx = torch.tensor([0, 0, 2, 2, 2, 2], device=device)
    assert edges(api("knn", mode)(x, x, 2, bx, bx)) == ref_knn(x, x, 2, bx, bx)
    assert api("fps", mode)(x, bx, 0.5, False).tolist() == ref_fps(x, [0, 2, 2, 6], [1, 0, 2])


# ---------------------------------------------------------------------------------------------
# grid_cluster (issue 42, item 2): the same rules for every dtype and both devices


def grid_raises(device, match, size_on_device=True):
    """A bad grid value: ValueError at once on CPU (and for CPU-made values on CUDA); on CUDA
    for values on the GPU, recorded by the kernels and raised by pointops.check_errors()."""
    if device == "cpu" or not size_on_device:
        return pytest.raises(ValueError, match=match)
    return raises_bad_value(device, match, match)


GRID_DTYPES = FLOATS + [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRID_DTYPES)
@pytest.mark.parametrize("dim", DIMS)
def test_grid_cluster_every_dtype_matches_the_reference(device, dtype, dim, mode):
    pos = lattice(40, dim, seed=dim, device=device).to(dtype)
    grid = api("grid_cluster", mode)
    for size_dtype in (torch.float32, torch.float64, torch.int64):
        size = torch.arange(1, dim + 1, dtype=size_dtype)
        assert grid(pos, size).tolist() == ref_grid(pos, size)
        start, end = torch.full((dim,), -2, dtype=size_dtype), torch.full((dim,), 9, dtype=size_dtype)
        assert grid(pos, size, start, end).tolist() == ref_grid(pos, size, start, end)
        assert grid(pos, size.to(device), None, end.to(device)).tolist() == ref_grid(pos, size, None, end)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRID_DTYPES)
def test_grid_cluster_bad_sizes_raise_for_every_dtype(device, dtype):
    pos = lattice(20, 3, seed=13, device=device).to(dtype)
    sizes = [[1.0, -1.0, 1.0], [0.0, 1.0, 1.0]]
    if dtype.is_floating_point:
        sizes += [[1.0, 1.0, NAN], [INF, 1.0, 1.0]]
    for size in sizes:
        with pytest.raises(ValueError, match=r"size\[\d\] = .*cell sizes must be finite and > 0"):
            tc.grid_cluster(pos, torch.tensor(size))  # a CPU size: checked at once on every device
        with grid_raises(device, "size (holds|held) a value that is not finite and > 0|cell sizes must be"):
            tc.grid_cluster(pos, torch.tensor(size, device=device)).tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("bad", [NAN, INF, -INF])
def test_grid_cluster_non_finite_values_raise(device, dtype, dim, bad):
    pos = lattice(20, dim, seed=dim, device=device).to(dtype)
    size = torch.ones(dim, device=device)
    broken = pos.clone()
    broken[4, dim - 1] = bad
    box = torch.full((dim,), -1.0, device=device), torch.full((dim,), 9.0, device=device)
    for start, end in ((None, None), box):
        with grid_raises(device, "pos (holds|held) nan or inf"):
            tc.grid_cluster(broken, size, start, end).tolist()
    bounds = box[0].clone()
    bounds[dim - 1] = bad
    with grid_raises(device, "start (holds|held) nan or inf|start\\[\\d\\] = .*grid bounds must be finite"):
        tc.grid_cluster(pos, size, bounds, box[1]).tolist()
    with grid_raises(device, "end (holds|held) nan or inf|end\\[\\d\\] = .*grid bounds must be finite"):
        tc.grid_cluster(pos, size, box[0], bounds).tolist()
    with pytest.raises(ValueError, match=r"start\[\d\] = .*; grid bounds must be finite"):
        tc.grid_cluster(pos, size, bounds.cpu(), box[1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64, torch.int64])
def test_grid_cluster_ids_beyond_int64_and_end_below_start_raise(device, dtype):
    pos = (lattice(30, 4, seed=14, device=device) * 25).to(dtype)  # 0 .. 100
    # 10^9 cells per dimension: 10^36 cells in all (torch's formula wraps around)
    with grid_raises(device, "more cells than int64 ids can number"):
        tc.grid_cluster(pos, torch.full((4,), 1e-7, device=device)).tolist()
    # a small grid, and a point far outside it: its id would be 2^72
    far = pos.double().clone()
    far[0] = torch.tensor([0.0, 0.0, 0.0, 2.0**60])
    big_box = torch.zeros(4, device=device), torch.full((4,), 255.0, device=device)
    with grid_raises(device, "voxel id (does|did) not fit in int64"):
        tc.grid_cluster(far, torch.ones(4, device=device), *big_box).tolist()
    with grid_raises(device, "end (is|was) below start"):
        tc.grid_cluster(pos, torch.ones(4, device=device), torch.full((4,), 200.0, device=device)).tolist()
    with grid_raises(device, "end (is|was) below start"):
        tc.grid_cluster(
            pos, torch.ones(4, device=device), None, torch.full((4,), -1.0, device=device)
        ).tolist()
    # points outside start .. end whose ids fit: torch_cluster's formula (trunc toward zero)
    outside = torch.tensor([[-3.0, 7.5], [250.0, -0.5]], device=device)
    box = torch.zeros(2, device=device), torch.full((2,), 4.0, device=device)
    assert tc.grid_cluster(outside, torch.ones(2), *box).tolist() == ref_grid(outside, torch.ones(2), *box)


@pytest.mark.parametrize("device", DEVICES)
def test_grid_cluster_arguments(device, mode):
    grid = api("grid_cluster", mode)
    pos = lattice(10, 3, seed=15, device=device)
    for dtype in (torch.bool, torch.complex64):
        with raises(mode, TypeError, match="pointops: grid_cluster: pos must hold real numbers"):
            grid(pos.to(dtype), torch.ones(3))
        with raises(mode, TypeError, match="pointops: grid_cluster: size must hold real numbers"):
            grid(pos, torch.ones(3, dtype=dtype))
        with raises(mode, TypeError, match="pointops: grid_cluster: end must hold real numbers"):
            grid(pos, torch.ones(3), None, torch.ones(3, dtype=dtype))
    with raises(mode, ValueError, match="pointops: size must have one entry per dimension of pos"):
        grid(pos, torch.ones(4))
    # copied to any device, except from the meta device, which holds no values
    meta = torch.ones(3, device="meta")
    with raises(mode, ValueError, match="pointops: grid_cluster: size is a meta tensor"):
        grid(pos, meta)
    with raises(mode, ValueError, match="pointops: grid_cluster: start is a meta tensor"):
        grid(pos, torch.ones(3), meta)
    with raises(mode, ValueError, match="pointops: grid_cluster: pos is a meta tensor"):
        grid(pos.to("meta"), torch.ones(3))
    for n, dim in ((0, 3), (0, 1), (5, 0)):
        empty = torch.zeros(n, dim, device=device)
        got = grid(empty, torch.ones(dim))
        assert got.dtype == torch.int64 and got.tolist() == [0] * n
    with raises(mode, ValueError, match=r"size\[0\] = .*cell sizes must be finite and > 0"):
        grid(pos[:0], -torch.ones(3))  # empty pos: the grid is still checked


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_grid_cluster_on_cuda_records_without_a_sync():
    pos = lattice(1000, 3, seed=16, device="cuda")
    pointops.check_errors()
    ids = tc.grid_cluster(pos, torch.tensor([1.0, -1.0, 1.0], device="cuda"))
    # the call returned without waiting; the problem is raised by the next pointops call
    torch.cuda.synchronize()
    assert ids.tolist() == [INT64_MIN] * len(pos)  # the lattice has 125 cells
    with pytest.raises(ValueError, match="grid_cluster call on this GPU was given bad values: size held"):
        tc.grid_cluster(pos, torch.ones(3, device="cuda"))
    assert tc.grid_cluster(pos, torch.ones(3, device="cuda")).tolist() == ref_grid(pos, torch.ones(3))


def test_pyg_lib_nearest_refuses_an_x_cloud_whose_y_cloud_is_empty():
    """-1 would index y's last row silently (issue 42's sibling): the same rule as
    torch_cluster.nearest."""
    from pointops.compat import pyg_lib

    x, y = torch.rand(4, 3), torch.rand(3, 3)
    ptr_x, ptr_y = torch.tensor([0, 2, 4]), torch.tensor([0, 3, 3])
    with pytest.raises(ValueError, match="its cloud of y is empty"):
        pyg_lib.nearest(x, y, ptr_x, ptr_y)
    ok = pyg_lib.nearest(x, y, torch.tensor([0, 2, 4]), torch.tensor([0, 1, 3]))
    assert ok.tolist()[:2] == [0, 0] and all(1 <= i < 3 for i in ok.tolist()[2:])

"""The packed-layout CPU kernels (knn_packed_cpu, ball_query_packed_cpu in csrc/kernels.h).

They have no Python binding yet, so tests/ops/native/packed_neighbors_shim.cpp is compiled with the
kernel sources into a small library and called through ctypes (its parallel backend runs chunks on
std::threads). Every cloud of a packed batch must give what the padded kernel gives for that cloud
alone, with indices shifted to global rows; rows outside every cloud are empty; bad row pointers
are clamped, never followed out of bounds.
"""

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import ops_reference as ref
import pointops
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
CSRC = REPO / "ops-src" / "csrc"
SOURCES = (
    [REPO / "tests" / "ops" / "native" / "packed_neighbors_shim.cpp"]
    + [
        CSRC / "cpu" / name
        for name in ("spatial_index_cpu.cpp", "knn_cpu.cpp", "ball_query_cpu.cpp", "parallel.cpp")
    ]
    + [CSRC / "tuning.cpp"]
)
CXX = shutil.which("c++") or shutil.which("g++")
DTYPE_CODE = {torch.float32: 0, torch.float64: 1}

pytestmark = pytest.mark.skipif(
    CXX is None or not sys.platform.startswith("linux"),
    reason="needs a Unix C++ compiler to build the test library",
)

_p = ctypes.c_void_p
_i64 = ctypes.c_int64


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    library = tmp_path_factory.mktemp("packed") / "libpacked_neighbors.so"
    # the extension's own flags that matter for results: no FMA contraction, no fast-math
    cmd = [
        CXX,
        "-O1",
        "-std=c++17",
        "-ffp-contract=off",
        "-shared",
        "-fPIC",
        "-pthread",
        f"-I{CSRC}",
        *map(str, SOURCES),
        "-o",
        str(library),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lib = ctypes.CDLL(str(library))
    lib.shim_set_threads.argtypes = [_i64]
    lib.shim_set_search_path.argtypes = [ctypes.c_char_p]
    lib.shim_knn_packed.argtypes = [ctypes.c_int32, _p, _p, _i64, _p, _p, _i64, _i64, _i64, _p, _p]
    lib.shim_ball_query_packed.argtypes = [
        ctypes.c_int32,
        _p,
        _p,
        _i64,
        _p,
        _p,
        _i64,
        _i64,
        ctypes.c_double,
        ctypes.c_int32,
        _i64,
        _p,
        _p,
        _p,
    ]
    for name in ("shim_knn_packed", "shim_ball_query_packed"):
        getattr(lib, name).restype = ctypes.c_char_p
    return lib


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request, shim):
    shim.shim_set_threads(request.param)
    return request.param


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None and t.numel() else ctypes.c_void_p(0)


def knn_packed(shim, xyz, ptr, query, qptr, k):
    Q = query.shape[0]
    dist2 = torch.full((Q, k), -7.0, dtype=xyz.dtype)  # poison: every slot must be written
    idx = torch.full((Q, k), -7, dtype=torch.int64)
    err = shim.shim_knn_packed(
        DTYPE_CODE[xyz.dtype],
        _ptr(xyz),
        _ptr(ptr),
        xyz.shape[0],
        _ptr(query),
        _ptr(qptr),
        Q,
        ptr.numel() - 1,
        k,
        _ptr(dist2),
        _ptr(idx),
    )
    assert err is None, err
    return dist2, idx


def ball_packed(shim, xyz, ptr, query, qptr, radius, k, inclusive=True):
    Q = query.shape[0]
    idx = torch.full((Q, k), -7, dtype=torch.int64)
    count = torch.full((Q,), -7, dtype=torch.int64)
    dist2 = torch.full((Q, k), -7.0, dtype=xyz.dtype)
    err = shim.shim_ball_query_packed(
        DTYPE_CODE[xyz.dtype],
        _ptr(xyz),
        _ptr(ptr),
        xyz.shape[0],
        _ptr(query),
        _ptr(qptr),
        Q,
        ptr.numel() - 1,
        radius,
        int(inclusive),
        k,
        _ptr(idx),
        _ptr(count),
        _ptr(dist2),
    )
    assert err is None, err
    return idx, count, dist2


def _packed_batch(sizes, query_sizes, dtype, seed, lattice=False):
    g = torch.Generator().manual_seed(seed)
    P, Q = sum(sizes), sum(query_sizes)
    if lattice:
        xyz = torch.randint(0, 5, (P, 3), generator=g).to(dtype)
        query = torch.randint(-1, 6, (Q, 3), generator=g).to(dtype)
    else:
        xyz, query = torch.rand(P, 3, generator=g).to(dtype), torch.rand(Q, 3, generator=g).to(dtype)
    ptr = torch.tensor([0, *torch.tensor(sizes).cumsum(0).tolist()], dtype=torch.int64)
    qptr = torch.tensor([0, *torch.tensor(query_sizes).cumsum(0).tolist()], dtype=torch.int64)
    return xyz, ptr, query, qptr


def _per_cloud(xyz, ptr, query, qptr, b):
    return xyz[int(ptr[b]) : int(ptr[b + 1])].unsqueeze(0), query[int(qptr[b]) : int(qptr[b + 1])].unsqueeze(
        0
    )


def _global(idx, offset):
    return torch.where(idx >= 0, idx + offset, idx)


# clouds of 0 points, a single point, tiny, and large enough for the kd-tree (and a parallel build)
SIZES = ([3000, 0, 1, 40000, 17, 2500], [200, 5, 3, 300, 0, 64])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lattice", [False, True], ids=["random", "lattice"])
def test_packed_knn_equals_padded_per_cloud(shim, threads, dtype, lattice):
    xyz, ptr, query, qptr = _packed_batch(*SIZES, dtype, seed=1, lattice=lattice)
    for k in (3, 16):
        dist2, idx = knn_packed(shim, xyz, ptr, query, qptr, k)
        for b in range(ptr.numel() - 1):
            cloud, q = _per_cloud(xyz, ptr, query, qptr, b)
            e_dist2, e_idx = pointops.knn(cloud, q, k)
            rows = slice(int(qptr[b]), int(qptr[b + 1]))
            assert torch.equal(idx[rows], _global(e_idx[0], int(ptr[b]))), (b, k)
            assert torch.equal(dist2[rows], e_dist2[0]), (b, k)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("inclusive", [True, False], ids=["inclusive", "exclusive"])
def test_packed_ball_query_equals_reference_per_cloud(shim, dtype, inclusive):
    shim.shim_set_threads(2)
    xyz, ptr, query, qptr = _packed_batch(*SIZES, dtype, seed=2, lattice=True)
    for radius, k in ((1.0, 8), (2.0, 32), (100.0, 5)):
        idx, count, dist2 = ball_packed(shim, xyz, ptr, query, qptr, radius, k, inclusive)
        for b in range(ptr.numel() - 1):
            cloud, q = _per_cloud(xyz, ptr, query, qptr, b)
            q = q[:, :12]  # the Python reference is slow: the first queries of each cloud
            e_idx, e_count, e_dist2 = ref.ball_query(cloud, q, radius, k, inclusive=inclusive)
            rows = slice(int(qptr[b]), int(qptr[b]) + q.shape[1])
            assert torch.equal(idx[rows], _global(e_idx[0], int(ptr[b]))), (b, radius)
            assert torch.equal(count[rows], e_count[0]) and torch.equal(dist2[rows], e_dist2[0]), (b, radius)


def test_packed_kdtree_equals_brute_force(shim, threads, monkeypatch):
    """The same packed batch through each search: identical output, exclusive radius included."""
    xyz, ptr, query, qptr = _packed_batch(*SIZES, torch.float32, seed=3)

    def both(fn, *args):
        out = {}
        for path in ("kdtree", "brute"):
            shim.shim_set_search_path(path.encode())
            out[path] = fn(*args)
        shim.shim_set_search_path(b"auto")
        return out["kdtree"], out["brute"]

    tree, brute = both(knn_packed, shim, xyz, ptr, query, qptr, 16)
    assert all(torch.equal(a, b) for a, b in zip(tree, brute, strict=True))
    for inclusive in (True, False):
        tree, brute = both(ball_packed, shim, xyz, ptr, query, qptr, 0.05, 32, inclusive)
        assert all(torch.equal(a, b) for a, b in zip(tree, brute, strict=True))


def test_rows_outside_every_cloud_and_bad_row_pointers(shim, threads):
    xyz, _, query, _ = _packed_batch([50, 50], [10, 10], torch.float64, seed=4)
    # decreasing, negative and past-the-end entries: read as clamped to 0..P / 0..Q, non-decreasing
    ptr = torch.tensor([-5, 40, 30, 500], dtype=torch.int64)  # -> [0, 40, 40, 100]
    qptr = torch.tensor([3, 8, 2, 15], dtype=torch.int64)  # -> [3, 8, 8, 15]
    dist2, idx = knn_packed(shim, xyz, ptr, query, qptr, 4)
    idx_b, count_b, dist2_b = ball_packed(shim, xyz, ptr, query, qptr, 0.5, 4)
    for rows in (slice(0, 3), slice(15, 20)):  # outside every cloud
        assert bool((idx[rows] == -1).all()) and bool(torch.isinf(dist2[rows]).all())
        assert bool((idx_b[rows] == -1).all()) and bool((count_b[rows] == 0).all())
        assert bool(torch.isinf(dist2_b[rows]).all())
    for b, (p0, p1, q0, q1) in enumerate([(0, 40, 3, 8), (40, 100, 8, 15)]):
        e_dist2, e_idx = ref.knn(xyz[p0:p1].unsqueeze(0), query[q0:q1].unsqueeze(0), 4)
        assert torch.equal(idx[q0:q1], _global(e_idx[0], p0)) and torch.equal(dist2[q0:q1], e_dist2[0]), b
        e_idx, e_count, e_dist2 = ref.ball_query(xyz[p0:p1].unsqueeze(0), query[q0:q1].unsqueeze(0), 0.5, 4)
        assert torch.equal(idx_b[q0:q1], _global(e_idx[0], p0)) and torch.equal(count_b[q0:q1], e_count[0])
    # no clouds at all (B = 0): every row empty
    dist2, idx = knn_packed(
        shim, xyz, torch.tensor([7], dtype=torch.int64), query, torch.tensor([2], dtype=torch.int64), 3
    )
    assert bool((idx == -1).all()) and bool(torch.isinf(dist2).all())


def test_non_finite_coordinates_fall_back_to_brute_force(shim, monkeypatch):
    """Without the binding's value checks a NaN can reach the kernel: the kd-tree is not used for
    that cloud (or query), so the output is the brute force's, whatever it makes of NaN."""
    shim.shim_set_threads(2)
    xyz, ptr, query, qptr = _packed_batch([5000, 4000], [100, 100], torch.float32, seed=5)
    xyz[4500] = float("nan")  # cloud 0 clean, cloud 1 has a NaN point
    query[7] = float("inf")
    out = {}
    for path in ("auto", "kdtree", "brute"):
        shim.shim_set_search_path(path.encode())
        out[path] = (
            knn_packed(shim, xyz, ptr, query, qptr, 8),
            ball_packed(shim, xyz, ptr, query, qptr, 0.1, 8),
        )
    for path in ("auto", "kdtree"):
        for got, want in zip(out[path], out["brute"], strict=True):
            assert all(_same_bits(a, b) for a, b in zip(got, want, strict=True)), path


def _same_bits(a, b):
    """Equal, NaN included (same computation, same bits)."""
    if a.is_floating_point():
        bits = torch.int32 if a.dtype == torch.float32 else torch.int64
        return a.dtype == b.dtype and torch.equal(a.view(bits), b.view(bits))
    return torch.equal(a, b)

"""pointops.compat.torch_cluster.grid_cluster and the native op behind it, pointops::grid_cluster:
the same ids as the plain-torch formula (torch_cluster's) for D = 1..5, given and missing
start / end, negative coordinates, float32 / float64, empty input; other dtypes computed in
float32 / float64; bad values (ValueError on CPU; on CUDA INT64_MIN ids and the error raised by
pointops.check_errors()); opcheck, torch.compile and TorchScript. Hostile inputs of every kind:
tests/compat/test_torch_cluster_hostile.py."""

import pointops
import pointops._tuning
import pytest
import torch
from pointops.compat import torch_cluster as tc

INT64_MIN = -(2**63)
op = torch.ops.pointops.grid_cluster


def reference(pos, size, start=None, end=None):
    """The formula in torch ops (the Python implementation the op replaced), with size, start and
    end taken in pos's dtype and device."""
    pos = pos.view(pos.size(0), -1)
    size = size.to(pos.device, pos.dtype).view(-1)
    start = torch.min(pos, 0)[0] if start is None else start.to(pos.device, pos.dtype).view(-1)
    end = torch.max(pos, 0)[0] if end is None else end.to(pos.device, pos.dtype).view(-1)
    cells = torch.true_divide(end - start, size).to(torch.long) + 1
    stride = torch.cat([torch.ones(1, dtype=torch.long, device=pos.device), torch.cumprod(cells, 0)[:-1]])
    out = torch.true_divide(pos - start.unsqueeze(0), size.view(1, -1)).to(torch.long)
    return (out * stride.view(1, -1)).sum(1)


def cloud(n, dim, dtype, device, seed=0, low=-3.0, high=5.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, dim, generator=g, dtype=torch.float64) * (high - low) + low).to(device, dtype)


def both(pos, size, start=None, end=None):
    """The wrapper's ids, after checking that they are the direct op call's."""
    got = tc.grid_cluster(pos, size, start, end)
    assert got.dtype == torch.int64 and got.device == pos.device and got.shape == (pos.shape[0],)
    if pos.dtype in (torch.float32, torch.float64) and pos.dim() == 2:
        s = size.to(pos.device, pos.dtype)
        a = None if start is None else start.to(pos.device, pos.dtype)
        b = None if end is None else end.to(pos.device, pos.dtype)
        assert torch.equal(op(pos, s, a, b), got)
    return got


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("bounds", ["none", "start", "end", "both"])
def test_matches_the_torch_formula(device, dtype, dim, bounds):
    pos = cloud(300, dim, dtype, device, seed=dim)
    size = torch.linspace(0.3, 0.9, dim, dtype=dtype, device=device)
    start = torch.full((dim,), -4.0, dtype=dtype, device=device) if bounds in ("start", "both") else None
    # an end inside the cloud: points past it still get ids (as in torch_cluster)
    end = torch.full((dim,), 2.5, dtype=dtype, device=device) if bounds in ("end", "both") else None
    got = both(pos, size, start, end)
    assert torch.equal(got, reference(pos, size, start, end))
    if bounds == "none":
        assert int(got.min()) >= 0


def test_known_ids_and_negative_coordinates(device):
    pos = torch.tensor([[0.0, 0], [11, 9], [2, 8], [2, 2], [8, 3]], device=device)
    size = torch.tensor([5.0, 5])
    assert both(pos, size).tolist() == [0, 5, 3, 0, 1]
    assert both(pos, size, end=torch.tensor([19.0, 19])).tolist() == [0, 6, 4, 0, 1]
    # points below start: trunc toward zero, so -0.5 cells is cell 0 and -1.5 cells is -1
    neg = torch.tensor([[-2.5, -7.5], [-12.0, 3.0], [4.0, -1.0]], device=device)
    start = torch.tensor([0.0, 0.0])
    got = both(neg, size, start, torch.tensor([10.0, 10.0]))
    assert got.tolist() == reference(neg, size, start, torch.tensor([10.0, 10.0])).tolist() == [-3, -2, 0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_many_points_and_cell_boundaries(device, dtype):
    # more rows than one CPU chunk and than the CUDA bounds kernel's blocks cover in one pass,
    # and lattice points on cell boundaries, where the rounding of the division decides
    lattice = torch.stack(
        torch.meshgrid(*[torch.arange(40, dtype=torch.float64) * 0.1] * 3, indexing="ij"), -1
    )
    pos = torch.cat([lattice.reshape(-1, 3), cloud(150_000, 3, torch.float64, "cpu", seed=3)]).to(
        device, dtype
    )
    for size in (torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0.05, 0.05, 0.05])):
        assert torch.equal(both(pos, size), reference(pos, size))
        start = torch.tensor([-0.1, 0.0, 0.1])
        assert torch.equal(both(pos, size, start), reference(pos, size, start))


def test_size_start_end_of_other_dtypes_and_devices(device):
    pos = cloud(100, 3, torch.float32, device, seed=4)
    # python-made tensors: int64 size, float64 start and end on the CPU
    size = torch.tensor([1, 2, 1])
    start, end = torch.tensor([-3.0, -3.0, -3.0], dtype=torch.float64), torch.tensor([5.0, 5.0, 5.0])
    assert torch.equal(both(pos, size, start, end), reference(pos, size, start, end))
    # any shape holding one value per dimension
    assert torch.equal(both(pos, size.view(1, 3)), reference(pos, size))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_unconverted_call_gives_the_converted_ids(device, dtype):
    # size of pos's dtype on pos's device goes to the op as it is; the others are converted first
    pos = cloud(500, 3, dtype, device, seed=6)
    size = torch.tensor([0.07, 0.11, 0.05], dtype=dtype, device=device)
    other = torch.float64 if dtype == torch.float32 else torch.float32
    converted = tc.grid_cluster(pos, size.to("cpu", other))
    assert torch.equal(tc.grid_cluster(pos, size), converted)
    assert torch.equal(converted, reference(pos, size))


def test_pos_of_more_than_two_dimensions_is_flattened(device):
    pos = cloud(50, 4, torch.float64, device, seed=5)
    size = torch.tensor([0.5, 1.0, 1.5, 2.0], dtype=torch.float64)
    assert torch.equal(tc.grid_cluster(pos.view(50, 2, 2), size), reference(pos, size))
    line = pos[:, 0].contiguous()
    assert torch.equal(tc.grid_cluster(line, size[:1]), reference(line.view(-1, 1), size[:1]))


def test_ids_beyond_int64_raise(device):
    # 10^7 cells per dimension: 10^28 cells, more than int64 ids number (torch's formula wraps)
    pos = cloud(200, 4, torch.float64, device, seed=6, low=0.0, high=1.0)
    size = torch.full((4,), 1e-7, dtype=torch.float64)
    match = "more cells than int64 ids can number"
    if device == "cpu":
        with pytest.raises(ValueError, match=match):
            tc.grid_cluster(pos, size)
    else:
        assert tc.grid_cluster(pos, size.to(device)).tolist() == [INT64_MIN] * 200
        with pytest.raises(ValueError, match=match):
            pointops.check_errors()
    # the largest grid that fits: 2^62 cells, and ids up to 2^62 - 1
    pos = torch.tensor([[0.0, 0.0], [2.0**31 - 1, 2.0**31 - 1]], dtype=torch.float64, device=device)
    assert both(pos, torch.ones(2, dtype=torch.float64)).tolist() == [0, 2**62 - 1]


def test_empty_input(device):
    for dtype in (torch.float32, torch.float64, torch.float16, torch.int64):
        pos = torch.empty(0, 3, dtype=dtype, device=device)
        got = tc.grid_cluster(pos, torch.ones(3))
        assert got.dtype == torch.int64 and got.shape == (0,) and got.device == pos.device
    got = op(torch.empty(0, 2, device=device), torch.ones(2, device=device), None, None)
    assert got.dtype == torch.int64 and got.shape == (0,)


def test_no_dimensions_gives_id_zero(device):
    pos = torch.empty(4, 0, device=device)
    assert op(pos, torch.empty(0, device=device), None, None).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize(
    "dtype, work",
    [
        (torch.float16, torch.float32),
        (torch.bfloat16, torch.float32),
        (torch.int64, torch.float64),
        (torch.int32, torch.float64),
        (torch.uint8, torch.float64),
    ],
)
def test_other_dtypes_are_computed_in_float32_or_float64(device, dtype, work):
    pos = (cloud(80, 3, torch.float32, device, seed=7) * 4).abs().to(dtype)
    size = torch.tensor([1.5, 2.0, 3.0])
    start = torch.tensor([-1.0, 0.5, 0.0])
    for args in [(size,), (size, start), (size, None, torch.tensor([80.0, 80, 80]))]:
        got = tc.grid_cluster(pos, *args)
        assert torch.equal(got, reference(pos.to(work), *args))


def test_argument_errors():
    pos = cloud(10, 3, torch.float32, "cpu")
    with pytest.raises(ValueError, match="pointops: size must have one entry per dimension"):
        tc.grid_cluster(pos, torch.ones(2))
    with pytest.raises(ValueError, match="pointops: start must have one entry per dimension"):
        tc.grid_cluster(pos, torch.ones(3), start=torch.zeros(4))
    with pytest.raises(ValueError, match="pointops: end must have one entry per dimension"):
        tc.grid_cluster(pos, torch.ones(3), end=torch.zeros(1))
    with pytest.raises(ValueError, match="pointops: pos must have at least one dimension"):
        tc.grid_cluster(torch.tensor(1.0), torch.ones(1))
    # the op itself (direct torch.ops calls)
    ones = torch.ones(3)
    with pytest.raises(RuntimeError, match=r"pos must have shape \[N, D\]"):
        op(pos.view(10, 3, 1), ones, None, None)
    with pytest.raises(RuntimeError, match="pos must be float32 or float64"):
        op(pos.long(), ones.long(), None, None)
    with pytest.raises(RuntimeError, match="size must have the same dtype as pos"):
        op(pos, ones.double(), None, None)
    with pytest.raises(RuntimeError, match="end must have one entry per dimension of pos"):
        op(pos, ones, None, torch.ones(2))


@pytest.mark.parametrize(
    "size, start, end, match",
    [
        ([1.0, 0.0, 1.0], None, None, r"size\[1\] = 0; cell sizes must be finite and > 0"),
        ([1.0, 1.0, -2.0], None, None, r"size\[2\] = -2; cell sizes must be finite and > 0"),
        ([float("nan"), 1.0, 1.0], None, None, r"size\[0\] = nan"),
        ([1.0, float("inf"), 1.0], None, None, r"size\[1\] = inf"),
        ([1.0, 1.0, 1.0], [0.0, float("-inf"), 0.0], None, r"start\[1\] = -inf; grid bounds must be finite"),
        ([1.0, 1.0, 1.0], None, [0.0, 0.0, float("nan")], r"end\[2\] = nan; grid bounds must be finite"),
        ([1e-300, 1.0, 1.0], None, None, "more cells than int64 ids can number"),
        ([1.0, 1.0, 1.0], [9.0, 0.0, 0.0], None, "end is below start along some dimension"),
        ([1.0, 1.0, 1.0], None, [0.0, -9.0, 0.0], "end is below start along some dimension"),
    ],
)
def test_bad_grid_values_raise_on_cpu(size, start, end, match):
    pos = cloud(10, 3, torch.float64, "cpu")
    start = None if start is None else torch.tensor(start, dtype=torch.float64)
    end = None if end is None else torch.tensor(end, dtype=torch.float64)
    with pytest.raises(ValueError, match=match):
        tc.grid_cluster(pos, torch.tensor(size, dtype=torch.float64), start, end)


@pytest.mark.parametrize("given", [False, True])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e30])
def test_bad_coordinates_raise_on_cpu(given, bad):
    pos = torch.tensor([[1.0, 2.0], [3.0, bad], [0.5, 0.5]])
    box = (torch.zeros(2), torch.tensor([4.0, 4.0])) if given else (None, None)
    if bad == 1e30:  # the extent itself, or the point's id
        match = "voxel id does not fit in int64" if given else "more cells than int64 ids can number"
    else:
        match = "pos holds nan or inf"
    with pytest.raises(ValueError, match=match):
        tc.grid_cluster(pos, torch.tensor([0.5, 0.5]), *box)


def test_bad_values_on_cuda_are_recorded(device):
    # values on the GPU: the kernels give the affected points INT64_MIN and record the problem,
    # which the next pointops call or pointops.check_errors() raises (no sync in the call)
    if device != "cuda":
        pytest.skip("CUDA only: the CPU op raises (test_bad_grid_values_raise_on_cpu)")
    pos = torch.tensor([[1.0, 2.0], [3.0, float("nan")], [0.5, 0.5]], device=device)
    size = torch.tensor([0.5, 0.5], device=device)
    box = torch.zeros(2, device=device), torch.tensor([4.0, 4.0], device=device)
    # a bad coordinate with the grid given: its point (the others may be poisoned too, as every
    # output is while a problem is recorded)
    assert tc.grid_cluster(pos, size, *box)[1] == INT64_MIN
    with pytest.raises(ValueError, match="grid_cluster call on this GPU was given bad values: pos held nan"):
        pointops.check_errors()
    # a bad coordinate in the grid's bounds (the minimum of pos): every point
    assert tc.grid_cluster(pos, size).tolist() == [INT64_MIN] * 3
    with pytest.raises(ValueError, match="pos held nan or inf"):
        pointops.check_errors()
    good = pos.nan_to_num(0.0)
    for bad_size in ([0.0, 0.5], [0.5, -1.0], [float("nan"), 0.5], [0.5, float("inf")]):
        assert tc.grid_cluster(good, torch.tensor(bad_size, device=device)).tolist() == [INT64_MIN] * 3
        with pytest.raises(ValueError, match="size held a value that is not finite and > 0"):
            tc.grid_cluster(good, size)  # the next call raises it
        assert tc.grid_cluster(good, size).tolist() == tc.grid_cluster(good.cpu(), size.cpu()).tolist()
    bad_start = torch.tensor([0.0, float("-inf")], device=device)
    assert tc.grid_cluster(good, size, bad_start).tolist() == [INT64_MIN] * 3
    with pytest.raises(ValueError, match="start held nan or inf"):
        pointops.check_errors()
    # CPU-made values (from Python) are checked before the call, for free
    for bad_size in ([0.0, 0.5], [0.5, -1.0], [float("nan"), 0.5]):
        with pytest.raises(ValueError, match=r"size\[\d\] = .*; cell sizes must be finite and > 0"):
            tc.grid_cluster(good, torch.tensor(bad_size))
    with pytest.raises(ValueError, match=r"end\[1\] = inf; grid bounds must be finite"):
        tc.grid_cluster(good, size.cpu(), None, torch.tensor([1.0, float("inf")]))
    pointops.check_errors()  # nothing recorded by those


def test_many_dimensions_on_cuda_run_on_the_cpu(device):
    if device != "cuda":
        pytest.skip("CUDA only")
    pos = cloud(20, 1100, torch.float32, device, low=0.0, high=1.0)
    size = torch.ones(1100)
    assert torch.equal(tc.grid_cluster(pos, size), torch.zeros(20, dtype=torch.long, device=device))
    with pytest.raises(ValueError, match="pos holds nan or inf"):  # checked there, at once
        tc.grid_cluster(torch.cat([pos, pos[:1] * float("nan")]), size)
    with pytest.raises(RuntimeError, match="on CUDA takes at most 1024 dimensions"):
        op(pos, size.to(device), None, None)


def test_opcheck(device):
    pos = cloud(40, 3, torch.float64, device, seed=8)
    size = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64, device=device)
    start, end = pos.min(0)[0] - 1, pos.max(0)[0]
    for args in [
        (pos, size, None, None),
        (pos, size, start, end),
        (pos.float(), size.float(), start.float(), None),
    ]:
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_compile_fullgraph(device, dynamic):
    torch._dynamo.reset()
    size = torch.tensor([0.5, 0.7, 0.9], device=device)

    def step(pos, start):
        return tc.grid_cluster(pos, size) + tc.grid_cluster(pos, size, start)

    compiled = torch.compile(step, fullgraph=True, dynamic=dynamic, backend="aot_eager")
    for n in (30, 47):
        pos = cloud(n, 3, torch.float32, device, seed=n)
        start = pos.min(0)[0] - 0.25
        assert torch.equal(compiled(pos, start), step(pos, start))


def test_torchscript(device):
    scripted = torch.jit.script(tc.grid_cluster)
    pos = cloud(60, 3, torch.float32, device, seed=9)
    size, start = torch.tensor([0.5, 0.7, 0.9]), torch.tensor([-4.0, -4.0, -4.0])
    for args in [
        (pos, size),
        (pos, size, start),
        (pos.half(), size),
        (pos.view(60, 3, 1), size, None, -start),
    ]:
        assert torch.equal(scripted(*args), tc.grid_cluster(*args))


@pytest.mark.parametrize("two_kernels", [None, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "n, dim", [(1, 1), (2, 3), (7, 2), (9, 40), (3000, 3), (3000, 6), (3000, 12), (200_000, 3)]
)
def test_bounds_held_in_the_ids_or_a_workspace(device, dtype, n, dim, two_kernels):
    # On CUDA the partial bounds live in the first rows of the ids when they fit (one cooperative
    # kernel up to 8 dimensions, else or with the knob two kernels) and in a workspace when the
    # cloud is too small for them; the rows that held them must come out like every other row.
    pos = cloud(n, dim, dtype, device, seed=n + dim)
    # (for 40 dimensions at most 2 cells each: 2^40 cells, fewer than int64 ids number)
    size = torch.linspace(0.2, 0.6, dim, dtype=dtype, device=device) if dim <= 12 else torch.full((dim,), 5.0)
    with pointops._tuning.override(GRID_CLUSTER_TWO_KERNELS=two_kernels):
        assert torch.equal(both(pos, size), reference(pos, size))
        end = pos.max(0)[0] + 1
        assert torch.equal(both(pos, size, None, end), reference(pos, size, None, end))


# The CUDA paths without start / end, by the knobs that force them: the planner's default (one
# cooperative kernel up to 8 dimensions), a cooperative grid of 64 blocks, the two kernels.
PATHS = {
    "default": {},
    "cooperative-64": {"GRID_CLUSTER_FUSED_BLOCKS": 64},
    "two-kernels": {"GRID_CLUSTER_TWO_KERNELS": 1},
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_cuda_graph_replay_recomputes_the_bounds(device, path):
    if device != "cuda":
        pytest.skip("CUDA only")
    pos = cloud(50_000, 3, torch.float32, device, seed=11)
    size = torch.tensor([0.3, 0.4, 0.5], device=device)
    with pointops._tuning.override(**PATHS[path]):
        tc.grid_cluster(pos, size)  # warm up outside the graph
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ids = tc.grid_cluster(pos, size)
    for seed in (12, 13):
        pos.copy_(cloud(50_000, 3, torch.float32, device, seed=seed, low=-8.0, high=2.0 * seed))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(ids, reference(pos, size))


@pytest.mark.parametrize("blocks", [1, 3, 64, 400])
@pytest.mark.parametrize("n, dim", [(2_500, 3), (40_000, 3), (40_000, 8)])
def test_cooperative_grid_writes_the_rows_that_held_the_partials(device, blocks, n, dim):
    # The one cooperative kernel keeps a ticket and every block's partials in the ids' first rows
    # (16 + 2 * blocks * dim * 4 bytes), which the blocks owning them write only after every
    # block has read the partials. With 400 blocks those rows span several blocks' first rows.
    if device != "cuda":
        pytest.skip("CUDA only")
    pos = cloud(n, dim, torch.float32, device, seed=blocks + n + dim, low=-3.0, high=5.0)
    size = torch.linspace(0.05, 0.3, dim, device=device)
    with pointops._tuning.override(GRID_CLUSTER_FUSED_BLOCKS=blocks):
        ids = tc.grid_cluster(pos, size)
        again = tc.grid_cluster(pos, size)
    expected = reference(pos, size)
    assert torch.equal(ids, expected)
    assert torch.equal(again, expected)


def test_a_refused_cooperative_launch_falls_back_to_two_kernels(device):
    # Far more blocks of the one cooperative kernel than the GPU holds at once: the driver refuses
    # the launch (as it does when another context or an MPS client takes SMs), and the op must
    # still write every id, through the two kernels, with the partials in the ids' first rows.
    if device != "cuda":
        pytest.skip("CUDA only")
    pos = cloud(2_000_000, 3, torch.float32, device, seed=21)
    size = torch.tensor([0.05, 0.07, 0.11], device=device)
    with pointops._tuning.override(GRID_CLUSTER_FUSED_BLOCKS=100_000):
        ids = tc.grid_cluster(pos, size)
        again = tc.grid_cluster(pos.double(), size.double())
    expected = reference(pos, size)
    assert torch.equal(ids, expected)
    assert torch.equal(again, reference(pos.double(), size.double()))
    assert torch.equal(tc.grid_cluster(pos, size), expected)  # and the default path after it


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_bad_coordinates_in_every_path_poison_every_id(device, path, where, bad):
    # A non-finite coordinate makes the bounds non-finite: every id is INT64_MIN and the problem
    # is recorded, whichever kernel found the bounds and wherever the row lies (a block's first
    # rows, the partials' rows, the last block).
    if device != "cuda":
        pytest.skip("CUDA only")
    n = 40_000
    pos = cloud(n, 3, torch.float32, device, seed=3)
    row = {"first": 0, "middle": n // 2, "last": n - 1}[where]
    pos[row, 1] = bad
    size = torch.tensor([0.2, 0.2, 0.2], device=device)
    with pointops._tuning.override(**PATHS[path]):
        ids = tc.grid_cluster(pos, size)
    assert bool((ids == INT64_MIN).all())
    with pytest.raises(ValueError, match="pos held nan or inf"):
        pointops.check_errors()
    good = pos.nan_to_num(0.0, 0.0, 0.0)
    with pointops._tuning.override(**PATHS[path]):
        assert torch.equal(tc.grid_cluster(good, size), reference(good, size))
        assert tc.grid_cluster(good, torch.tensor([0.2, 0.0, 0.2], device=device)).eq(INT64_MIN).all()
        with pytest.raises(ValueError, match="size held a value that is not finite and > 0"):
            pointops.check_errors()

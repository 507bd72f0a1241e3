// Switches that force a kernel path, so that tests and benchmarks can compare the strategies a
// planner did not pick. Every switch is listed here; nothing else in csrc reads the environment.
//
// Each is read from its POINTOPS_* environment variable once, at its first use; set_tuning()
// overrides one at run time (the CUDA test harness, the Python tests through
// torch.ops.pointops.set_tuning). kUnset means "the planner decides". Not for users: the
// defaults are what the benchmarks measure.
#pragma once

#include <cstdint>

namespace pointops {

enum class Knob : int32_t {
  // CUDA FPS: force G, the blocks per cloud (1, 2, 4, ... 16: one block or a cluster where
  // one fits, else a grid plan with that G); 1 = no clusters (Hopper and newer
  // otherwise may use them); 0 = no lean block path; 1 = the general (workspace) path only.
  FpsGroup,
  FpsNoCluster,
  FpsLean,
  FpsGeneral,
  // CUDA kNN / ball query: the cloud size from which the uniform grid is used.
  GridMinPoints,
  // CUDA gather forward: 0 = direct, 1 = staged rows; stage budget in KB; 0 = no channel pairs.
  GatherStaged,
  GatherStageKb,
  GatherPaired,
  // CUDA gather backward: 0 dense (transposed), 1 sparse direct, 2 sparse staged, 3 fused,
  // 4 chunked, 5 dense (rows built once per chunk);
  // the staged sums' stage size (KB) and span; 0 = build rows in line, not beside the transpose.
  GatherSparse,
  GatherSumStageKb,
  GatherSumSpan,
  GatherOverlap,
  // CPU FPS: 0 = brute force, 1 = kd-tree (POINTOPS_CPU_FPS_PATH=brute|kdtree|auto).
  CpuFpsPath,
  // CPU kNN / ball query: 0 = brute force, 1 = kd-tree for every cloud
  // (POINTOPS_CPU_NEIGHBORS_PATH=brute|kdtree|auto).
  CpuNeighborsPath,
  // CUDA packed gather backward and the padded one's transposed sums: 1 = rows by counting sort
  // (else the radix sort below 2^31 entries).
  GatherRowsCounted,
  // CUDA grid_cluster without start / end: 1 = the two-kernel path (bounds kernel, then ids),
  // not the one cooperative kernel.
  GridClusterTwoKernels,
  // CUDA grid_cluster: blocks of the one cooperative kernel. Past what fits on the GPU the driver
  // refuses the launch and the op falls back to the two kernels (the tests force that).
  GridClusterFusedBlocks,
  // CUDA gather backward, dense sums: 1 = wide (one block per SM, twice the sums per
  // thread, up to 200 KB of chunk), 0 = narrow (two blocks per SM).
  GatherDenseWide,
  // CUDA ball query, scanning path: threads per query (1, 2, 4, ... 32); by default one where
  // the queries fill the GPU, else 8, 16 or 32 (ball_query.cu's scan_lanes).
  BallQueryLanes,
  // CUDA: shared memory per block in KB that the planners may use, when below the device's
  // opt-in limit (at least 48), so that a test on a large GPU plans as on a smaller one.
  SmemLimitKb,
  Count,
};

constexpr int64_t kUnset = -1;

// The environment variable of a knob ("POINTOPS_FPS_GROUP", ...).
const char* tuning_name(Knob knob);
// The knob named `name` (with or without the POINTOPS_ prefix); false when there is none.
bool tuning_knob(const char* name, Knob* knob);
// The knob's value, kUnset when neither the environment nor set_tuning gave one.
int64_t tuning(Knob knob);
// Sets the knob (kUnset clears it); returns the previous value.
int64_t set_tuning(Knob knob, int64_t value);
// Counts set_tuning calls, so that cached launch plans made under other settings are redone.
int64_t tuning_generation();
// The knob's value, or `fallback` when unset.
inline int64_t tuning_or(Knob knob, int64_t fallback) {
  const int64_t v = tuning(knob);
  return v == kUnset ? fallback : v;
}

}  // namespace pointops

// Planning the gather backward (CUDA): which sums run (gather_backward_sums.cuh), their launch
// shape and the workspace they need, decided once per call from the sizes and the device.
#pragma once

#include "common.cuh"
#include "gather_backward_chunked.cuh"
#include "gather_backward_dense.cuh"
#include "gather_backward_rows.cuh"
#include "gather_backward_sums.cuh"

namespace pointops {
namespace cuda_detail {

// Shared memory of a fused block: kFusedSmemBytes, or what the device allows.
inline int64_t fused_smem_budget() { return smem_budget(kFusedSmemBytes); }

struct FusedPlan {
  int stage_rows;              // grad_out rows per buffer (two buffers)
  int64_t channels_per_block;  // a multiple of stage_rows
  int64_t blocks;
  size_t smem;
};

// The fused sums' launch, or false where they do not apply (too many entries for the block's
// registers and shared memory, or grad_out rows too long to stage).
inline bool plan_fused(int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, size_t elem_bytes,
                       FusedPlan* plan) {
  const int64_t entries = P * T;
  if (P <= 0 || entries > kFusedMaxEntries) return false;
  const int64_t row_bytes =
      fused_row_stride(P, static_cast<int64_t>(elem_bytes)) * static_cast<int64_t>(elem_bytes);
  int64_t stage_rows =
      (fused_smem_budget() - static_cast<int64_t>(fused_rows_bytes(entries))) / (2 * row_bytes);
  if (stage_rows < 1) return false;
  if (stage_rows > C) stage_rows = C;
  // Two blocks per SM at least: fewer channels per block where the clouds and spans are few.
  const int64_t slices = B * ceil_div(N, kFusedSpan);
  int64_t groups = ceil_div(2 * int64_t{current_device_sm_count()}, slices);
  const int64_t max_groups = ceil_div(C, stage_rows);
  if (groups > max_groups) groups = max_groups;
  if (groups < 1) groups = 1;
  plan->stage_rows = static_cast<int>(stage_rows);
  plan->channels_per_block = ceil_div(ceil_div(C, groups), stage_rows) * stage_rows;
  plan->blocks = slices * ceil_div(C, plan->channels_per_block);
  plan->smem = fused_rows_bytes(entries) + static_cast<size_t>(2 * stage_rows * row_bytes);
  return plan->blocks <= INT32_MAX;
}

// Dynamic shared memory of a fused block with `stage_rows` rows per buffer.
inline size_t fused_smem(int64_t P, int64_t T, size_t elem_bytes, int64_t stage_rows) {
  const int64_t row_bytes =
      fused_row_stride(P, static_cast<int64_t>(elem_bytes)) * static_cast<int64_t>(elem_bytes);
  return fused_rows_bytes(P * T) + static_cast<size_t>(2 * stage_rows * row_bytes);
}

// Which sums run: the transposed (dense) sums, the sparse sums (fused, staged or direct), or
// with the GatherStaged knob at 0 the direct sums (no slab in the workspace). The transposed sums
// replaced an earlier variant that summed every row, a block of rows at a time, from grad_out
// rows staged in shared memory (three_interpolate 308 -> 198 µs, gather_points float16 137 ->
// 102 µs, group_points equal on the H200); the sparse sums instead give each target a lane and
// serve only sparse rows. The GatherSparse knob forces one (benchmarks and tests compare
// them): 0 the dense sums, 1 the sparse sums from grad_out, 2 the sparse sums from staged
// grad_out rows (falling back to 1 where those rows do not fit), 3 the fused sparse sums
// (falling back to 2), 4 the chunked sums (gather_backward_chunked.cuh; falling back to 0),
// 5 the dense sums (gather_backward_dense.cuh; falling back to 0).
enum class SumPath : int32_t { Direct, Transposed, SparseDirect, SparseStaged, SparseFused, Chunked, Dense };

// grad_out rows staged per block for the staged sparse sums (0: they do not fit usefully).
inline int64_t staged_sum_channels(int64_t C, int64_t P, size_t elem_bytes) {
  if (P <= 0) return 0;
  // The rows share the block's shared memory with the span's bounds and entries (8 bytes each
  // at most), within what the device allows.
  const int64_t span = staged_sum_span();
  const int64_t room = dynamic_smem_limit() - 16 - (staged_sum_entries_offset(span) + span) * 8;
  const int64_t row_bytes = staged_sum_row_bytes() < room ? staged_sum_row_bytes() : room;
  if (row_bytes <= 0) return 0;
  int64_t cs = row_bytes / (P * static_cast<int64_t>(elem_bytes));
  if (cs > kStagedSumChannels) cs = kStagedSumChannels;
  if (cs > C) cs = C;
  return cs >= (C < 4 ? C : 4) ? cs : 0;  // fewer rows per block re-read the bounds too often
}

// `fused` receives the fused sums' plan when they are chosen.
inline SumPath sparse_path(int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, size_t elem_bytes,
                           FusedPlan* fused) {
  if (plan_fused(B, C, N, P, T, elem_bytes, fused)) return SumPath::SparseFused;
  return staged_sum_channels(C, P, elem_bytes) > 0 ? SumPath::SparseStaged : SumPath::SparseDirect;
}

// The dense sums' shape: as GatherDenseWide says (0 narrow, 1 wide), else wide for rows of more
// than kDenseDefaultMaxTargets targets and narrow below. H100, kernel oracle, float32 / float16:
// B8 C128 N4096 P16384 wide 0.100 / 0.090 ms, narrow 0.118 (float16), transposed sums 0.169 /
// 0.152; B16 C128 N1024 P4096 narrow 0.055 / 0.046, wide 0.055 / 0.048; at 256 and 64 targets
// narrow ahead.
inline DenseShape dense_plan_shape(int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, size_t elem_bytes) {
  const int64_t knob = tuning(Knob::GatherDenseWide);
  const bool wide = knob == kUnset ? N > kDenseDefaultMaxTargets : knob == 1;
  return dense_shape(elem_bytes < 8, B, C, N, P, T, elem_bytes, wide);
}

// Dense rows: the dense sums where they apply and fill the GPU (a block per cloud and
// channel group): up to kDenseDefaultMaxTargets targets per cloud, and beyond in their wide
// shape (one block per SM, so most SMs busy is enough); else the transposed sums. `forced`
// (Chunked or Dense) takes that one wherever it applies. `dense` receives the dense sums' shape
// when they are chosen.
inline SumPath dense_path(int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, size_t elem_bytes,
                          SumPath forced, DenseShape* dense) {
  const bool float_acc = elem_bytes < 8;
  if (forced == SumPath::Chunked)
    return chunked_applies(float_acc, B, C, N, P, T) ? SumPath::Chunked : SumPath::Transposed;
  *dense = dense_plan_shape(B, C, N, P, T, elem_bytes);
  if (forced == SumPath::Dense) return dense->valid() ? SumPath::Dense : SumPath::Transposed;
  if (!dense->valid()) return SumPath::Transposed;
  const int64_t blocks = B * ceil_div(C, dense->cs), sms = current_device_sm_count();
  const bool fills = N <= kDenseDefaultMaxTargets ? blocks >= sms : dense->wide && 8 * blocks >= 7 * sms;
  return fills ? SumPath::Dense : SumPath::Transposed;
}

// The launch shapes that the chosen path needs, worked out while choosing it.
struct PathShapes {
  FusedPlan fused;   // for SumPath::SparseFused
  DenseShape dense;  // for SumPath::Dense
};

inline SumPath choose_sum_path(int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, size_t elem_bytes,
                               PathShapes* shapes) {
  if (tuning(Knob::GatherStaged) == 0) return SumPath::Direct;
  switch (tuning(Knob::GatherSparse)) {
    case 0: return SumPath::Transposed;
    case 1: return SumPath::SparseDirect;
    case 2: return SumPath::SparseStaged;
    case 3: return sparse_path(B, C, N, P, T, elem_bytes, &shapes->fused);
    case 4: return dense_path(B, C, N, P, T, elem_bytes, SumPath::Chunked, &shapes->dense);
    case 5: return dense_path(B, C, N, P, T, elem_bytes, SumPath::Dense, &shapes->dense);
    default: break;
  }
  // The sparse sums read grad_out scattered (or restage its rows for every span of targets):
  // cheap while it stays in half of the L2. Beyond, each read would come from DRAM; the dense
  // sums measured faster there (B8 C256 N262144 P131072: 2.06 vs 2.31 ms, float32).
  const int64_t grad_bytes = B * C * P * static_cast<int64_t>(elem_bytes);
  if (P * T > N || grad_bytes > current_device_l2_bytes() / 2)
    return dense_path(B, C, N, P, T, elem_bytes, SumPath::Transposed, &shapes->dense);
  return sparse_path(B, C, N, P, T, elem_bytes, &shapes->fused);
}

inline size_t slab_bytes(int64_t B, int64_t C, int64_t P, size_t elem_bytes, SumPath path) {
  if (path != SumPath::Transposed) return 0;
  const int64_t channels = C < kChannelTile ? C : kChannelTile;
  return static_cast<size_t>(B * P * channels * slab_buffers(B, C, P, elem_bytes)) * elem_bytes;
}

// The plan of one gather_backward_feat call, in CudaPlan terms:
//   path      a SumPath
//   shape[0]  1 when row positions and entry numbers fit 32 bits (fits_u32), else 0
//   fused:    shape[1] stage rows per buffer, shape[2] channels per block, shape[3] blocks
//   staged:   shape[1] grad_out rows per block, shape[2] targets per block (span)
//   chunked:  shape[1] targets per thread, shape[2] channels per block, shape[3] points per chunk
//   dense:    the same three (K * CS = 64 for the wide shape)
//   transposed: shape[1] 1 for rows by radix sort, 0 for counted rows
// The workspace holds the rows (and the slab) except for the fused sparse sums, which need none.
inline CudaPlan plan_gather_backward(Dtype dt, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T) {
  const size_t elem = dt == Dtype::Float64 ? 8 : (dt == Dtype::Float32 ? 4 : 2);
  CudaPlan plan;
  plan.shape[0] = fits_u32(B, N, P, T) ? 1 : 0;
  PathShapes shapes;
  SumPath path = choose_sum_path(B, C, N, P, T, elem, &shapes);
  if (path == SumPath::SparseFused) {
    plan.path = static_cast<int32_t>(path);
    plan.shape[1] = shapes.fused.stage_rows;
    plan.shape[2] = shapes.fused.channels_per_block;
    plan.shape[3] = shapes.fused.blocks;
    return plan;
  }
  if (path == SumPath::Chunked) {
    const int k = chunked_targets_per_thread(N);
    const int cs = kChunkedAccumulators / k;
    plan.path = static_cast<int32_t>(path);
    plan.shape[1] = k;
    plan.shape[2] = cs;
    plan.shape[3] = chunked_points_per_chunk(P, cs, elem);
    RadixRows rows;
    if (carve_radix_rows(nullptr, B, N, P, T, chunked_packed_bytes(B, N, P, T), &rows) == nullptr)
      plan.workspace_bytes = rows.total_bytes;
    return plan;
  }
  if (path == SumPath::Dense) {
    const DenseShape& dense = shapes.dense;
    plan.path = static_cast<int32_t>(path);
    plan.shape[1] = dense.k;
    plan.shape[2] = dense.cs;
    plan.shape[3] = dense.p_chunk;
    plan.workspace_bytes = dense_workspace_bytes(B, N, P, T, dense.p_chunk);
    return plan;
  }
  if (path == SumPath::SparseStaged) {
    const int64_t channels = staged_sum_channels(C, P, elem);
    const int64_t span = staged_sum_span();
    if (channels > 0 && span > 0 && B * ceil_div(C, channels) * ceil_div(N, span) <= INT32_MAX) {
      plan.shape[1] = channels;
      plan.shape[2] = span;
    } else {
      path = SumPath::SparseDirect;  // the staged rows do not fit
    }
  }
  plan.path = static_cast<int32_t>(path);
  const size_t slab = slab_bytes(B, C, P, elem, path);
  // The transposed sums take radix rows for dense rows where they fit (GatherRowsCounted at 1:
  // counted rows). With fewer entries than targets the counted rows were ahead (B8 C256 N262144
  // P131072 float16: 1.86 against 1.89 ms).
  if (path == SumPath::Transposed && P * T > N && plan.shape[0] == 1 && radix_rows_fit(B, N, P, T) &&
      tuning_or(Knob::GatherRowsCounted, 0) != 1) {
    plan.shape[1] = 1;
    RadixRows rows;
    if (carve_radix_rows(nullptr, B, N, P, T, slab, &rows) == nullptr)
      plan.workspace_bytes = rows.total_bytes;
    return plan;
  }
  if (plan.shape[0] == 1) {
    RowArrays<uint32_t> rows;
    if (carve_rows<uint32_t>(nullptr, B, N, P, T, slab, &rows) == nullptr)
      plan.workspace_bytes = rows.total_bytes;
  } else {
    RowArrays<unsigned long long> rows;
    if (carve_rows<unsigned long long>(nullptr, B, N, P, T, slab, &rows) == nullptr) {
      plan.workspace_bytes = rows.total_bytes;
    }
  }
  return plan;
}

}  // namespace cuda_detail
}  // namespace pointops

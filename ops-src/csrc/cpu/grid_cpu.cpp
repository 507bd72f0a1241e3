// grid_cluster on CPU (kernels.h): the per-dimension bounds of pos when start or end is missing
// (row chunks in parallel, then a serial merge of the chunks), the grid's strides, then the ids.
// The arithmetic is the torch expression the op replaces, element by element: subtract and
// divide in pos's dtype, truncate toward zero, int64 products and sums; where an int64 result
// would wrap (too many cells, a point far outside the grid) the op fails instead.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.h"
#include "parallel.h"

namespace pointops {

namespace {

constexpr int64_t kRowGrain = 16384;
constexpr uint64_t kMaxId = static_cast<uint64_t>(INT64_MAX);

constexpr const char* kBadSize =
    "size holds a value that is not finite and > 0 (cell sizes must be positive)";
constexpr const char* kBadStart = "start holds nan or inf";
constexpr const char* kBadEnd = "end holds nan or inf";
constexpr const char* kPosNotFinite = "pos holds nan or inf";
constexpr const char* kEndBelowStart =
    "end is below start along some dimension (start and end default to the minimum and maximum of "
    "pos); the grid needs end >= start";
constexpr const char* kTooManyCells =
    "the grid has more cells than int64 ids can number (the product over the dimensions of "
    "trunc((end - start) / size) + 1 exceeds 2^63 - 1); use a larger size";
constexpr const char* kIdOverflow =
    "a point's voxel id does not fit in int64 (a point far outside the grid from start to end)";

// torch.min / torch.max: a NaN wins.
template <class T>
inline T nan_min(T a, T b) {
  return (b < a || std::isnan(b)) ? b : a;
}
template <class T>
inline T nan_max(T a, T b) {
  return (b > a || std::isnan(b)) ? b : a;
}

// trunc(q) as int64, like torch's .to(torch.long); false for NaN, +-inf and |q| >= 2^63, where
// the C++ cast would be undefined.
template <class T>
inline bool truncate_to_int64(T q, int64_t* out) {
  const T limit = static_cast<T>(9223372036854775808.0);  // 2^63, exact in float and double
  if (!(q >= -limit && q < limit)) {
    *out = 0;
    return false;
  }
  *out = static_cast<int64_t>(q);
  return true;
}

// id += cell * stride; false where the term or the sum would leave [-(2^63 - 1), 2^63 - 1]
// (INT64_MIN stays free: it is the CUDA kernels' poison). bound = kMaxId / stride.
inline bool add_cell(int64_t cell, int64_t stride, int64_t bound, int64_t* id) {
  if (cell > bound || cell < -bound) return false;
  const int64_t term = cell * stride;
  if (term > 0 ? *id > INT64_MAX - term : *id < -INT64_MAX - term) return false;
  *id += term;
  return true;
}

// Per-dimension minimum and maximum of pos [N, D], N >= 1.
template <class T>
void column_bounds(const T* pos, int64_t N, int64_t D, std::vector<T>* lo, std::vector<T>* hi) {
  const int64_t chunks = (N + kRowGrain - 1) / kRowGrain;
  std::vector<T> part_lo(static_cast<size_t>(chunks * D)), part_hi(static_cast<size_t>(chunks * D));
  cpu::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      T* l = part_lo.data() + c * D;
      T* h = part_hi.data() + c * D;
      const int64_t r0 = c * kRowGrain, r1 = std::min(N, r0 + kRowGrain);
      std::copy(pos + r0 * D, pos + (r0 + 1) * D, l);
      std::copy(pos + r0 * D, pos + (r0 + 1) * D, h);
      for (int64_t r = r0 + 1; r < r1; ++r) {
        const T* row = pos + r * D;
        for (int64_t d = 0; d < D; ++d) {
          l[d] = nan_min(l[d], row[d]);
          h[d] = nan_max(h[d], row[d]);
        }
      }
    }
  });
  lo->assign(part_lo.begin(), part_lo.begin() + D);
  hi->assign(part_hi.begin(), part_hi.begin() + D);
  for (int64_t c = 1; c < chunks; ++c) {
    for (int64_t d = 0; d < D; ++d) {
      (*lo)[d] = nan_min((*lo)[d], part_lo[c * D + d]);
      (*hi)[d] = nan_max((*hi)[d], part_hi[c * D + d]);
    }
  }
}

// Origin and x-fastest strides of the grid (and each stride's bound for add_cell), or the
// problem that leaves it without one.
template <class T>
Status grid_strides(const T* pos, const T* size, const T* start, const T* end, int64_t N, int64_t D,
                    std::vector<T>* origin, std::vector<int64_t>* stride, std::vector<int64_t>* bound) {
  std::vector<T> lo, hi;
  if (start == nullptr || end == nullptr) column_bounds(pos, N, D, &lo, &hi);
  uint64_t cells_so_far = 1;
  for (int64_t d = 0; d < D; ++d) {
    if (!(size[d] > 0 && std::isfinite(size[d]))) return kBadSize;
    if (start != nullptr && !std::isfinite(start[d])) return kBadStart;
    if (end != nullptr && !std::isfinite(end[d])) return kBadEnd;
    const T a = start != nullptr ? start[d] : lo[d];
    const T b = end != nullptr ? end[d] : hi[d];
    // computed bounds are non-finite only where pos is
    if (!std::isfinite(a) || !std::isfinite(b)) return kPosNotFinite;
    if (b < a) return kEndBelowStart;
    int64_t cells = 0;
    if (!truncate_to_int64((b - a) / size[d], &cells)) return kTooManyCells;
    const uint64_t count = static_cast<uint64_t>(cells) + 1;  // <= 2^63
    if (count > kMaxId / cells_so_far) return kTooManyCells;
    (*origin)[d] = a;
    (*stride)[d] = static_cast<int64_t>(cells_so_far);
    (*bound)[d] = static_cast<int64_t>(kMaxId / cells_so_far);
    cells_so_far *= count;
  }
  return nullptr;
}

template <class T>
Status grid_ids(const T* pos, const T* size, const T* start, const T* end, int64_t N, int64_t D,
                int64_t* out) {
  std::vector<T> origin(static_cast<size_t>(D));
  std::vector<int64_t> stride(static_cast<size_t>(D)), bound(static_cast<size_t>(D));
  if (const Status st = grid_strides(pos, size, start, end, N, D, &origin, &stride, &bound)) return st;
  constexpr int kNotFinite = 1, kOverflow = 2;
  std::atomic<int> problems{0};
  cpu::parallel_for(0, N, kRowGrain, [&](int64_t r0, int64_t r1) {
    int found = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = pos + r * D;
      int64_t id = 0;
      for (int64_t d = 0; d < D; ++d) {
        int64_t cell = 0;
        if (!truncate_to_int64((row[d] - origin[d]) / size[d], &cell)) {
          found |= std::isfinite(row[d]) ? kOverflow : kNotFinite;
        } else if (!add_cell(cell, stride[d], bound[d], &id)) {
          found |= kOverflow;
        }
      }
      out[r] = id;
    }
    if (found != 0) problems.fetch_or(found, std::memory_order_relaxed);
  });
  const int found = problems.load();
  if (found & kNotFinite) return kPosNotFinite;
  return found != 0 ? kIdOverflow : nullptr;
}

}  // namespace

Status grid_cluster_cpu(Dtype dt, const void* pos, const void* size, const void* start, const void* end,
                        int64_t N, int64_t D, int64_t* out) {
  if (N <= 0) return nullptr;
  Status status = nullptr;
  const Status dtype_status = cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    status = grid_ids(static_cast<const T*>(pos), static_cast<const T*>(size), static_cast<const T*>(start),
                      static_cast<const T*>(end), N, D, out);
  });
  return dtype_status != nullptr ? dtype_status : status;
}

}  // namespace pointops

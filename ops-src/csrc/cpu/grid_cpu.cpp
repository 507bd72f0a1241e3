// grid_cluster on CPU (kernels.h): the per-dimension bounds of pos when start or end is missing
// (row chunks in parallel, then a serial merge of the chunks), the grid's strides, then the ids.
// The arithmetic is the torch expression the op replaces, element by element: subtract and
// divide in pos's dtype, truncate toward zero, int64 products and sums wrapping (done in uint64,
// where wrapping is defined).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "common.h"
#include "parallel.h"

namespace pointops {

namespace {

constexpr int64_t kRowGrain = 16384;

constexpr const char* kBadSize =
    "size holds a value that is not finite and > 0 (cell sizes must be positive)";
constexpr const char* kBadBounds = "start or end holds a non-finite value";
constexpr const char* kBadPos =
    "pos holds a non-finite coordinate, or one whose cell index (pos - start) / size does not fit "
    "in int64";
constexpr const char* kTooManyCells =
    "(end - start) / size does not fit in int64 along some dimension (size is too small for the "
    "extent of the grid)";

// torch.min / torch.max: a NaN wins.
template <class T>
inline T nan_min(T a, T b) {
  return (b < a || std::isnan(b)) ? b : a;
}
template <class T>
inline T nan_max(T a, T b) {
  return (b > a || std::isnan(b)) ? b : a;
}

// trunc(q) as int64 (then uint64 for the wrapping arithmetic), like torch's .to(torch.long);
// false for NaN, +-inf and |q| >= 2^63, where the C++ cast would be undefined.
template <class T>
inline bool truncate_to_int64(T q, uint64_t* out) {
  const T limit = static_cast<T>(9223372036854775808.0);  // 2^63, exact in float and double
  if (!(q >= -limit && q < limit)) {
    *out = 0;
    return false;
  }
  *out = static_cast<uint64_t>(static_cast<int64_t>(q));
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

template <class T>
Status grid_ids(const T* pos, const T* size, const T* start, const T* end, int64_t N, int64_t D,
                int64_t* out) {
  std::vector<T> lo, hi;
  if (start == nullptr || end == nullptr) column_bounds(pos, N, D, &lo, &hi);
  std::vector<T> origin(static_cast<size_t>(D));
  std::vector<uint64_t> stride(static_cast<size_t>(D));
  uint64_t step = 1;
  for (int64_t d = 0; d < D; ++d) {
    if (!(size[d] > 0 && std::isfinite(size[d]))) return kBadSize;
    const T a = start != nullptr ? start[d] : lo[d];
    const T b = end != nullptr ? end[d] : hi[d];
    // computed bounds are non-finite only where pos is
    if (!std::isfinite(a) || !std::isfinite(b))
      return start != nullptr && end != nullptr ? kBadBounds : kBadPos;
    uint64_t cells = 0;
    if (!truncate_to_int64((b - a) / size[d], &cells)) return kTooManyCells;
    origin[d] = a;
    stride[d] = step;
    step *= cells + 1;
  }
  std::atomic<bool> bad{false};
  cpu::parallel_for(0, N, kRowGrain, [&](int64_t r0, int64_t r1) {
    bool ok = true;
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = pos + r * D;
      uint64_t id = 0;
      for (int64_t d = 0; d < D; ++d) {
        uint64_t cell = 0;
        ok = truncate_to_int64((row[d] - origin[d]) / size[d], &cell) && ok;
        id += cell * stride[d];
      }
      out[r] = static_cast<int64_t>(id);
    }
    if (!ok) bad.store(true, std::memory_order_relaxed);
  });
  return bad.load() ? kBadPos : nullptr;
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

// Farthest point sampling on CPU. Clouds run in parallel. Large clouds use the kd-tree pruned
// sampler (fps_kdtree.cpp); small ones, and clouds with non-finite coordinates, a brute-force
// scan, which splits a single huge cloud into fixed chunks per step so the argmax (and hence the
// result) does not depend on thread count. Both give identical indices.
#include <algorithm>
#include <vector>

#include "../tuning.h"
#include "common.h"
#include "fps_kdtree.h"
#include "parallel.h"

namespace pointops {

namespace {

constexpr int64_t kChunk = 16384;  // points per chunk in the in-cloud parallel path
// Splitting one cloud costs a thread barrier per pick. Below this size a pick's work is too
// small to pay for it, and on a loaded machine (more runnable threads than cores) barriers
// cost milliseconds: measured 0.18 s serial vs 3-8 s split for N = 1e5, k = 1024 on 2 busy cores.
constexpr int64_t kInnerParallelMinN = 262144;

// The kd-tree costs a build (~180 ns a point at N = 1e5, less for small clouds that fit in
// cache) and then saves most of the brute-force scan's ~1.4 ns per point and pick. Measured
// crossover on one thread: about 64 picks up to 2048 points, about 128 picks beyond (see
// docs/performance-cpu.md). A brute-force scan split over threads does not lower it: its per-pick
// barriers cost more than the split saves (N = 3e5, 100 picks: 650 ms split vs 176 ms kd-tree).
constexpr int64_t kKdTreeMinN = 512;
constexpr int64_t kKdTreeMinPicksSmall = 64;  // clouds of up to kKdTreeSmallN points
constexpr int64_t kKdTreeSmallN = 2048;
constexpr int64_t kKdTreeMinPicks = 128;

// Which sampler to use: chosen by size, unless the CpuFpsPath knob forces one (tests compare
// the two).
enum class FpsPath { Auto, Brute, KdTree };

FpsPath requested_path() {
  switch (tuning(Knob::CpuFpsPath)) {
    case 0: return FpsPath::Brute;
    case 1: return FpsPath::KdTree;
    default: return FpsPath::Auto;
  }
}

bool use_kdtree(FpsPath path, int64_t n, int64_t picks) {
  if (path != FpsPath::Auto) return path == FpsPath::KdTree;
  if (n < kKdTreeMinN) return false;
  const int64_t min_picks = n <= kKdTreeSmallN ? kKdTreeMinPicksSmall : kKdTreeMinPicks;
  return picks >= min_picks;
}

template <typename T>
struct Best {
  T dist;
  int64_t index;
};

// Updates min distances of points [begin, end) to the newest pick and returns the farthest
// point of the range (lowest index among equals).
template <typename T>
Best<T> update_range(const T* xyz, const T* picked, T* mind, int64_t begin, int64_t end) {
  Best<T> best{T(-1), begin};
  for (int64_t j = begin; j < end; ++j) {
    T d = cpu::squared_distance(xyz + 3 * j, picked);
    T m = mind[j];
    if (d < m) {
      m = d;
      mind[j] = d;
    }
    if (m > best.dist) {
      best.dist = m;
      best.index = j;
    }
  }
  return best;
}

template <typename T>
void sample_cloud(const T* xyz, int64_t n, int64_t K, int64_t start, int64_t* idx, bool split_cloud,
                  FpsPath path) {
  const int64_t picks = std::min(K, n);
  for (int64_t i = picks; i < K; ++i) idx[i] = -1;
  // An empty cloud, or a cloud asked for no picks: idx[0] is the next cloud's slot (or past the
  // output), so nothing may be written.
  if (picks <= 0) return;
  if (use_kdtree(path, n, picks) && cpu::sample_cloud_kdtree(xyz, n, picks, std::min(start, n - 1), idx)) {
    return;
  }
  std::vector<T> mind(static_cast<size_t>(n), cpu::infinity<T>());
  int64_t current = std::min(start, n - 1);
  idx[0] = current;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<Best<T>> partial(split_cloud ? static_cast<size_t>(chunks) : 0);
  for (int64_t s = 1; s < picks; ++s) {
    const T* picked = xyz + 3 * current;
    Best<T> best;
    if (split_cloud) {
      cpu::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          partial[c] = update_range(xyz, picked, mind.data(), c * kChunk, std::min(n, (c + 1) * kChunk));
        }
      });
      best = partial[0];
      for (int64_t c = 1; c < chunks; ++c) {
        if (partial[c].dist > best.dist) best = partial[c];  // strict: lower chunk wins ties
      }
    } else {
      best = update_range(xyz, picked, mind.data(), 0, n);
    }
    current = best.index;
    idx[s] = current;
  }
}

// Rows ptr[b] .. ptr[b+1]-1 of `rows`, clamped so that a bad row pointer never addresses rows
// outside the array (the binding rejects such pointers; direct kernel calls stay memory safe).
struct PackedCloud {
  int64_t begin, count;
};

PackedCloud packed_cloud(const int64_t* ptr, int64_t b, int64_t rows) {
  auto clamp = [rows](int64_t r) { return r < 0 ? 0 : (r > rows ? rows : r); };
  const int64_t begin = clamp(ptr[b]), end = clamp(ptr[b + 1]);
  return PackedCloud{begin, end > begin ? end - begin : 0};
}

}  // namespace

Status furthest_point_sample_packed_cpu(Dtype dt, const void* xyz, const int64_t* ptr, int64_t P,
                                        const int64_t* sample_ptr, int64_t S, int64_t B, int64_t* idx) {
  if (B <= 0 || S <= 0) return nullptr;
  const FpsPath path = requested_path();
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    const T* points = static_cast<const T*>(xyz);
    auto sample = [&](int64_t b, bool may_split) {
      const PackedCloud cloud = packed_cloud(ptr, b, P), out = packed_cloud(sample_ptr, b, S);
      int64_t* picks = idx + out.begin;
      const bool split =
          may_split && cloud.count >= kInnerParallelMinN && !use_kdtree(path, cloud.count, out.count);
      sample_cloud(points + 3 * cloud.begin, cloud.count, out.count, 0, picks, split, path);
      for (int64_t k = 0; k < out.count && k < cloud.count; ++k) picks[k] += cloud.begin;  // global rows
    };
    if (B < cpu::thread_count()) {  // few clouds: one after another, huge ones on all threads
      for (int64_t b = 0; b < B; ++b) sample(b, true);
      return;
    }
    cpu::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) sample(b, false);
    });
  });
}

Status furthest_point_sample_cpu(Dtype dt, const void* xyz, const int64_t* lengths, int64_t B, int64_t N,
                                 int64_t K, int64_t start, int64_t* idx) {
  if (B <= 0 || K <= 0) return nullptr;
  if (start < 0) start = 0;
  const FpsPath path = requested_path();
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    const T* points = static_cast<const T*>(xyz);
    // Few huge clouds for the brute-force scan: one after another, each on all threads. The
    // kd-tree sampler runs each cloud on one thread (a pick touches too little to split).
    const bool split =
        B < cpu::thread_count() && N >= kInnerParallelMinN && !use_kdtree(path, N, std::min(K, N));
    if (split) {
      for (int64_t b = 0; b < B; ++b) {
        sample_cloud(points + 3 * N * b, cpu::valid_count(lengths, b, N), K, start, idx + K * b, true, path);
      }
      return;
    }
    cpu::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        sample_cloud(points + 3 * N * b, cpu::valid_count(lengths, b, N), K, start, idx + K * b, false, path);
      }
    });
  });
}

}  // namespace pointops

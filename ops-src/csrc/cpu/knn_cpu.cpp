// k nearest neighbours on CPU (three_nn is knn with K = 3), padded and packed layouts. Each cloud
// is searched by a brute-force scan or through a kd-tree (spatial_index_cpu.cpp), whichever the
// cost model expects to be faster; both give identical results.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "neighbor_batch_cpu.h"
#include "spatial_index_cpu.h"

namespace pointops {

namespace {

template <typename T>
void fill_empty(int64_t r0, int64_t r1, int64_t K, T* dist2, int64_t* idx) {
  std::fill(dist2 + K * r0, dist2 + K * r1, cpu::infinity<T>());
  std::fill(idx + K * r0, idx + K * r1, int64_t{-1});
}

// Expected single-thread cost (ns) of m queries on one cloud of n points: the scan looks at
// every point (a few ns each, plus the insertions of a K-best list); the tree pays its build,
// then per query a descent and the leaves around the K-th neighbour. Measured on one core of
// this project's CI machine (2-core AMD EPYC); only the crossover matters.
bool knn_wants_tree(int64_t n, int64_t m, int64_t K) {
  if (2 * K > n) return false;  // most of the cloud is returned anyway: nothing to prune
  const double nd = static_cast<double>(n), md = static_cast<double>(m);
  const double kd = static_cast<double>(K);
  const double levels = std::log2(nd / 32.0 + 1.0);
  const double scan = md * (1.5 * nd + 20.0 * kd * std::log2(nd / kd + 1.0));
  const double tree = 130.0 * nd + md * (60.0 * levels + 25.0 * kd + 150.0);
  return tree < scan;
}

template <typename T>
void knn_clouds(const T* points, const T* queries, const std::vector<cpu::CloudSpan>& clouds, int64_t K,
                T* dist2, int64_t* idx, cpu::SearchPath path) {
  auto wants_tree = [&](const cpu::CloudSpan& c) {
    if (path != cpu::SearchPath::Auto) return path == cpu::SearchPath::KdTree;
    return knn_wants_tree(c.points, c.queries, K);
  };
  auto keep_tree = [](const cpu::CloudSpan&, const cpu::KdTree<T>&) { return true; };
  cpu::search_clouds(
      points, queries, clouds, wants_tree, keep_tree,
      [&](const cpu::CloudSpan& c, const cpu::KdTree<T>* tree, const int64_t* rows, int64_t row_count) {
        std::vector<cpu::Neighbour<T>> found(static_cast<size_t>(std::min(K, c.points)));
        const T* cloud = points + 3 * c.point_begin;
        for (int64_t i = 0; i < row_count; ++i) {
          const int64_t r = rows[i];
          const T* q = queries + 3 * r;
          const int64_t kept = tree != nullptr && cpu::finite_point(q)
                                   ? tree->knn(q, K, found.data())
                                   : cpu::knn_scan(cloud, c.points, q, K, found.data());
          T* d2 = dist2 + K * r;
          int64_t* id = idx + K * r;
          for (int64_t s = 0; s < kept; ++s) {
            d2[s] = found[s].d2;
            id[s] = found[s].index + c.index_offset;
          }
          for (int64_t s = kept; s < K; ++s) {
            d2[s] = cpu::infinity<T>();
            id[s] = -1;
          }
        }
      });
}

}  // namespace

Status knn_cpu(Dtype dt, const void* xyz, const void* query, const int64_t* lengths,
               const int64_t* query_lengths, int64_t B, int64_t N, int64_t M, int64_t K, void* dist2,
               int64_t* idx) {
  if (B <= 0 || M <= 0 || K <= 0) return nullptr;
  const cpu::SearchPath path = cpu::requested_search_path();
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    T* d2 = static_cast<T*>(dist2);
    const std::vector<cpu::CloudSpan> clouds = cpu::padded_clouds(lengths, query_lengths, B, N, M);
    cpu::for_each_uncovered_row(clouds, B * M,
                                [&](int64_t r0, int64_t r1) { fill_empty(r0, r1, K, d2, idx); });
    knn_clouds(static_cast<const T*>(xyz), static_cast<const T*>(query), clouds, K, d2, idx, path);
  });
}

Status knn_packed_cpu(Dtype dt, const void* xyz, const int64_t* ptr, int64_t P, const void* query,
                      const int64_t* qptr, int64_t Q, int64_t B, int64_t K, void* dist2, int64_t* idx) {
  if (Q <= 0 || K <= 0) return nullptr;
  const cpu::SearchPath path = cpu::requested_search_path();
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    T* d2 = static_cast<T*>(dist2);
    const std::vector<cpu::CloudSpan> clouds = cpu::packed_clouds(ptr, P, qptr, Q, B);
    cpu::for_each_uncovered_row(clouds, Q, [&](int64_t r0, int64_t r1) { fill_empty(r0, r1, K, d2, idx); });
    knn_clouds(static_cast<const T*>(xyz), static_cast<const T*>(query), clouds, K, d2, idx, path);
  });
}

}  // namespace pointops

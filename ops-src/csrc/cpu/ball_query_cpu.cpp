// Ball query on CPU, padded and packed layouts. Each cloud is searched by a brute-force scan (in
// index order, stopping at the K-th hit) or through a kd-tree (spatial_index_cpu.cpp), whichever
// the cost model expects to be faster; both give identical results.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "neighbor_batch_cpu.h"
#include "spatial_index_cpu.h"

namespace pointops {

namespace {

// Writes one query's row from its hits (ascending index): the first `hits` slots, then the
// first hit repeated, or -1/+inf when there is none.
template <typename T>
void write_row(const cpu::Neighbour<T>* found, int64_t hits, int64_t K, int64_t offset, int64_t* idx,
               int64_t* count, T* dist2) {
  *count = hits;
  const int64_t pad_index = hits > 0 ? found[0].index + offset : -1;
  const T pad_d2 = hits > 0 ? found[0].d2 : cpu::infinity<T>();
  for (int64_t s = 0; s < K; ++s) {
    idx[s] = s < hits ? found[s].index + offset : pad_index;
    if (dist2 != nullptr) dist2[s] = s < hits ? found[s].d2 : pad_d2;
  }
}

// Expected single-thread cost (ns), as for kNN (knn_cpu.cpp), of m ball queries through a
// kd-tree: the build, then per query a descent to the leaves the ball overlaps (the K lowest
// hits, once found, prune the rest). The scan's cost depends on where the hits are (it stops
// at the K-th hit in index order), which the cloud's shape does not tell: it is measured on a
// sample of the queries instead (scan_probe).
double ball_tree_cost(int64_t n, int64_t m, int64_t K) {
  const double levels = std::log2(static_cast<double>(n) / 32.0 + 1.0);
  return 130.0 * static_cast<double>(n) +
         static_cast<double>(m) * (60.0 * levels + 10.0 * static_cast<double>(K) + 150.0);
}

constexpr int64_t kProbes = 16;
constexpr double kScanNsPerPoint = 1.1;

// Runs the scan for kProbes queries spread over the cloud's, each until its K-th hit or until
// it has looked at `budget` points (then counted as a scan of the whole cloud); returns the
// estimated cost (ns) of scanning for all m queries.
template <typename T>
double scan_probe(const T* cloud, int64_t n, const T* queries, int64_t m, T r2, bool inclusive, int64_t K,
                  int64_t budget, cpu::Neighbour<T>* found) {
  double points = 0;
  for (int64_t p = 0; p < kProbes; ++p) {
    const T* q = queries + 3 * (p * m / kProbes);
    int64_t work = 0;
    const int64_t limit = std::min(n, budget);
    const bool done = cpu::ball_scan(cloud, limit, q, r2, inclusive, K, found, &work) == K;
    points += done || limit == n ? static_cast<double>(work) : static_cast<double>(n);
  }
  return static_cast<double>(m) * (kScanNsPerPoint * points / kProbes + 30.0);
}

template <typename T>
void ball_query_clouds(const T* points, const T* queries, const std::vector<cpu::CloudSpan>& clouds,
                       double radius, bool inclusive, int64_t K, int64_t* idx, int64_t* count, T* dist2,
                       cpu::SearchPath path) {
  const T r2 = static_cast<T>(radius * radius);
  auto wants_tree = [&](const cpu::CloudSpan& c) {
    if (path != cpu::SearchPath::Auto) return path == cpu::SearchPath::KdTree;
    const double tree = ball_tree_cost(c.points, c.queries, K);
    const double n = static_cast<double>(c.points), m = static_cast<double>(c.queries);
    if (kScanNsPerPoint * n * m <= tree) return false;  // even scanning everything is cheaper
    // The scan is worth measuring up to a few times the tree's cost per query.
    const int64_t budget = static_cast<int64_t>(4.0 * tree / (m * kScanNsPerPoint)) + 1;
    std::vector<cpu::Neighbour<T>> found(static_cast<size_t>(K));
    return tree < scan_probe(points + 3 * c.point_begin, c.points, queries + 3 * c.query_begin, c.queries, r2,
                             inclusive, K, budget, found.data());
  };
  // The tree's cost above is an estimate for evenly spread points; in clustered clouds a ball
  // can hold far more hits, where the tree is slow. Once the tree exists, a few of the cloud's
  // queries are run both ways (the scan on a budget of twice the tree's work) and the cloud
  // keeps the tree only if it did less work.
  auto keep_tree = [&](const cpu::CloudSpan& c, const cpu::KdTree<T>& tree) {
    if (path != cpu::SearchPath::Auto || c.queries < kProbes) return true;
    std::vector<cpu::Neighbour<T>> found(static_cast<size_t>(K));
    const T* cloud = points + 3 * c.point_begin;
    int64_t tree_work = 0, scan_work = 0;
    for (int64_t p = 0; p < kProbes; ++p) {
      const T* q = queries + 3 * (c.query_begin + p * c.queries / kProbes);
      if (!cpu::finite_point(q)) continue;
      int64_t work = 0;
      tree.ball(q, r2, inclusive, K, found.data(), &work);
      tree_work += work;
      const int64_t budget = std::min(c.points, 2 * work + 1);
      if (cpu::ball_scan(cloud, budget, q, r2, inclusive, K, found.data(), &scan_work) < K &&
          budget < c.points) {
        scan_work += c.points;  // not done within the budget: the scan loses this query
      }
    }
    return tree_work <= scan_work;
  };
  cpu::search_clouds(
      points, queries, clouds, wants_tree, keep_tree,
      [&](const cpu::CloudSpan& c, const cpu::KdTree<T>* tree, const int64_t* rows, int64_t row_count) {
        std::vector<cpu::Neighbour<T>> found(static_cast<size_t>(K));
        const T* cloud = points + 3 * c.point_begin;
        for (int64_t i = 0; i < row_count; ++i) {
          const int64_t r = rows[i];
          const T* q = queries + 3 * r;
          const int64_t hits = tree != nullptr && cpu::finite_point(q)
                                   ? tree->ball(q, r2, inclusive, K, found.data())
                                   : cpu::ball_scan(cloud, c.points, q, r2, inclusive, K, found.data());
          write_row(found.data(), hits, K, c.index_offset, idx + K * r, count + r,
                    dist2 == nullptr ? nullptr : dist2 + K * r);
        }
      });
}

template <typename T>
void fill_empty(int64_t r0, int64_t r1, int64_t K, int64_t* idx, int64_t* count, T* dist2) {
  std::fill(idx + K * r0, idx + K * r1, int64_t{-1});
  std::fill(count + r0, count + r1, int64_t{0});
  if (dist2 != nullptr) std::fill(dist2 + K * r0, dist2 + K * r1, cpu::infinity<T>());
}

}  // namespace

Status ball_query_cpu(Dtype dt, const void* xyz, const void* query, const int64_t* lengths,
                      const int64_t* query_lengths, int64_t B, int64_t N, int64_t M, double radius,
                      bool inclusive, int64_t K, int64_t* idx, int64_t* count, void* dist2) {
  if (B <= 0 || M <= 0 || K <= 0) return nullptr;
  const cpu::SearchPath path = cpu::requested_search_path();
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    T* d2 = static_cast<T*>(dist2);
    const std::vector<cpu::CloudSpan> clouds = cpu::padded_clouds(lengths, query_lengths, B, N, M);
    cpu::for_each_uncovered_row(clouds, B * M,
                                [&](int64_t r0, int64_t r1) { fill_empty(r0, r1, K, idx, count, d2); });
    ball_query_clouds(static_cast<const T*>(xyz), static_cast<const T*>(query), clouds, radius, inclusive, K,
                      idx, count, d2, path);
  });
}

Status ball_query_packed_cpu(Dtype dt, const void* xyz, const int64_t* ptr, int64_t P, const void* query,
                             const int64_t* qptr, int64_t Q, int64_t B, double radius, bool inclusive,
                             int64_t K, int64_t* idx, int64_t* count, void* dist2) {
  if (Q <= 0 || K <= 0) return nullptr;
  const cpu::SearchPath path = cpu::requested_search_path();
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    T* d2 = static_cast<T*>(dist2);
    const std::vector<cpu::CloudSpan> clouds = cpu::packed_clouds(ptr, P, qptr, Q, B);
    cpu::for_each_uncovered_row(clouds, Q,
                                [&](int64_t r0, int64_t r1) { fill_empty(r0, r1, K, idx, count, d2); });
    ball_query_clouds(static_cast<const T*>(xyz), static_cast<const T*>(query), clouds, radius, inclusive, K,
                      idx, count, d2, path);
  });
}

}  // namespace pointops

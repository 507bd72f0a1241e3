// Ball query on CPU, padded and packed layouts. Each cloud is searched by brute force (a scan in
// index order that stops at the K-th hit) or through a kd-tree (spatial_index_cpu.cpp), whichever
// the cost model expects to be faster; both give identical results.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "neighbor_batch_cpu.h"
#include "parallel.h"
#include "spatial_index_cpu.h"

namespace pointops {

namespace {

// Writes one query's row: `found` hits (ascending index, local indices plus `offset` already
// in idx), padded with the first hit, or -1/+inf when there is none.
template <typename T>
void pad_row(int64_t found, int64_t K, int64_t* idx, int64_t* count, T* dist2) {
  *count = found;
  const int64_t pad_index = found > 0 ? idx[0] : -1;
  const T pad_dist = found > 0 && dist2 != nullptr ? dist2[0] : cpu::infinity<T>();
  for (int64_t s = found; s < K; ++s) {
    idx[s] = pad_index;
    if (dist2 != nullptr) dist2[s] = pad_dist;
  }
}

template <typename T>
void ball_brute_force(const T* cloud, int64_t n, const T* q, T r2, bool inclusive, int64_t K,
                      int64_t offset, int64_t* idx, int64_t* count, T* dist2) {
  int64_t hits = 0;
  for (int64_t j = 0; j < n && hits < K; ++j) {
    T d = cpu::squared_distance(cloud + 3 * j, q);
    bool hit = inclusive ? (d <= r2) : (d < r2);
    if (hit) {
      idx[hits] = j + offset;
      if (dist2 != nullptr) dist2[hits] = d;
      ++hits;
    }
  }
  pad_row(hits, K, idx, count, dist2);
}

// Expected cost, in nanoseconds on one core, of m queries on one cloud by brute force and
// through a kd-tree. The hits per ball are estimated from the cloud's bounding box as if the
// points were uniform in it (a flat axis does not thin them out). The scan in index order stops
// after about K*n/hits points; the tree visits the leaves the ball overlaps, and once it has K
// hits only subtrees with lower indices.
bool ball_wants_tree(int64_t n, int64_t m, int64_t K, double radius, const double* extent) {
  double fraction = 1.0;
  for (int a = 0; a < 3; ++a) {
    if (extent[a] > 2.0 * radius) fraction *= 2.0 * radius / extent[a];
  }
  const double nd = static_cast<double>(n), md = static_cast<double>(m);
  const double hits = nd * fraction * (fraction < 1.0 ? 0.6 : 1.0);
  const double scanned = hits > static_cast<double>(K) ? std::min(nd, K * nd / hits) : nd;
  const double brute = md * (scanned + 20.0);
  const double levels = std::log2(nd / 16.0 + 1.0);
  const double visited = std::pow(std::cbrt(std::min(hits, 8.0 * K)) + 5.0, 3.0);
  const double tree = 12.0 * nd * (levels + 1.0) + md * (40.0 * levels + 2.0 * visited + 200.0);
  return tree < brute;
}

template <typename T>
void cloud_extent(const T* points, int64_t n, double* extent) {
  T lo[3] = {cpu::infinity<T>(), cpu::infinity<T>(), cpu::infinity<T>()};
  T hi[3] = {-cpu::infinity<T>(), -cpu::infinity<T>(), -cpu::infinity<T>()};
  for (int64_t i = 0; i < n; ++i) {
    for (int a = 0; a < 3; ++a) {
      lo[a] = std::min(lo[a], points[3 * i + a]);
      hi[a] = std::max(hi[a], points[3 * i + a]);
    }
  }
  for (int a = 0; a < 3; ++a) extent[a] = n > 0 ? static_cast<double>(hi[a]) - lo[a] : 0.0;
}

template <typename T>
void ball_query_clouds(const T* points, const T* queries, const std::vector<cpu::CloudSpan>& clouds,
                       double radius, bool inclusive, int64_t K, int64_t* idx, int64_t* count,
                       T* dist2, cpu::SearchPath path) {
  const T r2 = static_cast<T>(radius * radius);
  auto wants_tree = [&](const cpu::CloudSpan& c) {
    if (path != cpu::SearchPath::Auto) return path == cpu::SearchPath::KdTree;
    double extent[3];
    cloud_extent(points + 3 * c.point_begin, c.points, extent);
    return ball_wants_tree(c.points, c.queries, K, radius, extent);
  };
  cpu::search_clouds(points, queries, clouds, wants_tree, [&](const cpu::CloudSpan& c,
                                                              const cpu::KdTree<T>* tree,
                                                              const int64_t* rows, int64_t row_count) {
    std::vector<cpu::Neighbour<T>> found(tree != nullptr ? static_cast<size_t>(K) : 0);
    const T* cloud = points + 3 * c.point_begin;
    for (int64_t i = 0; i < row_count; ++i) {
      const int64_t r = rows[i];
      const T* q = queries + 3 * r;
      int64_t* id = idx + K * r;
      T* d2 = dist2 == nullptr ? nullptr : dist2 + K * r;
      if (tree == nullptr || !cpu::finite_point(q)) {
        ball_brute_force(cloud, c.points, q, r2, inclusive, K, c.index_offset, id, count + r, d2);
        continue;
      }
      const int64_t hits = tree->ball(q, r2, inclusive, K, found.data());
      for (int64_t s = 0; s < hits; ++s) {
        id[s] = found[s].index + c.index_offset;
        if (d2 != nullptr) d2[s] = found[s].d2;
      }
      pad_row(hits, K, id, count + r, d2);
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
                      const int64_t* query_lengths, int64_t B, int64_t N, int64_t M,
                      double radius, bool inclusive, int64_t K, int64_t* idx, int64_t* count,
                      void* dist2) {
  if (B <= 0 || M <= 0 || K <= 0) return nullptr;
  const cpu::SearchPath path = cpu::requested_search_path();
  if (path == cpu::SearchPath::Invalid) return cpu::kInvalidSearchPath;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    T* d2 = static_cast<T*>(dist2);
    const std::vector<cpu::CloudSpan> clouds = cpu::padded_clouds(lengths, query_lengths, B, N, M);
    cpu::for_each_uncovered_row(
        clouds, B * M, [&](int64_t r0, int64_t r1) { fill_empty(r0, r1, K, idx, count, d2); });
    ball_query_clouds(static_cast<const T*>(xyz), static_cast<const T*>(query), clouds, radius,
                      inclusive, K, idx, count, d2, path);
  });
}

Status ball_query_packed_cpu(Dtype dt, const void* xyz, const int64_t* ptr, int64_t P,
                             const void* query, const int64_t* qptr, int64_t Q, int64_t B,
                             double radius, bool inclusive, int64_t K, int64_t* idx,
                             int64_t* count, void* dist2) {
  if (Q <= 0 || K <= 0) return nullptr;
  const cpu::SearchPath path = cpu::requested_search_path();
  if (path == cpu::SearchPath::Invalid) return cpu::kInvalidSearchPath;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    T* d2 = static_cast<T*>(dist2);
    const int64_t clouds_count = std::max<int64_t>(B, 0);
    const std::vector<cpu::CloudSpan> clouds =
        cpu::packed_clouds(cpu::safe_row_pointer(ptr, clouds_count, std::max<int64_t>(P, 0)),
                           cpu::safe_row_pointer(qptr, clouds_count, Q), clouds_count);
    cpu::for_each_uncovered_row(
        clouds, Q, [&](int64_t r0, int64_t r1) { fill_empty(r0, r1, K, idx, count, d2); });
    ball_query_clouds(static_cast<const T*>(xyz), static_cast<const T*>(query), clouds, radius,
                      inclusive, K, idx, count, d2, path);
  });
}

}  // namespace pointops

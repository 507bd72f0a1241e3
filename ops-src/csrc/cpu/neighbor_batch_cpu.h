// The batch driver shared by kNN and ball query on CPU: both layouts (padded [B,N,3] with
// lengths, packed [P,3] with row pointers) become a list of per-cloud views, and one driver
// builds the kd-trees the cost model asks for and runs every query row on the thread pool.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../tuning.h"
#include "common.h"
#include "parallel.h"
#include "spatial_index_cpu.h"

namespace pointops {
namespace cpu {

// One cloud of a batch: its points are rows [point_begin, point_begin + points) of xyz, its
// queries rows [query_begin, query_begin + queries) of query, and query row r's results go to
// output row r. Written indices are index_offset + the point's index in the cloud.
struct CloudSpan {
  int64_t point_begin;
  int64_t points;
  int64_t query_begin;
  int64_t queries;
  int64_t index_offset;
};

// Padded layout: cloud b is rows b*N.. of xyz with lengths[b] valid points and rows b*M.. of
// query with query_lengths[b] valid queries; indices are local to the cloud.
inline std::vector<CloudSpan> padded_clouds(const int64_t* lengths, const int64_t* query_lengths, int64_t B,
                                            int64_t N, int64_t M) {
  std::vector<CloudSpan> clouds(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    clouds[b] = CloudSpan{b * N, valid_count(lengths, b, N), b * M, valid_count(query_lengths, b, M), 0};
  }
  return clouds;
}

// Row pointer ptr [B+1] made safe to follow: clamped to 0..rows and non-decreasing (a null
// pointer reads as all zeros: every cloud empty).
inline std::vector<int64_t> safe_row_pointer(const int64_t* ptr, int64_t B, int64_t rows) {
  std::vector<int64_t> out(static_cast<size_t>(B + 1));
  int64_t previous = 0;
  for (int64_t b = 0; b <= B; ++b) {
    const int64_t v = ptr == nullptr ? 0 : std::min(std::max(ptr[b], int64_t{0}), rows);
    previous = std::max(previous, v);
    out[b] = previous;
  }
  return out;
}

// Packed layout: cloud b is rows ptr[b]..ptr[b+1]-1 of xyz [P,3] and qptr[b]..qptr[b+1]-1 of
// query [Q,3]; indices are global rows of xyz. Row pointers are read through safe_row_pointer.
inline std::vector<CloudSpan> packed_clouds(const int64_t* ptr, int64_t P, const int64_t* qptr, int64_t Q,
                                            int64_t B) {
  B = std::max<int64_t>(B, 0);
  const std::vector<int64_t> p = safe_row_pointer(ptr, B, std::max<int64_t>(P, 0));
  const std::vector<int64_t> q = safe_row_pointer(qptr, B, std::max<int64_t>(Q, 0));
  std::vector<CloudSpan> clouds(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    clouds[b] = CloudSpan{p[b], p[b + 1] - p[b], q[b], q[b + 1] - q[b], p[b]};
  }
  return clouds;
}

// Calls fill(r0, r1) on every range of output rows in [0, rows) that no cloud's queries cover
// (padded: queries past a cloud's query length; packed: rows outside every cloud). The clouds
// must be in ascending, non-overlapping query order, as both layouts give.
template <class F>
void for_each_uncovered_row(const std::vector<CloudSpan>& clouds, int64_t rows, const F& fill) {
  int64_t next = 0;
  for (const CloudSpan& c : clouds) {
    if (c.query_begin > next) fill(next, std::min(c.query_begin, rows));
    next = std::max(next, c.query_begin + std::max<int64_t>(c.queries, 0));
  }
  if (next < rows) fill(next, rows);
}

// Below this many queries a cloud's queries are searched in their given order.
constexpr int64_t kSpatialOrderMinQueries = 256;

// Which search to use: the cost model per cloud, unless the CpuNeighborsPath knob forces one
// (tests compare the two).
enum class SearchPath { Auto, Brute, KdTree };

inline SearchPath requested_search_path() {
  switch (tuning(Knob::CpuNeighborsPath)) {
    case 0: return SearchPath::Brute;
    case 1: return SearchPath::KdTree;
    default: return SearchPath::Auto;
  }
}

template <typename T>
inline bool finite_point(const T* p) {
  return std::isfinite(p[0]) && std::isfinite(p[1]) && std::isfinite(p[2]);
}

// Queries of one cloud in an order that keeps consecutive searches in the same part of the
// tree (cache reuse): by cell of a coarse grid over the cloud's box, cells in Morton order,
// by counting sort. About m/2 cells, at most 128 per axis. Local query positions.
template <typename T>
std::vector<int64_t> spatial_query_order(const T* queries, int64_t m, const KdTree<T>& tree) {
  int bits = 1;
  while (bits < 7 && (int64_t{1} << (3 * (bits + 1))) <= m / 2) ++bits;
  const int64_t side = int64_t{1} << bits;
  double lo[3], scale[3];
  for (int a = 0; a < 3; ++a) {
    lo[a] = tree.box_lo()[a];
    const double extent = static_cast<double>(tree.box_hi()[a]) - lo[a];
    scale[a] = extent > 0 ? static_cast<double>(side) / extent : 0.0;
  }
  auto spread = [](uint32_t v) {  // bit i of v -> bit 3i
    uint32_t r = 0;
    for (int i = 0; i < 7; ++i) r |= ((v >> i) & 1u) << (3 * i);
    return r;
  };
  std::vector<uint32_t> cell(static_cast<size_t>(m));
  std::vector<int64_t> start(static_cast<size_t>(side * side * side + 1), 0);
  for (int64_t i = 0; i < m; ++i) {
    uint32_t code = 0;
    for (int a = 0; a < 3; ++a) {
      const double u = (static_cast<double>(queries[3 * i + a]) - lo[a]) * scale[a];
      // outside the box (or not finite): the nearest border cell
      const double top = static_cast<double>(side - 1);
      const uint32_t c = u >= 1.0 ? static_cast<uint32_t>(std::min(u, top)) : 0u;
      code |= spread(c) << a;
    }
    cell[i] = code;
    ++start[code + 1];
  }
  for (int64_t c = 0; c < side * side * side; ++c) start[c + 1] += start[c];
  std::vector<int64_t> order(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) order[start[cell[i]]++] = i;
  return order;
}

// Runs every query row of every cloud. wants_tree(cloud) is the cost model's choice; the
// trees it asks for are built first (clouds in parallel, or a lone large cloud's build spread
// over the pool) and kept if keep_tree(cloud, tree) confirms them; then search_rows(cloud,
// tree, rows, count) runs on blocks of query rows (global row numbers), tree null meaning
// brute force (chosen, or the cloud has non-finite coordinates). Tree searches visit a
// cloud's queries in spatial order. wants_tree and keep_tree may run on any thread.
template <typename T, class WantsTree, class KeepTree, class SearchRows>
void search_clouds(const T* xyz, const T* query, const std::vector<CloudSpan>& clouds,
                   const WantsTree& wants_tree, const KeepTree& keep_tree, const SearchRows& search_rows) {
  const int64_t B = static_cast<int64_t>(clouds.size());
  std::vector<KdTree<T>> trees(static_cast<size_t>(B));
  std::vector<char> has_tree(static_cast<size_t>(B), 0);
  std::vector<std::vector<int64_t>> order(static_cast<size_t>(B));
  // Asks the cost model (which may sample queries) and builds the tree it wants.
  auto plan = [&](int64_t b, bool parallel) {
    const CloudSpan& c = clouds[b];
    if (!wants_tree(c)) return;
    KdTree<T>& tree = trees[b];
    if (!tree.build(xyz + 3 * c.point_begin, c.points, parallel) || !keep_tree(c, tree)) {
      tree = KdTree<T>();
      return;
    }
    has_tree[b] = 1;
    if (c.queries >= kSpatialOrderMinQueries) {
      order[b] = spatial_query_order(query + 3 * c.query_begin, c.queries, tree);
    }
  };
  std::vector<int64_t> searched;
  for (int64_t b = 0; b < B; ++b) {
    if (clouds[b].points > 0 && clouds[b].queries > 0) searched.push_back(b);
  }
  // Fewer clouds than threads: the large ones are planned one after another, each build on
  // the whole pool; the rest (or all, when there are enough to go round) one per thread,
  // largest first so that a big cloud does not start last and leave the other threads idle.
  std::vector<int64_t> shared;
  const bool few = static_cast<int64_t>(searched.size()) < thread_count();
  for (int64_t b : searched) {
    if (few && clouds[b].points >= KdTree<T>::kParallelBuildMinPoints) {
      plan(b, true);
    } else {
      shared.push_back(b);
    }
  }
  std::stable_sort(shared.begin(), shared.end(),
                   [&](int64_t a, int64_t b) { return clouds[a].points > clouds[b].points; });
  parallel_for_each_dynamic(static_cast<int64_t>(shared.size()), [&](int64_t i) { plan(shared[i], false); });

  // Blocks of query rows that never straddle two clouds, handed out dynamically.
  constexpr int64_t kBlockRows = 64;
  std::vector<int64_t> first_block(static_cast<size_t>(B + 1), 0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t m = std::max<int64_t>(clouds[b].queries, 0);
    first_block[b + 1] = first_block[b] + (m + kBlockRows - 1) / kBlockRows;
  }
  parallel_for_each_dynamic(first_block[B], [&](int64_t block) {
    const int64_t b =
        std::upper_bound(first_block.begin(), first_block.end(), block) - first_block.begin() - 1;
    const CloudSpan& c = clouds[b];
    const int64_t p0 = (block - first_block[b]) * kBlockRows;
    const int64_t count = std::min(kBlockRows, c.queries - p0);
    const int64_t* ordered = order[b].empty() ? nullptr : order[b].data() + p0;
    int64_t rows[kBlockRows];
    for (int64_t i = 0; i < count; ++i) rows[i] = c.query_begin + (ordered ? ordered[i] : p0 + i);
    search_rows(c, has_tree[b] ? &trees[b] : nullptr, rows, count);
  });
}

}  // namespace cpu
}  // namespace pointops

// kd-tree for exact kNN and ball query on one cloud.
//
// Layout: a complete binary tree in heap order (children of node i are 2i+1 and 2i+2), split by
// count (the left child gets the lower half), so every leaf is at depth depth_ and holds at most
// kLeafSize points, whatever the coordinates: duplicates, lines, planes and far outliers give the
// same shape. A node splits at the median of the widest axis of its cell (the parent's cell cut
// at the split value); the boxes kept for the search are the tight boxes of the points.
// Points are stored in tree order as one array per axis; a leaf's points in ascending index
// order, so a ball query can stop a leaf early and ties come out lowest index first.
//
// Exactness: for a point p in a box and a query q, |p_a - q_a| >= the box gap on axis a (the
// gap is lo - q or q - hi, rounded the same way as p - q), and squaring and adding round
// monotonically, so the bound computed from the gaps with the brute force's operations is <=
// the brute force's d2 for every point of the box. A subtree is skipped only when that bound
// proves it: for kNN bound > worst kept d2 (or equal, with every index in the subtree above the
// worst kept index); for ball query bound > r2 (bound >= r2 when exclusive), or all its indices
// above the K-th lowest hit already found.
#include "spatial_index_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common.h"
#include "parallel.h"

namespace pointops {
namespace cpu {

namespace {

constexpr int64_t kLeafSize = 32;
// A search's work, counted in point distances: visiting a node costs about this many.
constexpr int64_t kWorkPerNode = 8;
// Results kept sorted by insertion up to this K; a binary max-heap beyond.
constexpr int64_t kSortedInsertMaxK = 128;

template <typename T>
inline T axis_gap(T q, T lo, T hi) {
  if (q < lo) return lo - q;
  if (q > hi) return q - hi;
  return T(0);
}

// The K best candidates seen so far under `Less` (a strict order), kept either sorted
// ascending (small K) or as a max-heap; worst() is the one a better candidate replaces.
template <typename T, class Less, bool kSorted>
class BestK {
 public:
  using Order = Less;

  BestK(Neighbour<T>* slots, int64_t K) : s_(slots), K_(K) {}

  bool full() const { return size_ == K_; }
  int64_t size() const { return size_; }
  const Neighbour<T>& worst() const { return kSorted ? s_[size_ - 1] : s_[0]; }

  void offer(const Neighbour<T>& c) {
    if (size_ < K_) {
      if (kSorted) {
        insert_sorted(c, size_++);
      } else {
        s_[size_++] = c;
        sift_up(size_ - 1);
      }
    } else if (less_(c, worst())) {
      if (kSorted) {
        insert_sorted(c, size_ - 1);
      } else {
        s_[0] = c;
        sift_down(0);
      }
    }
  }

  // Leaves the kept candidates in ascending order.
  void finish() {
    if (!kSorted) {
      for (int64_t end = size_; end > 1; --end) {
        std::swap(s_[0], s_[end - 1]);
        sift_down_within(0, end - 1);
      }
    }
  }

 private:
  // Puts c into the sorted prefix, dropping what sits at position `hole` (the worst or an
  // unused slot).
  void insert_sorted(const Neighbour<T>& c, int64_t hole) {
    while (hole > 0 && less_(c, s_[hole - 1])) {
      s_[hole] = s_[hole - 1];
      --hole;
    }
    s_[hole] = c;
  }
  void sift_up(int64_t i) {
    while (i > 0) {
      const int64_t parent = (i - 1) / 2;
      if (!less_(s_[parent], s_[i])) break;
      std::swap(s_[parent], s_[i]);
      i = parent;
    }
  }
  void sift_down(int64_t i) { sift_down_within(i, size_); }
  void sift_down_within(int64_t i, int64_t end) {
    for (;;) {
      const int64_t l = 2 * i + 1, r = l + 1;
      int64_t largest = i;
      if (l < end && less_(s_[largest], s_[l])) largest = l;
      if (r < end && less_(s_[largest], s_[r])) largest = r;
      if (largest == i) return;
      std::swap(s_[i], s_[largest]);
      i = largest;
    }
  }

  Neighbour<T>* s_;
  int64_t K_;
  int64_t size_ = 0;
  Less less_;
};

// kNN order: by squared distance, equal distances by index.
struct ByDistance {
  template <typename T>
  bool operator()(const Neighbour<T>& a, const Neighbour<T>& b) const {
    return a.d2 < b.d2 || (a.d2 == b.d2 && a.index < b.index);
  }
};

// The same order for float distances of points with indices below 2^32, as one integer
// comparison: a non-negative float's bits order like its value (+inf included), so
// (bits(d2) << 32 | index) orders by distance, then index. A NaN distance orders after
// (+inf, any index), so it never beats a kept neighbour, as with ByDistance.
struct ByPackedDistance {
  static uint64_t key(const Neighbour<float>& a) {
    uint32_t bits;
    std::memcpy(&bits, &a.d2, sizeof bits);
    return (uint64_t{bits} << 32) | static_cast<uint32_t>(a.index);
  }
  bool operator()(const Neighbour<float>& a, const Neighbour<float>& b) const { return key(a) < key(b); }
};

// The fastest exact kNN order for T: packed keys for float when indices fit 32 bits.
template <typename T>
struct FastDistanceOrder {
  using type = ByDistance;
};
template <>
struct FastDistanceOrder<float> {
  using type = ByPackedDistance;
};

// Calls search(best) with a K-best list by distance for a cloud of n points: sorted insertion
// for small K, a heap beyond; packed keys where they are exact.
template <typename T, class Search>
int64_t with_distance_order(int64_t n, int64_t K, Neighbour<T>* out, const Search& search) {
  using Fast = typename FastDistanceOrder<T>::type;
  const bool packed = n < (int64_t{1} << 32);
  if (K <= kSortedInsertMaxK) {
    if (packed) {
      BestK<T, Fast, true> best(out, K);
      return search(best);
    }
    BestK<T, ByDistance, true> best(out, K);
    return search(best);
  }
  if (packed) {
    BestK<T, Fast, false> best(out, K);
    return search(best);
  }
  BestK<T, ByDistance, false> best(out, K);
  return search(best);
}

// Ball query order: by index.
struct ByIndex {
  template <typename T>
  bool operator()(const Neighbour<T>& a, const Neighbour<T>& b) const {
    return a.index < b.index;
  }
};

// std::nth_element's contract by quickselect with a branch-free Lomuto partition (each element
// is moved unconditionally; only a cursor advance depends on the comparison).
template <class R>
void quickselect(R* data, int64_t n, int64_t k, int axis) {
  int64_t lo = 0, hi = n;  // k is in [lo, hi)
  while (hi - lo > 16) {
    const int64_t m = lo + (hi - lo) / 2;
    // median of three as the pivot, moved to the end
    auto key = [&](int64_t i) { return data[i].p[axis]; };
    int64_t a = lo, b = m, c = hi - 1;
    if (key(b) < key(a)) std::swap(a, b);
    if (key(c) < key(b)) std::swap(b, c);
    if (key(b) < key(a)) std::swap(a, b);
    std::swap(data[b], data[hi - 1]);
    const auto pivot = data[hi - 1].p[axis];
    int64_t first = lo;
    for (int64_t i = lo; i < hi - 1; ++i) {
      const R x = data[i];
      const bool smaller = x.p[axis] < pivot;
      data[i] = data[first];
      data[first] = x;
      first += smaller;
    }
    std::swap(data[first], data[hi - 1]);  // the pivot at its final place
    if (first == k) return;
    if (k < first) {
      hi = first;
      continue;
    }
    const bool little_progress = first - lo < (hi - lo) / 8;
    lo = first + 1;
    if (little_progress) {
      // Little progress: maybe many keys equal the pivot (duplicates, lattices), which would
      // otherwise be peeled off one pass at a time. Gather them right after the pivot.
      int64_t equal_end = lo;
      for (int64_t i = lo; i < hi; ++i) {
        const R x = data[i];
        const bool equal = !(pivot < x.p[axis]);  // x >= pivot here
        data[i] = data[equal_end];
        data[equal_end] = x;
        equal_end += equal;
      }
      if (k < equal_end) return;  // k holds a key equal to the pivot
      lo = equal_end;
    }
  }
  std::sort(data + lo, data + hi, [axis](const R& x, const R& y) { return x.p[axis] < y.p[axis]; });
}

// Reorders data[0, n) so that data[k] is the element a sort by p[axis] would put there, with
// nothing greater before it and nothing smaller after it (std::nth_element's contract).
// std::nth_element mispredicts a branch on about every other element; this does one
// branch-free pass instead: two pivots from a sorted sample bracket rank k, every element goes
// below, between or above them (out of place, through `out` and `between`, each of n
// elements), and only the small middle band is left to std::nth_element.
template <class R>
void select_nth(R* data, R* out, R* between, int64_t n, int64_t k, int axis) {
  auto by_axis = [axis](const R& a, const R& b) { return a.p[axis] < b.p[axis]; };
  if (n < 1024) {
    quickselect(data, n, k, axis);
    return;
  }
  using T = decltype(data[0].p[0]);
  using Key = typename std::remove_cv<typename std::remove_reference<T>::type>::type;
  const int64_t samples = std::min<int64_t>(1024, n / 8);
  Key sample[1024];
  for (int64_t i = 0; i < samples; ++i) sample[i] = data[(2 * i + 1) * n / (2 * samples)].p[axis];
  std::sort(sample, sample + samples);
  // About three standard deviations of the sample rank of element k on either side.
  const int64_t centre = k * samples / n;
  const int64_t half_width = 2 + static_cast<int64_t>(1.5 * std::sqrt(static_cast<double>(samples)));
  const Key lo = sample[std::max<int64_t>(0, centre - half_width)];
  const Key hi = sample[std::min<int64_t>(samples - 1, centre + half_width)];
  int64_t below = 0, above = n, middle = 0;
  for (int64_t i = 0; i < n; ++i) {
    const R r = data[i];
    const Key key = r.p[axis];
    out[below] = r;  // written to all three places, kept where its cursor advances
    out[above - 1] = r;
    between[middle] = r;
    const bool is_below = key<lo, is_above = key> hi;
    below += is_below;
    above -= is_above;
    middle += !(is_below | is_above);
  }
  std::copy(between, between + middle, out + below);
  std::copy(out, out + n, data);
  if (k < below) {
    std::nth_element(data, data + k, data + below, by_axis);  // the sample missed: rare
  } else if (k >= above) {
    std::nth_element(data + above, data + k, data + n, by_axis);
  } else if (lo < hi) {
    std::nth_element(data + below, data + k, data + above, by_axis);
  }  // lo == hi: the middle band is all one value, already in place
}

int64_t ceil_log2(int64_t v) {
  int64_t d = 0;
  while ((int64_t{1} << d) < v) ++d;
  return d;
}

}  // namespace

template <typename T>
bool KdTree<T>::build(const T* points, int64_t n, bool parallel) {
  n_ = 0;
  nodes_.clear();
  T lo[3], hi[3];
  for (int a = 0; a < 3; ++a) {
    lo[a] = infinity<T>();
    hi[a] = -infinity<T>();
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int a = 0; a < 3; ++a) {
      const T v = points[3 * i + a];
      if (!std::isfinite(v)) return false;
      lo[a] = std::min(lo[a], v);
      hi[a] = std::max(hi[a], v);
    }
  }
  n_ = n;
  depth_ = ceil_log2((n + kLeafSize - 1) / kLeafSize);
  nodes_.assign(static_cast<size_t>((int64_t{2} << depth_) - 1), Node{});
  BuildBuffers buffers(n);
  Record* records = buffers.records.get();
  for (int64_t i = 0; i < n; ++i) {
    records[i] = Record{{points[3 * i], points[3 * i + 1], points[3 * i + 2]}, i};
  }
  x_.resize(static_cast<size_t>(n));
  y_.resize(static_cast<size_t>(n));
  z_.resize(static_cast<size_t>(n));
  index_.resize(static_cast<size_t>(n));
  // Copies a finished subtree's points out of the records, in tree order.
  auto unpack = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      x_[i] = records[i].p[0];
      y_[i] = records[i].p[1];
      z_[i] = records[i].p[2];
      index_[i] = records[i].index;
    }
  };

  const bool split_top = parallel && n >= kParallelBuildMinPoints && thread_count() > 1;
  if (!split_top) {
    build_subtree(0, 0, 0, n, lo, hi, buffers);
    unpack(0, n);
    return true;
  }
  // One subtree per thread, each built (and unpacked) as one task. The splits above them run
  // level by level, a level's splits in parallel. Every parallel region costs a round trip
  // through the pool (a scheduler time slice when the machine is oversubscribed), so there
  // are no more of them than that: with 2 threads, one.
  const int64_t top = std::min(depth_, ceil_log2(thread_count()));
  std::vector<T> cells(static_cast<size_t>(6) << (top + 1));  // lo[3], hi[3] per node
  std::copy(lo, lo + 3, cells.begin());
  std::copy(hi, hi + 3, cells.begin() + 3);
  nodes_[0].begin = 0;
  nodes_[0].end = n;
  auto split_node = [&](int64_t i) {
    const T* cell = cells.data() + 6 * i;
    int64_t mid;
    T* left = cells.data() + 6 * (2 * i + 1);
    T* right = cells.data() + 6 * (2 * i + 2);
    std::copy(cell, cell + 6, left);
    std::copy(cell, cell + 6, right);
    split(nodes_[i].begin, nodes_[i].end, cell, cell + 3, buffers, &mid, left + 3, right);
    nodes_[2 * i + 1].begin = nodes_[i].begin;
    nodes_[2 * i + 1].end = mid;
    nodes_[2 * i + 2].begin = mid;
    nodes_[2 * i + 2].end = nodes_[i].end;
  };
  for (int64_t level = 0; level < top; ++level) {
    const int64_t first = (int64_t{1} << level) - 1;
    if (level == 0) {
      split_node(0);
      continue;
    }
    parallel_for_each_dynamic(first + 1, [&](int64_t i) { split_node(first + i); });
  }
  const int64_t first = (int64_t{1} << top) - 1;
  parallel_for_each_dynamic(first + 1, [&](int64_t t) {
    const int64_t i = first + t;
    const T* cell = cells.data() + 6 * i;
    build_subtree(i, top, nodes_[i].begin, nodes_[i].end, cell, cell + 3, buffers);
    unpack(nodes_[i].begin, nodes_[i].end);
  });
  for (int64_t i = first - 1; i >= 0; --i) finish_internal(i);
  return true;
}

// Splits the records [begin, end) at the median of the cell's widest axis: *mid is the first
// record of the right half, and the split value becomes the left cell's hi and the right
// cell's lo on that axis.
template <typename T>
void KdTree<T>::split(int64_t begin, int64_t end, const T* lo, const T* hi, BuildBuffers& buffers,
                      int64_t* mid, T* left_hi, T* right_lo) const {
  int axis = 0;
  for (int a = 1; a < 3; ++a) {
    if (hi[a] - lo[a] > hi[axis] - lo[axis]) axis = a;
  }
  *mid = begin + (end - begin) / 2;
  select_nth(buffers.records.get() + begin, buffers.out.get() + begin, buffers.between.get() + begin,
             end - begin, *mid - begin, axis);
  const T value = buffers.records[*mid].p[axis];
  left_hi[axis] = value;
  right_lo[axis] = value;
}

template <typename T>
void KdTree<T>::build_subtree(int64_t node, int64_t depth, int64_t begin, int64_t end, const T* lo,
                              const T* hi, BuildBuffers& buffers) {
  nodes_[node].begin = begin;
  nodes_[node].end = end;
  if (depth == depth_) {
    finish_leaf(node, buffers.records.get());
    return;
  }
  T left_lo[3], left_hi[3], right_lo[3], right_hi[3];
  for (int a = 0; a < 3; ++a) {
    left_lo[a] = right_lo[a] = lo[a];
    left_hi[a] = right_hi[a] = hi[a];
  }
  int64_t mid;
  split(begin, end, lo, hi, buffers, &mid, left_hi, right_lo);
  build_subtree(2 * node + 1, depth + 1, begin, mid, left_lo, left_hi, buffers);
  build_subtree(2 * node + 2, depth + 1, mid, end, right_lo, right_hi, buffers);
  finish_internal(node);
}

template <typename T>
void KdTree<T>::finish_leaf(int64_t node, Record* records) {
  Node& leaf = nodes_[node];
  std::sort(records + leaf.begin, records + leaf.end,
            [](const Record& a, const Record& b) { return a.index < b.index; });
  for (int a = 0; a < 3; ++a) {
    leaf.lo[a] = infinity<T>();
    leaf.hi[a] = -infinity<T>();
  }
  for (int64_t i = leaf.begin; i < leaf.end; ++i) {
    for (int a = 0; a < 3; ++a) {
      leaf.lo[a] = std::min(leaf.lo[a], records[i].p[a]);
      leaf.hi[a] = std::max(leaf.hi[a], records[i].p[a]);
    }
  }
  // An empty leaf (n not a multiple of the leaf count) keeps an inverted box: its bound is
  // never used because its min_index is above every real index.
  leaf.min_index = leaf.begin < leaf.end ? records[leaf.begin].index : std::numeric_limits<int64_t>::max();
}

template <typename T>
void KdTree<T>::finish_internal(int64_t node) {
  Node& parent = nodes_[node];
  const Node& l = nodes_[2 * node + 1];
  const Node& r = nodes_[2 * node + 2];
  for (int a = 0; a < 3; ++a) {
    parent.lo[a] = std::min(l.lo[a], r.lo[a]);
    parent.hi[a] = std::max(l.hi[a], r.hi[a]);
  }
  parent.min_index = std::min(l.min_index, r.min_index);
}

template <typename T>
int64_t KdTree<T>::knn(const T* q, int64_t K, Neighbour<T>* out) const {
  if (n_ == 0) return 0;
  return with_distance_order(n_, std::min(K, n_), out, [&](auto& best) { return knn_search(q, best); });
}

template <typename T>
template <class Best>
int64_t KdTree<T>::knn_search(const T* q, Best& best) const {
  const T qx = q[0], qy = q[1], qz = q[2];
  auto bound = [&](const Node& node) {
    const T gx = axis_gap(qx, node.lo[0], node.hi[0]);
    const T gy = axis_gap(qy, node.lo[1], node.hi[1]);
    const T gz = axis_gap(qz, node.lo[2], node.hi[2]);
    return gx * gx + gy * gy + gz * gz;
  };
  // The worst kept neighbour; (+inf, max) until K are kept, so that nothing is pruned before.
  Neighbour<T> worst{infinity<T>(), std::numeric_limits<int64_t>::max()};
  struct Pending {
    int64_t node;
    T bound;
  };
  Pending stack[64];
  int top = 0;
  int64_t node = 0;
  T node_bound = bound(nodes_[0]);
  const int64_t first_leaf = (int64_t{1} << depth_) - 1;
  for (;;) {
    // No point of the subtree can beat the worst kept one: all are farther, or as far with a
    // higher index.
    const bool hopeless =
        node_bound > worst.d2 || (node_bound == worst.d2 && nodes_[node].min_index > worst.index);
    if (!hopeless) {
      if (node >= first_leaf) {
        const Node& leaf = nodes_[node];
        const int64_t count = leaf.end - leaf.begin;
        const T* xs = x_.data() + leaf.begin;
        const T* ys = y_.data() + leaf.begin;
        const T* zs = z_.data() + leaf.begin;
        T d2[kLeafSize];
        for (int64_t i = 0; i < count; ++i) {  // branch-free: vectorises
          const T dx = xs[i] - qx;
          const T dy = ys[i] - qy;
          const T dz = zs[i] - qz;
          d2[i] = dx * dx + dy * dy + dz * dz;
        }
        const int64_t* ids = index_.data() + leaf.begin;
        for (int64_t i = 0; i < count; ++i) {
          if (d2[i] > worst.d2) continue;
          const Neighbour<T> c{d2[i], ids[i]};
          if (!typename Best::Order()(c, worst)) continue;
          best.offer(c);
          if (best.full()) worst = best.worst();
        }
      } else {
        const int64_t l = 2 * node + 1, r = l + 1;
        const T bl = bound(nodes_[l]), br = bound(nodes_[r]);
        const bool left_first = bl < br || (bl == br && nodes_[l].min_index < nodes_[r].min_index);
        stack[top++] = left_first ? Pending{r, br} : Pending{l, bl};
        node = left_first ? l : r;
        node_bound = left_first ? bl : br;
        continue;
      }
    }
    if (top == 0) break;
    --top;
    node = stack[top].node;
    node_bound = stack[top].bound;
  }
  best.finish();
  return best.size();
}

template <typename T>
int64_t KdTree<T>::ball(const T* q, T r2, bool inclusive, int64_t K, Neighbour<T>* out, int64_t* work) const {
  if (n_ == 0) return 0;
  if (K <= kSortedInsertMaxK) {
    BestK<T, ByIndex, true> best(out, K);
    return ball_search(q, r2, inclusive, best, work);
  }
  BestK<T, ByIndex, false> best(out, K);
  return ball_search(q, r2, inclusive, best, work);
}

template <typename T>
template <class Best>
int64_t KdTree<T>::ball_search(const T* q, T r2, bool inclusive, Best& best, int64_t* work) const {
  int64_t visited_nodes = 0, computed = 0;
  const T qx = q[0], qy = q[1], qz = q[2];
  // Indices above this cannot enter any more (the K-th lowest hit so far, once there are K).
  int64_t index_limit = std::numeric_limits<int64_t>::max();
  auto worth_visiting = [&](const Node& node) {
    if (node.min_index > index_limit) return false;
    const T gx = axis_gap(qx, node.lo[0], node.hi[0]);
    const T gy = axis_gap(qy, node.lo[1], node.hi[1]);
    const T gz = axis_gap(qz, node.lo[2], node.hi[2]);
    const T b = gx * gx + gy * gy + gz * gz;
    return inclusive ? b <= r2 : b < r2;
  };
  int64_t stack[64];
  int top = 0;
  const int64_t first_leaf = (int64_t{1} << depth_) - 1;
  if (worth_visiting(nodes_[0])) stack[top++] = 0;
  while (top > 0) {
    const int64_t node = stack[--top];
    if (nodes_[node].min_index > index_limit) continue;
    ++visited_nodes;
    if (node >= first_leaf) {
      const Node& leaf = nodes_[node];
      const int64_t* ids = index_.data() + leaf.begin;
      int64_t count = leaf.end - leaf.begin;
      while (count > 0 && ids[count - 1] > index_limit) --count;  // the leaf is in index order
      computed += count;
      const T* xs = x_.data() + leaf.begin;
      const T* ys = y_.data() + leaf.begin;
      const T* zs = z_.data() + leaf.begin;
      T d2[kLeafSize];
      for (int64_t i = 0; i < count; ++i) {  // branch-free: vectorises
        const T dx = xs[i] - qx;
        const T dy = ys[i] - qy;
        const T dz = zs[i] - qz;
        d2[i] = dx * dx + dy * dy + dz * dz;
      }
      for (int64_t i = 0; i < count; ++i) {
        if (ids[i] > index_limit) break;  // lowered by this leaf's own hits
        if (inclusive ? d2[i] <= r2 : d2[i] < r2) {
          best.offer(Neighbour<T>{d2[i], ids[i]});
          if (best.full()) index_limit = best.worst().index;
        }
      }
      continue;
    }
    // Lower indices first: the K lowest hits are found sooner and prune the rest.
    const int64_t l = 2 * node + 1, r = l + 1;
    const bool left_first = nodes_[l].min_index < nodes_[r].min_index;
    const int64_t first = left_first ? l : r, second = left_first ? r : l;
    if (worth_visiting(nodes_[second])) stack[top++] = second;
    if (worth_visiting(nodes_[first])) stack[top++] = first;
  }
  if (work != nullptr) *work += kWorkPerNode * visited_nodes + computed;
  best.finish();
  return best.size();
}

namespace {

template <typename T, class Best>
int64_t knn_scan_into(const T* points, int64_t n, const T* q, Best& best) {
  Neighbour<T> worst{infinity<T>(), std::numeric_limits<int64_t>::max()};
  for (int64_t j0 = 0; j0 < n; j0 += kLeafSize) {
    const int64_t count = std::min(kLeafSize, n - j0);
    T d2[kLeafSize];
    for (int64_t i = 0; i < count; ++i) d2[i] = squared_distance(points + 3 * (j0 + i), q);
    for (int64_t i = 0; i < count; ++i) {
      if (d2[i] > worst.d2) continue;
      const Neighbour<T> c{d2[i], j0 + i};
      if (!typename Best::Order()(c, worst)) continue;  // also drops NaN distances
      best.offer(c);
      if (best.full()) worst = best.worst();
    }
  }
  best.finish();
  return best.size();
}

}  // namespace

template <typename T>
int64_t knn_scan(const T* points, int64_t n, const T* q, int64_t K, Neighbour<T>* out) {
  K = std::min(K, n);
  if (K <= 0) return 0;
  return with_distance_order(n, K, out, [&](auto& best) { return knn_scan_into(points, n, q, best); });
}

template <typename T>
int64_t ball_scan(const T* points, int64_t n, const T* q, T r2, bool inclusive, int64_t K, Neighbour<T>* out,
                  int64_t* work) {
  int64_t hits = 0;
  for (int64_t j0 = 0; j0 < n && hits < K; j0 += kLeafSize) {
    const int64_t count = std::min(kLeafSize, n - j0);
    if (work != nullptr) *work += count;
    T d2[kLeafSize];
    for (int64_t i = 0; i < count; ++i) d2[i] = squared_distance(points + 3 * (j0 + i), q);
    for (int64_t i = 0; i < count && hits < K; ++i) {
      if (inclusive ? d2[i] <= r2 : d2[i] < r2) out[hits++] = Neighbour<T>{d2[i], j0 + i};
    }
  }
  return hits;
}

template int64_t knn_scan<float>(const float*, int64_t, const float*, int64_t, Neighbour<float>*);
template int64_t knn_scan<double>(const double*, int64_t, const double*, int64_t, Neighbour<double>*);
template int64_t ball_scan<float>(const float*, int64_t, const float*, float, bool, int64_t,
                                  Neighbour<float>*, int64_t*);
template int64_t ball_scan<double>(const double*, int64_t, const double*, double, bool, int64_t,
                                   Neighbour<double>*, int64_t*);

template class KdTree<float>;
template class KdTree<double>;

}  // namespace cpu
}  // namespace pointops

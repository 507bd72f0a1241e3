// Exact farthest point sampling with kd-tree pruning.
//
// The cloud is split once into a kd-tree (median splits on the widest axis, leaves of at most
// kLeafSize points). Every node keeps its points' bounding box and the farthest of its points
// (largest min-distance to the picked set, lowest index among equals). For a new pick p, a node
// whose box is at least its own farthest distance away from p is skipped: no point inside can
// get closer to the picked set than it already is, so nothing in it changes. The next pick is
// the root's farthest point.
//
// Exactness: point distances are computed exactly as in the brute-force scan
// ((dx*dx + dy*dy) + dz*dz, point minus pick, no contraction), and the box bound with the same
// operations on per-axis gaps. Rounding is monotonic, so the bound is <= every computed
// distance in the box, and skipping never hides a change the brute-force scan would make.
#include "fps_kdtree.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace pointops {
namespace cpu {

namespace {

constexpr int64_t kLeafSize = 64;

template <typename T>
class KdTreeSampler {
 public:
  // Builds the tree; false when a coordinate is not finite.
  bool build(const T* xyz, int64_t n) {
    for (int64_t i = 0; i < 3 * n; ++i) {
      if (!std::isfinite(xyz[i])) return false;
    }
    xyz_ = xyz;
    // Splits move whole point records, so partitioning reads memory in order.
    points_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      points_[i] = PointRecord{{xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]}, i};
    }
    nodes_.assign(static_cast<size_t>(subtree_nodes(n)), Node{});
    build_node(0, 0, n);
    // Points in tree order, one array per axis, so a leaf update is a contiguous loop.
    order_.resize(static_cast<size_t>(n));
    for (int a = 0; a < 3; ++a) coord_[a].resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      order_[i] = points_[i].index;
      for (int a = 0; a < 3; ++a) coord_[a][i] = points_[i].p[a];
    }
    points_.clear();
    points_.shrink_to_fit();
    mind_.assign(static_cast<size_t>(n), std::numeric_limits<T>::infinity());
    return true;
  }

  // Adds point `pick` to the picked set; returns the next pick (the farthest point).
  int64_t add_pick(int64_t pick) {
    const T* p = xyz_ + 3 * pick;
    visit(0, p[0], p[1], p[2]);
    return nodes_[0].best_index;
  }

 private:
  struct Node {
    T lo[3];
    T hi[3];
    T best_dist;         // largest min-distance of the node's points
    int64_t best_index;  // its lowest original index
    int64_t begin;       // the node's points are order_[begin, end)
    int64_t end;
    int64_t right;  // right child (the left child is the next node); -1 for a leaf
  };

  struct PointRecord {
    T p[3];
    int64_t index;
  };

  // Nodes in a subtree of `size` points (splits are by count, so the layout is known up front).
  static int64_t subtree_nodes(int64_t size) {
    if (size <= kLeafSize) return 1;
    return 1 + subtree_nodes(size / 2) + subtree_nodes(size - size / 2);
  }

  void build_node(int64_t id, int64_t begin, int64_t end) {
    Node node{};
    node.begin = begin;
    node.end = end;
    node.right = -1;
    node.best_dist = std::numeric_limits<T>::infinity();  // every min-distance starts at +inf
    for (int a = 0; a < 3; ++a) {
      node.lo[a] = std::numeric_limits<T>::infinity();
      node.hi[a] = -std::numeric_limits<T>::infinity();
    }
    for (int64_t i = begin; i < end; ++i) {
      const T* p = points_[i].p;
      for (int a = 0; a < 3; ++a) {
        node.lo[a] = std::min(node.lo[a], p[a]);
        node.hi[a] = std::max(node.hi[a], p[a]);
      }
    }
    if (end - begin <= kLeafSize) {
      // Leaf points in ascending index order: the first maximum found is the lowest index.
      std::sort(points_.begin() + begin, points_.begin() + end,
                [](const PointRecord& a, const PointRecord& b) { return a.index < b.index; });
      node.best_index = points_[begin].index;
    } else {
      int axis = 0;
      for (int a = 1; a < 3; ++a) {
        if (node.hi[a] - node.lo[a] > node.hi[axis] - node.lo[axis]) axis = a;
      }
      const int64_t mid = begin + (end - begin) / 2;
      std::nth_element(points_.begin() + begin, points_.begin() + mid, points_.begin() + end,
                       [axis](const PointRecord& a, const PointRecord& b) { return a.p[axis] < b.p[axis]; });
      const int64_t left = id + 1;
      node.right = left + subtree_nodes(mid - begin);
      build_node(left, begin, mid);
      build_node(node.right, mid, end);
      node.best_index = std::min(nodes_[left].best_index, nodes_[node.right].best_index);
    }
    nodes_[id] = node;
  }

  static T axis_gap(T p, T lo, T hi) {
    if (p < lo) return lo - p;
    if (p > hi) return p - hi;
    return T(0);
  }

  void visit(int64_t id, T px, T py, T pz) {
    Node& node = nodes_[id];
    const T gx = axis_gap(px, node.lo[0], node.hi[0]);
    const T gy = axis_gap(py, node.lo[1], node.hi[1]);
    const T gz = axis_gap(pz, node.lo[2], node.hi[2]);
    const T bound = gx * gx + gy * gy + gz * gz;
    if (bound >= node.best_dist) return;  // no point of the node gets closer
    if (node.right < 0) {
      update_leaf(node, px, py, pz);
      return;
    }
    visit(id + 1, px, py, pz);
    visit(node.right, px, py, pz);
    const Node& l = nodes_[id + 1];
    const Node& r = nodes_[node.right];
    const bool take_left =
        l.best_dist > r.best_dist || (l.best_dist == r.best_dist && l.best_index < r.best_index);
    node.best_dist = take_left ? l.best_dist : r.best_dist;
    node.best_index = take_left ? l.best_index : r.best_index;
  }

  void update_leaf(Node& node, T px, T py, T pz) {
    const T* xs = coord_[0].data();
    const T* ys = coord_[1].data();
    const T* zs = coord_[2].data();
    T* mind = mind_.data();
    // Two passes keep the first one branch-free (it vectorises): update and find the maximum,
    // then find its first position (points are in ascending index order).
    T best = T(-1);
    for (int64_t j = node.begin; j < node.end; ++j) {
      const T dx = xs[j] - px;
      const T dy = ys[j] - py;
      const T dz = zs[j] - pz;
      const T d = dx * dx + dy * dy + dz * dz;
      const T m = d < mind[j] ? d : mind[j];
      mind[j] = m;
      best = m > best ? m : best;
    }
    int64_t best_at = node.begin;
    while (mind[best_at] != best) ++best_at;
    node.best_dist = best;
    node.best_index = order_[best_at];
  }

  const T* xyz_ = nullptr;
  std::vector<PointRecord> points_;  // during the build only
  std::vector<int64_t> order_;       // tree position -> original index
  std::vector<Node> nodes_;          // pre-order; nodes_[0] is the root
  std::vector<T> coord_[3];          // coordinates in tree order
  std::vector<T> mind_;              // min squared distance to the picked set, in tree order
};

}  // namespace

template <typename T>
bool sample_cloud_kdtree(const T* xyz, int64_t n, int64_t picks, int64_t first, int64_t* idx) {
  if (picks <= 0) return true;  // nothing to write: idx[0] belongs to the next cloud
  KdTreeSampler<T> sampler;
  if (!sampler.build(xyz, n)) return false;
  int64_t current = first;
  idx[0] = current;
  for (int64_t s = 1; s < picks; ++s) {
    current = sampler.add_pick(current);
    idx[s] = current;
  }
  return true;
}

template bool sample_cloud_kdtree<float>(const float*, int64_t, int64_t, int64_t, int64_t*);
template bool sample_cloud_kdtree<double>(const double*, int64_t, int64_t, int64_t, int64_t*);

}  // namespace cpu
}  // namespace pointops

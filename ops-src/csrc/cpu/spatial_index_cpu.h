// Exact neighbour search in one point cloud: a kd-tree, and the brute-force scans it must match
// (csrc/cpu/spatial_index_cpu.cpp).
//
// Searches return exactly what the brute-force scans in knn_cpu.cpp and ball_query_cpu.cpp
// return: distances are computed with the same formula in the same type (cpu::squared_distance:
// point minus query, (dx*dx + dy*dy) + dz*dz), and a subtree is skipped only when a lower bound
// on its distances, evaluated with the same operations on the box gaps, proves that none of its
// points can qualify.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace pointops {
namespace cpu {

// A neighbour found by a search: squared distance and the point's index in its cloud.
template <typename T>
struct Neighbour {
  T d2;
  int64_t index;
};

template <typename T>
class KdTree {
 public:
  // Below this many points a build runs on one thread even when asked to spread.
  static constexpr int64_t kParallelBuildMinPoints = 32768;

  // Builds the tree over points [n,3]; `parallel` spreads the build over the thread pool (for
  // a large cloud built on its own). Returns false, keeping nothing, when a coordinate is not
  // finite: box bounds would not hold, and the caller searches by brute force instead.
  bool build(const T* points, int64_t n, bool parallel);

  int64_t size() const { return n_; }
  // Bounding box of the cloud (valid when size() > 0).
  const T* box_lo() const { return nodes_[0].lo; }
  const T* box_hi() const { return nodes_[0].hi; }

  // The min(K, n) nearest points of q, by ascending (d2, index), written to out[0..]; returns
  // how many were written. q must be finite.
  int64_t knn(const T* q, int64_t K, Neighbour<T>* out) const;

  // The first K points (ascending index) with d2 <= r2 (inclusive) or d2 < r2, by ascending
  // index, written to out[0..]; returns how many (at most K). q must be finite. When `work` is
  // given, the search's cost is added to it (in point distances, nodes weighted), to compare
  // with ball_scan's.
  int64_t ball(const T* q, T r2, bool inclusive, int64_t K, Neighbour<T>* out, int64_t* work = nullptr) const;

 private:
  struct Node {
    T lo[3];  // tight bounding box of the node's points
    T hi[3];
    int64_t begin;  // the node's points are [begin, end) in tree order
    int64_t end;
    int64_t min_index;  // lowest original index among them
  };

  struct Record {
    T p[3];
    int64_t index;
  };

  // The points during the build, and scratch space for splitting them: n records each, left
  // uninitialised (most of `between` is never touched).
  struct BuildBuffers {
    explicit BuildBuffers(int64_t n)
        : records(new Record[static_cast<size_t>(n)]),
          out(new Record[static_cast<size_t>(n)]),
          between(new Record[static_cast<size_t>(n)]) {}
    std::unique_ptr<Record[]> records;
    std::unique_ptr<Record[]> out;
    std::unique_ptr<Record[]> between;
  };

  void build_subtree(int64_t node, int64_t depth, int64_t begin, int64_t end, const T* lo, const T* hi,
                     BuildBuffers& buffers);
  void split(int64_t begin, int64_t end, const T* lo, const T* hi, BuildBuffers& buffers, int64_t* mid,
             T* left_hi, T* right_lo) const;
  void finish_leaf(int64_t node, Record* records);
  void finish_internal(int64_t node);
  template <class Best>
  int64_t knn_search(const T* q, Best& best) const;
  template <class Best>
  int64_t ball_search(const T* q, T r2, bool inclusive, Best& best, int64_t* work) const;

  int64_t n_ = 0;
  int64_t depth_ = 0;  // leaves are the nodes of this depth (a complete tree, heap order)
  std::vector<Node> nodes_;
  std::vector<T> x_, y_, z_;    // coordinates in tree order (a leaf: ascending index)
  std::vector<int64_t> index_;  // tree position -> original index
};

// The same searches by brute force over points [n,3] (every point, in index order): what the
// tree must reproduce, and the faster choice for few queries or tiny clouds. Non-finite
// coordinates are allowed: a NaN distance never qualifies.
template <typename T>
int64_t knn_scan(const T* points, int64_t n, const T* q, int64_t K, Neighbour<T>* out);
template <typename T>
int64_t ball_scan(const T* points, int64_t n, const T* q, T r2, bool inclusive, int64_t K, Neighbour<T>* out,
                  int64_t* work = nullptr);

}  // namespace cpu
}  // namespace pointops

// Runs the CPU kernels on deterministic inputs and prints one line per case:
//   <case> <FNV-1a 64-bit hash of every output byte>
// tests/windows builds it for this host and, with mingw-w64, for x86_64 Windows (run under wine):
// both must print the same lines, which checks the kernels bit for bit under Windows' LLP64 data
// model (`long` is 32 bits) and C runtime. It reaches the kernels only through kernels.h, and
// reads no setting itself: POINTOPS_CPU_FPS_PATH in its environment picks the FPS sampler.
//
// The sparse64 cases put the points or features a kernel reads past element 2^31 and 2^32 of an
// array whose address space is reserved but mostly not backed by memory (only the pages written
// are), so any offset computed in 32 bits reads the wrong place or faults. They also check
// themselves against the same data packed densely. Exit status 0: every self-check held.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "kernels.h"

namespace {

using pointops::Dtype;
using pointops::Status;

constexpr int64_t kUnwritten = 0x5A5A5A5A5A5A5A5A;  // prefilled index outputs: never a valid index
int g_failures = 0;

void fail(const std::string& name, const std::string& what) {
  std::fprintf(stderr, "FAIL %s: %s\n", name.c_str(), what.c_str());
  ++g_failures;
}

bool ok(const std::string& name, Status status) {
  if (status == nullptr) return true;
  fail(name, std::string("kernel returned: ") + status);
  return false;
}

// splitmix64: the same sequence on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1): 53 random bits, exact in double, rounded once when stored as float.
  double signed_unit() { return static_cast<double>(next() >> 11) / 4503599627370496.0 - 1.0; }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

class Hash {
 public:
  template <class V>
  void add(const std::vector<V>& values) {
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(values.data());
    for (size_t i = 0; i < values.size() * sizeof(V); ++i) {
      value_ = (value_ ^ bytes[i]) * 0x100000001B3ull;
    }
  }
  std::string hex() const {
    const char* digits = "0123456789abcdef";
    std::string text(16, '0');
    for (int i = 0; i < 16; ++i) text[static_cast<size_t>(15 - i)] = digits[(value_ >> (4 * i)) & 15];
    return text;
  }

 private:
  uint64_t value_ = 0xCBF29CE484222325ull;
};

void report(const std::string& name, const Hash& hash) {
  std::printf("%s %s\n", name.c_str(), hash.hex().c_str());
}

template <class T>
Dtype dtype_of();
template <>
Dtype dtype_of<float>() {
  return Dtype::Float32;
}
template <>
Dtype dtype_of<double>() {
  return Dtype::Float64;
}

template <class T>
std::string suffix() {
  return sizeof(T) == 4 ? "_f32" : "_f64";
}

// Every index written and within -1..n-1.
void check_indices(const std::string& name, const std::vector<int64_t>& idx, int64_t n) {
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < -1 || idx[i] >= n) {
      fail(name, "index output " + std::to_string(i) + " is " + std::to_string(idx[i]) +
                     (idx[i] == kUnwritten ? " (never written)" : ", out of range"));
      return;
    }
  }
}

// Float outputs are prefilled with NaN and no kernel here produces one: a NaN is an unwritten slot.
template <class T>
void check_written(const std::string& name, const std::vector<T>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) {
      fail(name, "output " + std::to_string(i) + " was never written");
      return;
    }
  }
}

template <class T>
std::vector<T> nan_filled(int64_t count) {
  return std::vector<T>(static_cast<size_t>(count), std::numeric_limits<T>::quiet_NaN());
}

std::vector<int64_t> unwritten_indices(int64_t count) {
  return std::vector<int64_t>(static_cast<size_t>(count), kUnwritten);
}

// Coordinates uniform in [-1, 1), or on a 1/8 grid in [-2, 2) (many equal distances: ties).
template <class T>
std::vector<T> make_points(Rng& rng, int64_t count, bool grid) {
  std::vector<T> p(static_cast<size_t>(3 * count));
  for (T& x : p) {
    x = grid ? T(static_cast<double>(rng.below(32) - 16) / 8.0) : T(rng.signed_unit());
  }
  return p;
}

template <class T>
std::vector<T> make_values(Rng& rng, int64_t count) {
  std::vector<T> v(static_cast<size_t>(count));
  for (T& x : v) x = T(rng.signed_unit());
  return v;
}

// Indices in -1..n-1 (about one in ten is -1).
std::vector<int64_t> make_indices(Rng& rng, int64_t count, int64_t n) {
  std::vector<int64_t> idx(static_cast<size_t>(count));
  for (int64_t& j : idx) j = rng.below(10) == 0 ? -1 : rng.below(n);
  return idx;
}

// ---------------------------------------------------------------------------------------------
// Kernel calls: each returns the outputs and checks that they were all written.

template <class T>
std::vector<int64_t> fps(const std::string& name, const T* xyz, const std::vector<int64_t>& lengths,
                         int64_t B, int64_t N, int64_t K, int64_t start) {
  std::vector<int64_t> idx = unwritten_indices(B * K);
  if (ok(name,
         pointops::furthest_point_sample_cpu(dtype_of<T>(), xyz, lengths.empty() ? nullptr : lengths.data(),
                                             B, N, K, start, idx.data()))) {
    check_indices(name, idx, N);
  }
  return idx;
}

template <class T>
struct Neighbours {
  std::vector<int64_t> idx, count;
  std::vector<T> dist2;
};

template <class T>
Neighbours<T> knn(const std::string& name, const T* xyz, const std::vector<T>& query,
                  const std::vector<int64_t>& lengths, const std::vector<int64_t>& query_lengths, int64_t B,
                  int64_t N, int64_t M, int64_t K) {
  Neighbours<T> out{unwritten_indices(B * M * K), {}, nan_filled<T>(B * M * K)};
  if (ok(name, pointops::knn_cpu(dtype_of<T>(), xyz, query.data(), lengths.empty() ? nullptr : lengths.data(),
                                 query_lengths.empty() ? nullptr : query_lengths.data(), B, N, M, K,
                                 out.dist2.data(), out.idx.data()))) {
    check_indices(name, out.idx, N);
    check_written(name, out.dist2);
  }
  return out;
}

template <class T>
Neighbours<T> ball_query(const std::string& name, const T* xyz, const std::vector<T>& query,
                         const std::vector<int64_t>& lengths, const std::vector<int64_t>& query_lengths,
                         int64_t B, int64_t N, int64_t M, double radius, bool inclusive, int64_t K,
                         bool with_dist2) {
  Neighbours<T> out{unwritten_indices(B * M * K), unwritten_indices(B * M),
                    with_dist2 ? nan_filled<T>(B * M * K) : std::vector<T>()};
  if (ok(name, pointops::ball_query_cpu(
                   dtype_of<T>(), xyz, query.data(), lengths.empty() ? nullptr : lengths.data(),
                   query_lengths.empty() ? nullptr : query_lengths.data(), B, N, M, radius, inclusive, K,
                   out.idx.data(), out.count.data(), with_dist2 ? out.dist2.data() : nullptr))) {
    check_indices(name, out.idx, N);
    check_indices(name, out.count, K + 1);
    check_written(name, out.dist2);
  }
  return out;
}

template <class T>
std::vector<T> gather(const std::string& name, const T* feat, const std::vector<int64_t>& idx,
                      const std::vector<T>& weight, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T_) {
  std::vector<T> out = nan_filled<T>(B * C * P);
  if (ok(name, pointops::gather_forward_cpu(dtype_of<T>(), feat, idx.data(),
                                            weight.empty() ? nullptr : weight.data(), B, C, N, P, T_,
                                            out.data()))) {
    check_written(name, out);
  }
  return out;
}

template <class T>
std::vector<T> gather_backward_feat(const std::string& name, const std::vector<T>& grad_out,
                                    const std::vector<int64_t>& idx, const std::vector<T>& weight, int64_t B,
                                    int64_t C, int64_t N, int64_t P, int64_t T_) {
  std::vector<T> grad_feat = nan_filled<T>(B * C * N);
  if (ok(name, pointops::gather_backward_feat_cpu(dtype_of<T>(), grad_out.data(), idx.data(),
                                                  weight.empty() ? nullptr : weight.data(), B, C, N, P, T_,
                                                  grad_feat.data()))) {
    check_written(name, grad_feat);
  }
  return grad_feat;
}

template <class T>
std::vector<T> gather_backward_weight(const std::string& name, const std::vector<T>& grad_out, const T* feat,
                                      const std::vector<int64_t>& idx, int64_t B, int64_t C, int64_t N,
                                      int64_t P, int64_t T_) {
  std::vector<T> grad_w = nan_filled<T>(B * P * T_);
  if (ok(name, pointops::gather_backward_weight_cpu(dtype_of<T>(), grad_out.data(), feat, idx.data(), B, C, N,
                                                    P, T_, grad_w.data()))) {
    check_written(name, grad_w);
  }
  return grad_w;
}

template <class V>
void expect_same(const std::string& name, const std::vector<V>& got, const std::vector<V>& want,
                 const char* what) {
  if (got.size() != want.size() || std::memcmp(got.data(), want.data(), got.size() * sizeof(V)) != 0) {
    fail(name, std::string(what) + " differs");
  }
}

// ---------------------------------------------------------------------------------------------
// Address space reserved up front, memory committed only for the pages written.

class SparseArray {
 public:
  explicit SparseArray(size_t bytes) : bytes_(bytes) {
#ifdef _WIN32
    SYSTEM_INFO info;
    GetSystemInfo(&info);
    page_ = info.dwPageSize;
    base_ = static_cast<char*>(VirtualAlloc(nullptr, bytes, MEM_RESERVE, PAGE_NOACCESS));
#else
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
#endif
  }
  ~SparseArray() {
    if (base_ == nullptr) return;
#ifdef _WIN32
    VirtualFree(base_, 0, MEM_RELEASE);
#else
    munmap(base_, bytes_);
#endif
  }
  SparseArray(const SparseArray&) = delete;
  SparseArray& operator=(const SparseArray&) = delete;

  bool reserved() const { return base_ != nullptr; }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(base_);
  }

  // Makes elements [first, first + count) of a T array readable and writable (zeros).
  template <class T>
  bool commit(int64_t first, int64_t count) {
    const size_t begin = static_cast<size_t>(first) * sizeof(T) / page_ * page_;
    const size_t end = (static_cast<size_t>(first + count) * sizeof(T) + page_ - 1) / page_ * page_;
#ifdef _WIN32
    return VirtualAlloc(base_ + begin, end - begin, MEM_COMMIT, PAGE_READWRITE) != nullptr;
#else
    return mprotect(base_ + begin, end - begin, PROT_READ | PROT_WRITE) == 0;
#endif
  }

 private:
  size_t bytes_;
  size_t page_ = 4096;
  char* base_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Cases

template <class T>
void fps_cases() {
  const std::string s = suffix<T>();
  {
    // Small clouds (brute-force scan): a partial one, an empty one, K beyond a cloud's size.
    Rng rng(11);
    const int64_t B = 3, N = 100, K = 40;
    const std::vector<T> xyz = make_points<T>(rng, B * N, false);
    Hash h;
    h.add(fps("fps_small" + s, xyz.data(), {100, 37, 0}, B, N, K, 5));
    report("fps_small" + s, h);
  }
  for (bool grid : {false, true}) {
    // Clouds large enough for the kd-tree sampler (POINTOPS_CPU_FPS_PATH picks the sampler).
    const std::string name = (grid ? "fps_grid_ties" : "fps_kdtree") + s;
    Rng rng(grid ? 13 : 12);
    const int64_t B = 2, N = 3000, K = 300;
    const std::vector<T> xyz = make_points<T>(rng, B * N, grid);
    Hash h;
    h.add(fps(name, xyz.data(), {3000, 2100}, B, N, K, 0));
    report(name, h);
  }
}

template <class T>
void neighbour_cases() {
  const std::string s = suffix<T>();
  Rng rng(21);
  const int64_t B = 2, N = 500, M = 64;
  const std::vector<T> xyz = make_points<T>(rng, B * N, true);
  const std::vector<T> query = make_points<T>(rng, B * M, true);
  const std::vector<int64_t> lengths = {500, 10}, query_lengths = {64, 30};
  {
    const Neighbours<T> r = knn("knn" + s, xyz.data(), query, lengths, query_lengths, B, N, M, 16);
    Hash h;
    h.add(r.dist2);
    h.add(r.idx);
    report("knn" + s, h);
  }
  {
    Rng rng3(22);
    const int64_t N3 = 700, M3 = 50;
    const std::vector<T> known = make_points<T>(rng3, N3, false);
    const std::vector<T> unknown = make_points<T>(rng3, M3, false);
    const Neighbours<T> r = knn("three_nn" + s, known.data(), unknown, {}, {}, 1, N3, M3, 3);
    Hash h;
    h.add(r.dist2);
    h.add(r.idx);
    report("three_nn" + s, h);
  }
  for (bool inclusive : {true, false}) {
    // Radius 0.25 on the 1/8 grid: some squared distances equal r^2 exactly.
    const std::string name = (inclusive ? "ball_query_inclusive" : "ball_query_exclusive") + s;
    const Neighbours<T> r =
        ball_query(name, xyz.data(), query, lengths, query_lengths, B, N, M, 0.25, inclusive, 32, true);
    const Neighbours<T> no_d2 =
        ball_query(name, xyz.data(), query, lengths, query_lengths, B, N, M, 0.25, inclusive, 32, false);
    expect_same(name, no_d2.idx, r.idx, "idx without dist2");
    expect_same(name, no_d2.count, r.count, "count without dist2");
    Hash h;
    h.add(r.idx);
    h.add(r.count);
    h.add(r.dist2);
    report(name, h);
  }
}

template <class T>
void gather_cases() {
  const std::string s = suffix<T>();
  Rng rng(31);
  const int64_t B = 2, C = 5, N = 300;
  const std::vector<T> feat = make_values<T>(rng, B * C * N);
  {
    // three_interpolate-like: T = 3 with weights.
    const int64_t P = 70, T3 = 3;
    const std::vector<int64_t> idx = make_indices(rng, B * P * T3, N);
    const std::vector<T> w = make_values<T>(rng, B * P * T3);
    const std::vector<T> grad_out = make_values<T>(rng, B * C * P);
    Hash fwd, bwd_feat, bwd_weight;
    fwd.add(gather("gather_weighted" + s, feat.data(), idx, w, B, C, N, P, T3));
    bwd_feat.add(gather_backward_feat("gather_backward_feat_weighted" + s, grad_out, idx, w, B, C, N, P, T3));
    bwd_weight.add(
        gather_backward_weight("gather_backward_weight" + s, grad_out, feat.data(), idx, B, C, N, P, T3));
    report("gather_weighted" + s, fwd);
    report("gather_backward_feat_weighted" + s, bwd_feat);
    report("gather_backward_weight" + s, bwd_weight);
  }
  {
    // group_points-like: idx [B, M*K, 1], no weight, many repeats (summed in the backward).
    const int64_t P = 64 * 8;
    const std::vector<int64_t> idx = make_indices(rng, B * P, 40);
    const std::vector<T> grad_out = make_values<T>(rng, B * C * P);
    Hash fwd, bwd;
    fwd.add(gather("group" + s, feat.data(), idx, {}, B, C, N, P, 1));
    bwd.add(gather_backward_feat("group_backward" + s, grad_out, idx, {}, B, C, N, P, 1));
    report("group" + s, fwd);
    report("group_backward" + s, bwd);
  }
}

// Neighbour searches over B clouds of N = 2^30 + 3 slots each, of which only the first
// lengths[b] are points: cloud b starts at element 3*N*b (past 2^31 for b = 1, past 2^32 for
// b = 2). The results must equal those on the same points packed into N = 700 slots.
template <class T>
void sparse_neighbour_cases() {
  const std::string name = "sparse64_neighbours" + suffix<T>();
  const int64_t B = 3, N = (int64_t(1) << 30) + 3, dense_n = 700, M = 40;
  const std::vector<int64_t> lengths = {700, 150, 180};
  SparseArray sparse(static_cast<size_t>(B * N * 3) * sizeof(T));
  if (!sparse.reserved()) {
    fail(name, "could not reserve " + std::to_string(B * N * 3 * static_cast<int64_t>(sizeof(T))) +
                   " bytes of address space");
    return;
  }
  Rng rng(41);
  std::vector<T> dense(static_cast<size_t>(B * dense_n * 3), T(0));
  T* xyz = sparse.as<T>();
  for (int64_t b = 0; b < B; ++b) {
    if (!sparse.commit<T>(3 * N * b, 3 * lengths[static_cast<size_t>(b)])) {
      fail(name, "could not commit memory for cloud " + std::to_string(b));
      return;
    }
    for (int64_t i = 0; i < 3 * lengths[static_cast<size_t>(b)]; ++i) {
      const T v = T(rng.signed_unit());
      xyz[3 * N * b + i] = v;
      dense[static_cast<size_t>(3 * dense_n * b + i)] = v;
    }
  }
  const std::vector<T> query = make_points<T>(rng, B * M, false);

  const std::vector<int64_t> picks = fps(name, xyz, lengths, B, N, 100, 3);
  expect_same(name, picks, fps(name, dense.data(), lengths, B, dense_n, 100, 3), "fps");
  const Neighbours<T> nearest = knn(name, xyz, query, lengths, {}, B, N, M, 8);
  const Neighbours<T> near_dense = knn(name, dense.data(), query, lengths, {}, B, dense_n, M, 8);
  expect_same(name, nearest.idx, near_dense.idx, "knn idx");
  expect_same(name, nearest.dist2, near_dense.dist2, "knn dist2");
  const Neighbours<T> ball = ball_query(name, xyz, query, lengths, {}, B, N, M, 0.3, true, 16, true);
  const Neighbours<T> ball_dense =
      ball_query(name, dense.data(), query, lengths, {}, B, dense_n, M, 0.3, true, 16, true);
  expect_same(name, ball.idx, ball_dense.idx, "ball_query idx");
  expect_same(name, ball.count, ball_dense.count, "ball_query count");
  expect_same(name, ball.dist2, ball_dense.dist2, "ball_query dist2");
  Hash h;
  h.add(picks);
  h.add(nearest.idx);
  h.add(nearest.dist2);
  h.add(ball.idx);
  h.add(ball.count);
  h.add(ball.dist2);
  report(name, h);
}

// Gathers from feat [1, 2, N] with N = 2^31 + 8195: indices beyond 2^31 and row offsets
// c*N + j beyond 2^32, only the features read being backed by memory. The results must equal
// those on the same features packed into a dense [1, 2, U] array (U = distinct indices).
template <class T>
void sparse_gather_cases() {
  const std::string name = "sparse64_gather" + suffix<T>();
  const int64_t B = 1, C = 2, N = (int64_t(1) << 31) + 8195, P = 40, T3 = 3;
  SparseArray sparse(static_cast<size_t>(B * C * N) * sizeof(T));
  if (!sparse.reserved()) {
    fail(name, "could not reserve " + std::to_string(B * C * N * static_cast<int64_t>(sizeof(T))) +
                   " bytes of address space");
    return;
  }
  Rng rng(51);
  const int64_t two31 = int64_t(1) << 31;
  const int64_t edges[] = {0, 1, two31 - 1, two31, two31 + 1, two31 + 4097, N - 2, N - 1, -1};
  std::vector<int64_t> idx(static_cast<size_t>(B * P * T3));
  for (int64_t& j : idx) j = rng.below(2) == 0 ? edges[rng.below(9)] : rng.below(N);
  std::map<int64_t, int64_t> column_of;  // sparse index -> dense column
  for (int64_t j : idx) {
    if (j >= 0) column_of.emplace(j, 0);
  }
  std::vector<int64_t> columns;
  for (auto& entry : column_of) {
    entry.second = static_cast<int64_t>(columns.size());
    columns.push_back(entry.first);
  }
  const int64_t U = static_cast<int64_t>(columns.size());
  std::vector<int64_t> dense_idx(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) dense_idx[i] = idx[i] < 0 ? -1 : column_of[idx[i]];
  std::vector<T> dense(static_cast<size_t>(B * C * U));
  T* feat = sparse.as<T>();
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t u = 0; u < U; ++u) {
      const int64_t at = c * N + columns[static_cast<size_t>(u)];
      if (!sparse.commit<T>(at, 1)) {
        fail(name, "could not commit memory for feature " + std::to_string(at));
        return;
      }
      const T v = T(rng.signed_unit());
      feat[at] = v;
      dense[static_cast<size_t>(c * U + u)] = v;
    }
  }
  const std::vector<T> w = make_values<T>(rng, B * P * T3);
  const std::vector<T> grad_out = make_values<T>(rng, B * C * P);

  const std::vector<T> out = gather(name, feat, idx, w, B, C, N, P, T3);
  expect_same(name, out, gather(name, dense.data(), dense_idx, w, B, C, U, P, T3), "gather");
  const std::vector<T> grad_w = gather_backward_weight(name, grad_out, feat, idx, B, C, N, P, T3);
  expect_same(name, grad_w, gather_backward_weight(name, grad_out, dense.data(), dense_idx, B, C, U, P, T3),
              "gather_backward_weight");
  Hash h;
  h.add(out);
  h.add(grad_w);
  report(name, h);
}

template <class T>
void all_cases() {
  fps_cases<T>();
  neighbour_cases<T>();
  gather_cases<T>();
  sparse_neighbour_cases<T>();
  sparse_gather_cases<T>();
}

}  // namespace

int main() {
  all_cases<float>();
  all_cases<double>();
  if (g_failures > 0) {
    std::fprintf(stderr, "%d self-check(s) failed\n", g_failures);
    return 1;
  }
  return 0;
}

// Pieces shared by the brute-force (tiled) neighbour searches of ball_query.cu and knn.cu: one
// thread per query, the block stages the cloud through shared memory one tile at a time.
#pragma once

#include "common.cuh"

namespace pointops {
namespace cuda_detail {

constexpr int kScanThreads = 256;
constexpr int kScanTile = 1024;  // points per shared-memory tile

// A cloud point in shared memory, padded to 16 (or 32) bytes for one vector load.
template <class A>
struct alignas(4 * sizeof(A)) Point4 {
  A x, y, z, pad;
};

// The query this thread owns in cloud b, with `lanes` threads per query (blockIdx.x picks a
// range of kScanThreads / lanes queries): its global row q = b*M + m, whether it is inside the
// cloud's query length, and its point.
template <class A>
struct ScanQuery {
  int64_t n;    // valid points of the cloud
  int64_t m;    // query index in the cloud
  int64_t q;    // b * M + m
  bool active;  // m < the cloud's query length
  A x, y, z;

  template <class T>
  __device__ __forceinline__ ScanQuery(const T* query, const int64_t* lengths, const int64_t* query_lengths,
                                       int64_t b, int64_t N, int64_t M, int lanes = 1) {
    n = clamped_length(lengths, b, N);
    const int64_t mq = clamped_length(query_lengths, b, M);
    m = blockIdx.x * static_cast<int64_t>(kScanThreads / lanes) + threadIdx.x / lanes;
    q = b * M + m;
    active = m < mq;
    x = y = z = A(0);
    if (active) {
      x = to_acc(query[q * 3]);
      y = to_acc(query[q * 3 + 1]);
      z = to_acc(query[q * 3 + 2]);
    }
  }
};

// Blocks of a tiled scan with `lanes` threads per query: x over the queries of a cloud, y over
// the clouds (grid-stride in y).
inline dim3 tiled_scan_blocks(int64_t B, int64_t M, int lanes = 1) {
  return dim3(static_cast<unsigned int>(ceil_div(M, kScanThreads / lanes)),
              static_cast<unsigned int>(B < 65535 ? B : 65535));
}

// Copies points base..base+kScanTile of the cloud (at most n) into the tile; returns how many.
// The caller brackets it with the barriers its loop needs.
template <class T, class A>
__device__ __forceinline__ int stage_tile(Point4<A>* tile, const T* pts, int64_t base, int64_t n) {
  for (int t = threadIdx.x; t < kScanTile && base + t < n; t += kScanThreads) {
    const int64_t j = base + t;
    tile[t] = Point4<A>{to_acc(pts[j * 3]), to_acc(pts[j * 3 + 1]), to_acc(pts[j * 3 + 2]), A(0)};
  }
  return static_cast<int>(n - base < kScanTile ? n - base : kScanTile);
}

}  // namespace cuda_detail
}  // namespace pointops

// Exact farthest point sampling of one cloud with kd-tree pruning (csrc/cpu/fps_kdtree.cpp).
#pragma once

#include <cstdint>

namespace pointops {
namespace cpu {

// Writes picks (1 <= picks <= n) indices of the n points xyz [n,3] to idx, starting at `first`.
// The result is identical to the brute-force scan in fps_cpu.cpp: same float operations, same
// ties (lowest index). Returns false, writing nothing, when a coordinate is not finite (box
// bounds would not hold); the caller then uses the brute-force scan.
template <typename T>
bool sample_cloud_kdtree(const T* xyz, int64_t n, int64_t picks, int64_t first, int64_t* idx);

}  // namespace cpu
}  // namespace pointops

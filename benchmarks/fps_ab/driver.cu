// A/B timing of one build of the CUDA FPS kernels (this binary links exactly one fps.cu): each
// shape is timed (best of 5 calls, CUDA events) and its indices compared with the CPU kernel's.
// benchmarks/fps_ab/run.sh builds one binary per fps.cu and runs them in turn.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "tuning.h"

using namespace pointops;

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::printf("%s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

struct Shape {
  int64_t B, N, K, G;  // G > 0 forces that many blocks per cloud (grid or cluster plans)
};

// Deterministic points in the unit cube (an LCG), so every binary sees the same clouds.
std::vector<float> cloud_points(const Shape& s) {
  std::vector<float> pts(static_cast<size_t>(s.B * s.N * 3));
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (float& v : pts) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<float>(state >> 40) / static_cast<float>(1 << 24);
  }
  return pts;
}

// Returns false when the GPU's indices differ from the CPU's.
bool time_shape(const char* tag, const Shape& s) {
  const std::vector<float> pts = cloud_points(s);
  std::vector<int64_t> want(static_cast<size_t>(s.B * s.K)), got(want.size());
  if (const char* e =
          furthest_point_sample_cpu(Dtype::Float32, pts.data(), nullptr, s.B, s.N, s.K, 0, want.data())) {
    std::printf("cpu: %s\n", e);
    std::exit(1);
  }
  set_tuning(Knob::FpsGroup, s.G > 0 ? s.G : kUnset);
  const CudaPlan plan = furthest_point_sample_cuda_plan(Dtype::Float32, s.B, s.N, s.K);
  float* xyz = nullptr;
  int64_t* idx = nullptr;
  void* workspace = nullptr;
  check(cudaMalloc(&xyz, pts.size() * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&idx, want.size() * sizeof(int64_t)), "cudaMalloc");
  if (plan.workspace_bytes) check(cudaMalloc(&workspace, plan.workspace_bytes), "cudaMalloc");
  check(cudaMemcpy(xyz, pts.data(), pts.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  auto call = [&] {
    if (const char* e = furthest_point_sample_cuda(plan, Dtype::Float32, xyz, nullptr, s.B, s.N, s.K, 0, idx,
                                                   workspace, nullptr)) {
      std::printf("fps: %s\n", e);
      std::exit(1);
    }
  };
  call();
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t begin, end;
  cudaEventCreate(&begin);
  cudaEventCreate(&end);
  float best_ms = 1e30f;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(begin);
    call();
    cudaEventRecord(end);
    check(cudaEventSynchronize(end), "fps");
    float ms = 0.f;
    cudaEventElapsedTime(&ms, begin, end);
    best_ms = ms < best_ms ? ms : best_ms;
  }
  check(cudaMemcpy(got.data(), idx, got.size() * sizeof(int64_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  const bool same = std::memcmp(got.data(), want.data(), got.size() * sizeof(int64_t)) == 0;
  std::printf("%-8s B%lld N%lld K%lld G=%lld path=%d blocks=%lld: %.3f ms %.3f us/step %s\n", tag,
              static_cast<long long>(s.B), static_cast<long long>(s.N), static_cast<long long>(s.K),
              static_cast<long long>(s.G), plan.path, static_cast<long long>(plan.shape[0]), best_ms,
              best_ms * 1e3 / static_cast<double>(s.K), same ? "== cpu" : "DIFFERS FROM CPU");
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaFree(xyz);
  cudaFree(idx);
  if (workspace) cudaFree(workspace);
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  const char* tag = argc > 1 ? argv[1] : "fps";
  std::vector<Shape> shapes = {{1, 1000000, 4096, -1}, {1, 300000, 2048, -1}, {1, 100000, 1024, -1},
                               {2, 700, 50, -1},       {16, 4096, 1024, -1},  {8, 16384, 1024, -1},
                               {4, 200000, 512, -1},   {1, 300000, 300, 147}, {2, 2500000, 64, -1}};
  // "quick": small grid and stream shapes for compute-sanitizer (cluster shapes with large
  // shared tails took racecheck minutes each)
  if (argc > 2 && std::strcmp(argv[2], "quick") == 0) {
    shapes = {{1, 300000, 64, -1}, {1, 100000, 64, 49}, {2, 2500000, 8, -1}, {3, 30000, 40, 30}};
  }
  bool all_same = true;
  for (const Shape& s : shapes) all_same = time_shape(tag, s) && all_same;
  set_tuning(Knob::FpsGroup, kUnset);
  return all_same ? 0 : 1;
}

// The GPU correctness oracle of pointops: every CUDA path checked against the CPU kernels through
// kernels.h, without torch (check, small, tiny), plus timings of the kernels alone (bench, sweep).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Iops-src/csrc tests/gpu/kernel_oracle.cu \
//        ops-src/csrc/cuda/*.cu ops-src/csrc/cpu/*.cpp ops-src/csrc/tuning.cpp -o kernel_oracle
//   ./kernel_oracle check            # every CUDA path against the CPU kernels, on random data
//   ./kernel_oracle bench out.json   # the issue's shapes, median of CUDA-event timings
//   ./kernel_oracle sweep out.json   # FPS only, plus the group sizes the planner did not pick
//   ./kernel_oracle sweep-all out.json  # every shape, plus the paths the planners did not pick
//   ./kernel_oracle gathers out.json    # the gathers alone, plus the paths the planners did not pick
//                                       # (ORACLE_GATHERS_ONLY=three_interpolate: that shape alone)
//   ./kernel_oracle small            # one small run of every path (for compute-sanitizer memcheck)
//   ./kernel_oracle tiny             # fewer, smaller cases (for racecheck, which is slower)
//
// The CPU kernels of the project are the reference: float16/bfloat16 inputs are compared with
// the float32 CPU kernel on the same (exactly converted) values, so indices must match exactly
// and distances must match after rounding to the output type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cpu/parallel.h"
#include "kernels.h"
#include "tuning.h"

using namespace pointops;

// Forces a planner's choice through its knob (value null: back to the planner's own).
static void knob(const char* name, const char* value) {
  Knob k;
  if (!tuning_knob(name, &k)) {
    std::fprintf(stderr, "unknown tuning knob %s\n", name);
    std::exit(2);
  }
  set_tuning(k, value == nullptr ? kUnset : std::atoll(value));
}

// ---------------------------------------------------------------------------------------------
// Utilities

#define CK(expr) check_cuda((expr), #expr, __LINE__)
static void check_cuda(cudaError_t err, const char* what, int line) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "CUDA error %s at line %d: %s\n", cudaGetErrorString(err), line, what);
    std::exit(2);
  }
}
static void check_status(Status st, const char* what) {
  if (st != nullptr) {
    std::fprintf(stderr, "kernel %s failed: %s\n", what, st);
    std::exit(2);
  }
}

static void thread_backend(int64_t begin, int64_t end, int64_t grain, cpu::RangeBody body, void* ctx) {
  const int64_t threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t chunk = std::max<int64_t>(grain, (end - begin + threads - 1) / threads);
  std::vector<std::thread> pool;
  for (int64_t b = begin; b < end; b += chunk) pool.emplace_back(body, b, std::min(end, b + chunk), ctx);
  for (auto& t : pool) t.join();
}
static int64_t thread_total() { return std::max<int64_t>(1, std::thread::hardware_concurrency()); }

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n = 0) : bytes(n) {
    if (n) CK(cudaMalloc(&ptr, n));
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class U>
  U* as() const {
    return static_cast<U*>(ptr);
  }
};

static size_t elem_size(Dtype dt) { return dt == Dtype::Float64 ? 8 : (dt == Dtype::Float32 ? 4 : 2); }
static const char* dt_name(Dtype dt) {
  switch (dt) {
    case Dtype::Float32: return "f32";
    case Dtype::Float64: return "f64";
    case Dtype::Float16: return "f16";
    case Dtype::BFloat16: return "bf16";
  }
  return "?";
}

// Values as stored in dt (bytes), and back.
static std::vector<unsigned char> encode(const std::vector<double>& v, Dtype dt) {
  std::vector<unsigned char> out(v.size() * elem_size(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dt) {
      case Dtype::Float32: {
        float f = static_cast<float>(v[i]);
        std::memcpy(&out[i * 4], &f, 4);
        break;
      }
      case Dtype::Float64: {
        std::memcpy(&out[i * 8], &v[i], 8);
        break;
      }
      case Dtype::Float16: {
        __half h = __float2half_rn(static_cast<float>(v[i]));
        std::memcpy(&out[i * 2], &h, 2);
        break;
      }
      case Dtype::BFloat16: {
        __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(v[i]));
        std::memcpy(&out[i * 2], &h, 2);
        break;
      }
    }
  }
  return out;
}
static std::vector<double> decode(const unsigned char* p, size_t n, Dtype dt) {
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (dt) {
      case Dtype::Float32: {
        float f;
        std::memcpy(&f, p + i * 4, 4);
        out[i] = f;
        break;
      }
      case Dtype::Float64: {
        std::memcpy(&out[i], p + i * 8, 8);
        break;
      }
      case Dtype::Float16: {
        __half h;
        std::memcpy(&h, p + i * 2, 2);
        out[i] = __half2float(h);
        break;
      }
      case Dtype::BFloat16: {
        __nv_bfloat16 h;
        std::memcpy(&h, p + i * 2, 2);
        out[i] = __bfloat162float(h);
        break;
      }
    }
  }
  return out;
}
// Rounds values to what dt can hold (so the reference sees exactly the GPU's inputs).
static std::vector<double> representable(const std::vector<double>& v, Dtype dt) {
  auto bytes = encode(v, dt);
  return decode(bytes.data(), v.size(), dt);
}

static DeviceBuffer upload(const std::vector<unsigned char>& bytes) {
  DeviceBuffer d(bytes.size());
  if (!bytes.empty()) CK(cudaMemcpy(d.ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return d;
}
static DeviceBuffer upload_i64(const std::vector<int64_t>& v) {
  DeviceBuffer d(v.size() * 8);
  if (!v.empty()) CK(cudaMemcpy(d.ptr, v.data(), v.size() * 8, cudaMemcpyHostToDevice));
  return d;
}
static std::vector<int64_t> download_i64(const DeviceBuffer& d, size_t n) {
  std::vector<int64_t> v(n);
  if (n) CK(cudaMemcpy(v.data(), d.ptr, n * 8, cudaMemcpyDeviceToHost));
  return v;
}
static std::vector<double> download(const DeviceBuffer& d, size_t n, Dtype dt) {
  std::vector<unsigned char> bytes(n * elem_size(dt));
  if (n) CK(cudaMemcpy(bytes.data(), d.ptr, bytes.size(), cudaMemcpyDeviceToHost));
  return decode(bytes.data(), n, dt);
}
// Fills a buffer with a recognisable pattern so that unwritten outputs show up.
static void poison(const DeviceBuffer& d) {
  if (d.bytes) CK(cudaMemset(d.ptr, 0x5b, d.bytes));
}

static std::mt19937_64 rng(12345);
static std::vector<double> uniform_points(size_t count, bool quantized) {
  std::uniform_real_distribution<double> u(1.0, 2.0);
  std::vector<double> v(count);
  for (auto& x : v) x = quantized ? 1.0 + std::floor(u(rng) * 8.0 - 8.0) / 8.0 : u(rng);
  return v;
}
static std::vector<int64_t> random_lengths(int64_t B, int64_t N) {
  std::uniform_int_distribution<int64_t> u(0, N);
  std::vector<int64_t> v(B);
  for (auto& x : v) x = u(rng);
  if (B > 1) v[0] = N;  // keep one full cloud
  if (B > 2) v[1] = 0;  // and one empty
  return v;
}

// Runs the CPU reference on values held as float (for f32/f16/bf16) or double (for f64).
struct HostPoints {
  std::vector<float> f;
  std::vector<double> d;
  const void* ptr(Dtype dt) const {
    return dt == Dtype::Float64 ? static_cast<const void*>(d.data()) : f.data();
  }
};
static HostPoints host_copy(const std::vector<double>& v) {
  HostPoints h;
  h.d = v;
  h.f.assign(v.begin(), v.end());
  return h;
}
static Dtype ref_dt(Dtype dt) { return dt == Dtype::Float64 ? Dtype::Float64 : Dtype::Float32; }

static int failures = 0;
static void report(const std::string& name, int64_t bad_idx, double max_err, bool ok) {
  std::printf("%-4s %-70s idx_mismatch=%lld max_err=%.3g\n", ok ? "ok" : "FAIL", name.c_str(),
              static_cast<long long>(bad_idx), max_err);
  if (!ok) ++failures;
}

// Compares distances after rounding the reference to dt (inf == inf).
static double dist_error(const std::vector<double>& gpu, const std::vector<double>& ref, Dtype dt) {
  const std::vector<double> r = representable(ref, dt);
  double worst = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (std::isinf(r[i]) && std::isinf(gpu[i]) && (r[i] > 0) == (gpu[i] > 0)) continue;
    const double e = std::fabs(gpu[i] - r[i]);
    if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
  }
  return worst;
}
static int64_t idx_mismatch(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += a[i] != b[i];
  return bad;
}

// ---------------------------------------------------------------------------------------------
// Checks

static void check_fps(Dtype dt, int64_t B, int64_t N, int64_t K, bool with_lengths, int64_t start,
                      bool quantized, const char* env_name = nullptr, const char* env_value = nullptr) {
  if (env_name) knob(env_name, env_value);
  const auto pts = representable(uniform_points(B * N * 3, quantized), dt);
  const auto lengths = with_lengths ? random_lengths(B, N) : std::vector<int64_t>();
  auto d_xyz = upload(encode(pts, dt));
  auto d_len = upload_i64(lengths);
  const CudaPlan plan = furthest_point_sample_cuda_plan(dt, B, N, K);
  DeviceBuffer d_idx(B * K * 8), ws(plan.workspace_bytes);
  poison(d_idx);
  check_status(furthest_point_sample_cuda(plan, dt, d_xyz.ptr, with_lengths ? d_len.as<int64_t>() : nullptr,
                                          B, N, K, start, d_idx.as<int64_t>(), ws.ptr, nullptr),
               "fps");
  CK(cudaDeviceSynchronize());
  const auto got = download_i64(d_idx, B * K);
  const HostPoints h = host_copy(pts);
  std::vector<int64_t> ref(B * K);
  check_status(furthest_point_sample_cpu(ref_dt(dt), h.ptr(dt), with_lengths ? lengths.data() : nullptr, B, N,
                                         K, start, ref.data()),
               "fps_cpu");
  const int64_t bad = idx_mismatch(got, ref);
  char name[200];
  std::snprintf(name, sizeof name, "fps %s B%lld N%lld K%lld len=%d start=%lld quant=%d %s%s%s", dt_name(dt),
                (long long)B, (long long)N, (long long)K, with_lengths, (long long)start, quantized,
                env_name ? env_name : "", env_name ? "=" : "", env_value ? env_value : "");
  report(name, bad, 0, bad == 0);
  if (env_name) knob(env_name, nullptr);
}

static void check_ball(Dtype dt, int64_t B, int64_t N, int64_t M, double r, int64_t K, bool inclusive,
                       bool with_lengths, bool with_dist) {
  const auto pts = representable(uniform_points(B * N * 3, false), dt);
  auto qv = representable(uniform_points(B * M * 3, false), dt);
  for (int64_t b = 0; b < B; ++b)  // queries = the first M points, as in the issue
    for (int64_t m = 0; m < std::min(M, N); m += 2)
      for (int a = 0; a < 3; ++a) qv[(b * M + m) * 3 + a] = pts[(b * N + m) * 3 + a];
  const auto lengths = with_lengths ? random_lengths(B, N) : std::vector<int64_t>();
  const auto qlengths = with_lengths ? random_lengths(B, M) : std::vector<int64_t>();
  auto d_xyz = upload(encode(pts, dt)), d_q = upload(encode(qv, dt));
  auto d_len = upload_i64(lengths), d_qlen = upload_i64(qlengths);
  DeviceBuffer d_idx(B * M * K * 8), d_cnt(B * M * 8), d_dist(B * M * K * elem_size(dt)),
      ws(ball_query_cuda_plan(dt, B, N, M, K).workspace_bytes);
  poison(d_idx), poison(d_cnt), poison(d_dist);
  const int64_t* lp = with_lengths ? d_len.as<int64_t>() : nullptr;
  const int64_t* qp = with_lengths ? d_qlen.as<int64_t>() : nullptr;
  check_status(ball_query_cuda(ball_query_cuda_plan(dt, B, N, M, K), dt, d_xyz.ptr, d_q.ptr, lp, qp, B, N, M,
                               r, inclusive, K, d_idx.as<int64_t>(), d_cnt.as<int64_t>(),
                               with_dist ? d_dist.ptr : nullptr, ws.ptr, nullptr),
               "ball_query");
  CK(cudaDeviceSynchronize());
  const HostPoints hp = host_copy(pts), hq = host_copy(qv);
  std::vector<int64_t> ridx(B * M * K), rcnt(B * M);
  std::vector<float> rdf(B * M * K);
  std::vector<double> rdd(B * M * K);
  void* rd = dt == Dtype::Float64 ? static_cast<void*>(rdd.data()) : rdf.data();
  check_status(ball_query_cpu(ref_dt(dt), hp.ptr(dt), hq.ptr(dt), with_lengths ? lengths.data() : nullptr,
                              with_lengths ? qlengths.data() : nullptr, B, N, M, r, inclusive, K, ridx.data(),
                              rcnt.data(), rd),
               "ball_query_cpu");
  int64_t bad =
      idx_mismatch(download_i64(d_idx, B * M * K), ridx) + idx_mismatch(download_i64(d_cnt, B * M), rcnt);
  double err = 0;
  if (with_dist) {
    std::vector<double> ref = dt == Dtype::Float64 ? rdd : std::vector<double>(rdf.begin(), rdf.end());
    err = dist_error(download(d_dist, B * M * K, dt), ref, dt);
  }
  char name[200];
  std::snprintf(name, sizeof name, "ball %s B%lld N%lld M%lld r%g K%lld incl=%d len=%d dist=%d lanes=%lld",
                dt_name(dt), (long long)B, (long long)N, (long long)M, r, (long long)K, inclusive,
                with_lengths, with_dist, (long long)ball_query_cuda_plan(dt, B, N, M, K).shape[0]);
  report(name, bad, err, bad == 0 && err == 0);
}

static void check_knn(Dtype dt, int64_t B, int64_t N, int64_t M, int64_t K, bool with_lengths,
                      bool quantized) {
  const auto pts = representable(uniform_points(B * N * 3, quantized), dt);
  auto qv = representable(uniform_points(B * M * 3, quantized), dt);
  const auto lengths = with_lengths ? random_lengths(B, N) : std::vector<int64_t>();
  const auto qlengths = with_lengths ? random_lengths(B, M) : std::vector<int64_t>();
  auto d_xyz = upload(encode(pts, dt)), d_q = upload(encode(qv, dt));
  auto d_len = upload_i64(lengths), d_qlen = upload_i64(qlengths);
  const CudaPlan plan = knn_cuda_plan(dt, B, N, M, K);
  DeviceBuffer d_idx(B * M * K * 8), d_dist(B * M * K * elem_size(dt)), ws(plan.workspace_bytes);
  poison(d_idx), poison(d_dist);
  check_status(knn_cuda(plan, dt, d_xyz.ptr, d_q.ptr, with_lengths ? d_len.as<int64_t>() : nullptr,
                        with_lengths ? d_qlen.as<int64_t>() : nullptr, B, N, M, K, d_dist.ptr,
                        d_idx.as<int64_t>(), ws.ptr, nullptr),
               "knn");
  CK(cudaDeviceSynchronize());
  const HostPoints hp = host_copy(pts), hq = host_copy(qv);
  std::vector<int64_t> ridx(B * M * K);
  std::vector<float> rdf(B * M * K);
  std::vector<double> rdd(B * M * K);
  void* rd = dt == Dtype::Float64 ? static_cast<void*>(rdd.data()) : rdf.data();
  check_status(knn_cpu(ref_dt(dt), hp.ptr(dt), hq.ptr(dt), with_lengths ? lengths.data() : nullptr,
                       with_lengths ? qlengths.data() : nullptr, B, N, M, K, rd, ridx.data()),
               "knn_cpu");
  const int64_t bad = idx_mismatch(download_i64(d_idx, B * M * K), ridx);
  std::vector<double> ref = dt == Dtype::Float64 ? rdd : std::vector<double>(rdf.begin(), rdf.end());
  const double err = dist_error(download(d_dist, B * M * K, dt), ref, dt);
  char name[200];
  std::snprintf(name, sizeof name, "knn %s B%lld N%lld M%lld K%lld len=%d quant=%d", dt_name(dt),
                (long long)B, (long long)N, (long long)M, (long long)K, with_lengths, quantized);
  report(name, bad, err, bad == 0 && err == 0);
}

static std::vector<int64_t> random_indices(size_t count, int64_t N, double missing) {
  std::uniform_int_distribution<int64_t> u(0, N - 1);
  std::uniform_real_distribution<double> p(0, 1);
  std::vector<int64_t> v(count);
  for (auto& x : v) x = p(rng) < missing ? -1 : u(rng);
  return v;
}

// n outputs of a CPU kernel run in the reference type rdt (float32 or float64), as doubles.
template <class F>
static std::vector<double> cpu_reference(Dtype rdt, size_t n, F&& call) {
  std::vector<float> rf(n);
  std::vector<double> rd(n);
  check_status(call(rdt == Dtype::Float64 ? static_cast<void*>(rd.data()) : rf.data()), "cpu");
  return rdt == Dtype::Float64 ? rd : std::vector<double>(rf.begin(), rf.end());
}

static void check_gather(Dtype dt, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, bool weighted) {
  const auto feat = representable(uniform_points(B * C * N, false), dt);
  const auto idx = random_indices(B * P * T, N, 0.1);
  std::vector<double> w =
      weighted ? representable(uniform_points(B * P * T, false), dt) : std::vector<double>();
  const auto grad = representable(uniform_points(B * C * P, false), dt);
  auto d_feat = upload(encode(feat, dt)), d_w = upload(encode(w, dt)), d_g = upload(encode(grad, dt));
  auto d_idx = upload_i64(idx);
  DeviceBuffer d_out(B * C * P * elem_size(dt)), d_gf(B * C * N * elem_size(dt)),
      d_gw(B * P * T * elem_size(dt)), ws(gather_backward_feat_cuda_plan(dt, B, C, N, P, T).workspace_bytes);
  poison(d_out), poison(d_gf), poison(d_gw);
  const void* wp = weighted ? d_w.ptr : nullptr;
  check_status(gather_forward_cuda(dt, d_feat.ptr, d_idx.as<int64_t>(), wp, B, C, N, P, T, d_out.ptr, nullptr,
                                   nullptr),
               "gather");
  check_status(
      gather_backward_feat_cuda(gather_backward_feat_cuda_plan(dt, B, C, N, P, T), dt, d_g.ptr,
                                d_idx.as<int64_t>(), wp, B, C, N, P, T, d_gf.ptr, ws.ptr, nullptr, nullptr),
      "gather_backward_feat");
  if (weighted)
    check_status(gather_backward_weight_cuda(dt, d_g.ptr, d_feat.ptr, d_idx.as<int64_t>(), B, C, N, P, T,
                                             d_gw.ptr, nullptr, nullptr),
                 "gather_backward_weight");
  CK(cudaDeviceSynchronize());
  const HostPoints hf = host_copy(feat), hw = host_copy(w), hg = host_copy(grad);
  const Dtype rdt = ref_dt(dt);
  auto run_ref = [&](size_t n, auto&& call) { return cpu_reference(rdt, n, call); };
  const void* hwp = weighted ? hw.ptr(dt) : nullptr;
  auto ref_out = run_ref(B * C * P, [&](void* o) {
    return gather_forward_cpu(rdt, hf.ptr(dt), idx.data(), hwp, B, C, N, P, T, o);
  });
  auto ref_gf = run_ref(B * C * N, [&](void* o) {
    return gather_backward_feat_cpu(rdt, hg.ptr(dt), idx.data(), hwp, B, C, N, P, T, o);
  });
  // Reduced precision accumulates in float32 but rounds once at the end: compare within one ulp
  // of the output type (the CPU reference rounds the same float32 sum).
  const double e1 = dist_error(download(d_out, B * C * P, dt), ref_out, dt);
  const double e2 = dist_error(download(d_gf, B * C * N, dt), ref_gf, dt);
  double e3 = 0;
  if (weighted) {
    auto ref_gw = run_ref(B * P * T, [&](void* o) {
      return gather_backward_weight_cpu(rdt, hg.ptr(dt), hf.ptr(dt), idx.data(), B, C, N, P, T, o);
    });
    e3 = dist_error(download(d_gw, B * P * T, dt), ref_gw, dt);
  }
  char name[200];
  std::snprintf(name, sizeof name, "gather fwd/bwd_feat/bwd_w %s B%lld C%lld N%lld P%lld T%lld w=%d",
                dt_name(dt), (long long)B, (long long)C, (long long)N, (long long)P, (long long)T, weighted);
  const double err = std::max(e1, std::max(e2, e3));
  report(name, 0, err, err == 0);
  if (err != 0) std::printf("     forward %.3g backward_feat %.3g backward_weight %.3g\n", e1, e2, e3);
}

// Packed rows (channels-last): feat [P,C], idx [Q,T], grad_out [Q,C]. shift moves the device
// feat and grad_out by that many elements, so a row's chunks lose their 16-byte alignment;
// idx32 hands the kernels the indices as int32.
static void check_gather_rows(Dtype dt, int64_t P, int64_t C, int64_t Q, int64_t T, bool weighted, int shift,
                              bool idx32 = false) {
  const auto feat = representable(uniform_points(P * C, false), dt);
  const auto idx = random_indices(Q * T, P, 0.1);
  std::vector<double> w = weighted ? representable(uniform_points(Q * T, false), dt) : std::vector<double>();
  const auto grad = representable(uniform_points(Q * C, false), dt);
  const size_t es = elem_size(dt), pad = static_cast<size_t>(shift) * es;
  auto shifted = [&](const std::vector<double>& v) {
    std::vector<unsigned char> bytes(pad, 0);
    const auto body = encode(v, dt);
    bytes.insert(bytes.end(), body.begin(), body.end());
    return upload(bytes);
  };
  auto d_feat = shifted(feat), d_g = shifted(grad), d_w = upload(encode(w, dt));
  std::vector<unsigned char> idx_bytes;
  if (idx32) {
    std::vector<int32_t> narrow(idx.begin(), idx.end());
    idx_bytes.resize(narrow.size() * 4);
    if (!narrow.empty()) std::memcpy(idx_bytes.data(), narrow.data(), idx_bytes.size());
  } else {
    idx_bytes.resize(idx.size() * 8);
    if (!idx.empty()) std::memcpy(idx_bytes.data(), idx.data(), idx_bytes.size());
  }
  auto d_idx = upload(idx_bytes);
  const RowIndex rix{d_idx.ptr, idx32};
  const CudaPlan plan = gather_rows_backward_feat_cuda_plan(dt, P, C, Q, T);
  DeviceBuffer d_out(Q * C * es), d_gf(P * C * es), d_gw(Q * T * es), ws(plan.workspace_bytes);
  poison(d_out), poison(d_gf), poison(d_gw);
  const void* feat_p = d_feat.as<unsigned char>() + pad;
  const void* grad_p = d_g.as<unsigned char>() + pad;
  const void* wp = weighted ? d_w.ptr : nullptr;
  check_status(gather_rows_cuda(dt, feat_p, rix, wp, P, C, Q, T, d_out.ptr, nullptr, nullptr), "gather_rows");
  check_status(gather_rows_backward_feat_cuda(plan, dt, grad_p, rix, wp, P, C, Q, T, d_gf.ptr, ws.ptr,
                                              nullptr, nullptr),
               "gather_rows_backward_feat");
  if (weighted)
    check_status(
        gather_rows_backward_weight_cuda(dt, grad_p, feat_p, rix, P, C, Q, T, d_gw.ptr, nullptr, nullptr),
        "gather_rows_backward_weight");
  CK(cudaDeviceSynchronize());
  const HostPoints hf = host_copy(feat), hw = host_copy(w), hg = host_copy(grad);
  const Dtype rdt = ref_dt(dt);
  auto run_ref = [&](size_t n, auto&& call) { return cpu_reference(rdt, n, call); };
  const void* hwp = weighted ? hw.ptr(dt) : nullptr;
  auto ref_out = run_ref(
      Q * C, [&](void* o) { return gather_rows_cpu(rdt, hf.ptr(dt), idx.data(), hwp, P, C, Q, T, o); });
  auto ref_gf = run_ref(P * C, [&](void* o) {
    return gather_rows_backward_feat_cpu(rdt, hg.ptr(dt), idx.data(), hwp, P, C, Q, T, o);
  });
  const double e1 = dist_error(download(d_out, Q * C, dt), ref_out, dt);
  const double e2 = dist_error(download(d_gf, P * C, dt), ref_gf, dt);
  double e3 = 0;
  if (weighted) {
    auto ref_gw = run_ref(Q * T, [&](void* o) {
      return gather_rows_backward_weight_cpu(rdt, hg.ptr(dt), hf.ptr(dt), idx.data(), P, C, Q, T, o);
    });
    e3 = dist_error(download(d_gw, Q * T, dt), ref_gw, dt);
  }
  char name[200];
  std::snprintf(name, sizeof name,
                "gather_rows fwd/bwd_feat/bwd_w %s P%lld C%lld Q%lld T%lld w=%d shift=%d idx%s%s",
                dt_name(dt), (long long)P, (long long)C, (long long)Q, (long long)T, weighted, shift,
                idx32 ? "32" : "64", tuning_or(Knob::GatherRowsCounted, 0) == 1 ? " counted" : "");
  const double err = std::max(e1, std::max(e2, e3));
  report(name, 0, err, err == 0);
  if (err != 0) std::printf("     forward %.3g backward_feat %.3g backward_weight %.3g\n", e1, e2, e3);
}

// A few small cases per kernel path, quick enough for compute-sanitizer's racecheck.
static void run_tiny() {
  check_fps(Dtype::Float32, 2, 700, 50, true, 0, false);
  check_fps(Dtype::Float64, 2, 300, 20, true, 0, false);
  check_fps(Dtype::Float32, 2, 3000, 40, true, 0, false, "POINTOPS_FPS_GROUP", "2");
  check_fps(Dtype::Float32, 1, 9000, 30, false, 0, false, "POINTOPS_FPS_GROUP", "1");
  check_fps(Dtype::Float32, 1, 40000, 20, false, 0, false, "POINTOPS_FPS_GROUP", "4");
  check_fps(Dtype::Float32, 1, 30000, 20, false, 0, false, "POINTOPS_FPS_NO_CLUSTER", "1");
  check_ball(Dtype::Float32, 2, 500, 100, 0.2, 8, true, true, true);
  knob("POINTOPS_BALL_QUERY_LANES", "4");  // groups smaller than a warp share its ballots
  check_ball(Dtype::Float32, 2, 500, 100, 0.2, 8, true, true, true);
  knob("POINTOPS_BALL_QUERY_LANES", nullptr);
  check_ball(Dtype::Float32, 1, 9000, 200, 0.1, 8, true, true, true);
  check_knn(Dtype::Float32, 2, 500, 100, 8, true, false);
  check_knn(Dtype::Float32, 2, 500, 60, 40, true, false);
  check_knn(Dtype::Float32, 1, 9000, 100, 16, true, false);
  check_knn(Dtype::Float32, 1, 9000, 60, 40, false, false);
  check_gather(Dtype::Float32, 2, 5, 300, 200, 3, true);
  knob("POINTOPS_GATHER_STAGED", "0");
  check_gather(Dtype::Float32, 2, 5, 300, 200, 3, true);
  knob("POINTOPS_GATHER_STAGED", nullptr);
  check_gather(Dtype::Float16, 2, 5, 300, 450, 3, true);
  check_gather(Dtype::Float32, 2, 5, 300, 450, 1, false);
  check_gather(Dtype::Float32, 1, 40, 100, 50000, 1, false);  // transposed backward
  check_gather(Dtype::Float32, 2, 5, 5000, 300, 1, false);    // fused sparse backward
  check_gather(Dtype::Float16, 1, 3, 4100, 200, 3, true);
  check_gather(Dtype::Float16, 1, 3, 4100, 300, 1, false);  // rows not a multiple of 16 bytes
  knob("POINTOPS_GATHER_SPARSE", "3");                      // fused, long rows
  check_gather(Dtype::Float32, 1, 3, 7, 200, 2, true);
  check_gather(Dtype::Float32, 1, 2, 4100, 4000, 1, false);  // more summed targets than slots
  check_gather(Dtype::Float32, 140, 64, 64, 40, 1, false);   // two chunks per block
  knob("POINTOPS_GATHER_SPARSE", "4");                       // chunked sums, two chunks
  check_gather(Dtype::Float32, 1, 7, 600, 3000, 3, true);
  knob("POINTOPS_GATHER_SPARSE", "5");  // dense sums, two chunks, narrow and wide
  check_gather(Dtype::Float32, 1, 9, 600, 3000, 3, true);
  check_gather(Dtype::Float16, 1, 9, 300, 1024, 3, true);  // one chunk, 69 KB of dynamic smem
  knob("POINTOPS_GATHER_DENSE_WIDE", "1");
  check_gather(Dtype::Float32, 1, 9, 600, 3000, 3, true);
  knob("POINTOPS_GATHER_DENSE_WIDE", nullptr);
  knob("POINTOPS_GATHER_SPARSE", nullptr);
  check_gather_rows(Dtype::Float32, 300, 64, 200, 1, false, 0);  // 16-byte chunks, 4 channels a thread
  check_gather_rows(Dtype::Float16, 300, 6, 200, 1, false, 1);   // 2-byte aligned: one element a thread
  check_gather_rows(Dtype::Float32, 300, 8, 100, 3, true, 0);    // weighted
  check_gather_rows(Dtype::Float32, 300, 64, 200, 16, false, 0, true);  // int32 indices
  knob("POINTOPS_GATHER_ROWS_COUNTED", "1");                            // rows by counting sort
  check_gather_rows(Dtype::Float32, 300, 64, 200, 16, false, 0);
  knob("POINTOPS_GATHER_ROWS_COUNTED", nullptr);
}

static void run_checks(bool small) {
  const Dtype all[] = {Dtype::Float32, Dtype::Float16, Dtype::BFloat16, Dtype::Float64};
  // FPS: every path (block, cluster, grid, stream, general) and the edge cases.
  for (Dtype dt : all) check_fps(dt, 3, 700, 100, true, 5, false);
  check_fps(Dtype::Float32, 2, 10, 20, false, 50, false);  // K > N, start past the end
  check_fps(Dtype::Float32, 4, 3000, 500, true, 0, true);  // ties on a coarse lattice
  check_fps(Dtype::Float32, 16, 4096, 256, false, 0, false);
  check_fps(Dtype::Float32, 2, 20000, 300, true, 7, false);
  check_fps(Dtype::Float32, 1, 100000, 200, false, 0, false);
  check_fps(Dtype::Float16, 1, 100000, 200, false, 0, false);
  for (const char* g : {"1", "2", "4", "8", "16"})
    check_fps(Dtype::Float32, 3, 8000, 150, true, 0, false, "POINTOPS_FPS_GROUP", g);
  check_fps(Dtype::Float32, 2, 15000, 150, true, 3, false, "POINTOPS_FPS_GROUP",
            "1");                                                                    // registers + smem tail
  check_fps(Dtype::Float32, 4, 3000, 500, true, 0, true, "POINTOPS_FPS_LEAN", "0");  // classic block path
  check_fps(Dtype::BFloat16, 5, 7000, 300, true, 2, false);                          // lean path, 256 threads
  // Lean path in 128-thread blocks: every pick of a lattice cloud (ties at each step, decided
  // by the slot tree and the warp fold), and the smallest blocks (2 slots a thread).
  check_fps(Dtype::Float32, 2, 4096, 4096, true, 0, true);
  check_fps(Dtype::Float16, 3, 200, 200, true, 1, true);
  check_fps(Dtype::Float32, 2, 60000, 150, true, 0, true, "POINTOPS_FPS_GROUP", "4");  // hybrid clusters
  check_fps(Dtype::BFloat16, 2, 100000, 100, false, 0, false, "POINTOPS_FPS_GROUP", "8");
  check_fps(Dtype::Float32, 3, 30000, 150, true, 0, true, "POINTOPS_FPS_NO_CLUSTER", "1");  // grid path
  check_fps(Dtype::Float32, 1, 300000, 100, false, 0, false);                               // grid path
  // Grid path with G > 128 (two rounds of polled words); grid by the cost model, many steps.
  check_fps(Dtype::Float32, 1, 300000, 300, false, 0, true, "POINTOPS_FPS_GROUP", "147");
  check_fps(Dtype::BFloat16, 1, 160000, 600, true, 0, true);
  check_fps(Dtype::Float32, 2, small ? 1100000 : 2500000, 30, true, 0, false);  // stream path
  check_fps(Dtype::Float32, 2, 5000, 100, false, 0, false, "POINTOPS_FPS_GENERAL", "1");
  // Ball query: the scan with a thread per query, with 4 and 32 lanes per query and the
  // planner's choice; the grid path; lengths, inclusive/exclusive, K past 32.
  for (const char* lanes : {"1", "4", "32", static_cast<const char*>(nullptr)}) {
    knob("POINTOPS_BALL_QUERY_LANES", lanes);
    for (Dtype dt : all) check_ball(dt, 3, 2000, 300, 0.2, 16, true, true, true);
    check_ball(Dtype::Float32, 2, 3000, 500, 0.1, 5, false, false, true);
    check_ball(Dtype::Float32, 2, 3000, 500, 0.0, 4, true, false, true);
    check_ball(Dtype::Float32, 2, 3000, 500, 5.0, 40, true, true, true);  // every point a hit
    check_ball(Dtype::Float32, 3, 700, 37, 0.3, 70, false, true, false);
  }
  for (Dtype dt : {Dtype::Float32, Dtype::Float16, Dtype::BFloat16})
    check_ball(dt, 2, 40000, small ? 300 : 3000, 0.05, 16, true, true, true);
  check_ball(Dtype::Float32, 1, 70000, 2000, 0.1, 40, false, false, true);
  check_ball(Dtype::Float32, 1, 70000, 2000, 0.0, 3, true, false, false);
  check_ball(Dtype::Float32, 1, 70000, 500, 3.0, 8, true, false, true);  // one cell holds everything
  // kNN: tiled and grid paths, every TopK size, ties.
  for (Dtype dt : all) check_knn(dt, 3, 2000, 300, 16, true, false);
  for (int64_t K : {1, 3, 5, 8, 9, 31, 32, 33, 70}) check_knn(Dtype::Float32, 2, 3000, 257, K, true, false);
  check_knn(Dtype::Float32, 2, 3000, 257, 8, false, true);
  check_knn(Dtype::Float32, 2, 20, 100, 32, true, false);  // K > n
  for (Dtype dt : {Dtype::Float32, Dtype::Float16, Dtype::BFloat16})
    check_knn(dt, 2, 70000, small ? 200 : 2000, 16, true, false);
  for (int64_t K : {1, 3, 33}) check_knn(Dtype::Float32, 1, 70000, small ? 200 : 1000, K, false, false);
  check_knn(Dtype::Float32, 1, 70000, 300, 16, false, true);
  // Gather and its backward.
  for (Dtype dt : all) {
    check_gather(dt, 2, 5, 300, 200, 1, false);
    check_gather(dt, 2, 7, 300, 100, 3, true);
    check_gather(dt, 2, 3, 200, 64, 32, false);
  }
  check_gather(Dtype::Float32, 1, 2, 10, 5000, 4, true);      // many entries per target
  check_gather(Dtype::Float32, 2, 6, 400, 300, 5, true);      // general T, weighted
  check_gather(Dtype::Float32, 2, 37, 3000, 20000, 3, true);  // staged: channel groups, p chunks
  check_gather(Dtype::Float16, 2, 37, 3000, 20000, 3, true);
  check_gather(Dtype::Float32, 2, 3, 30000, 40000, 1, false);        // rows too long to stage
  check_gather(Dtype::Float32, 1, 3, 7, 40000, 2, true);             // rows of ~10^4 entries (heap sort)
  check_gather(Dtype::Float32, 1, 600, 9000, 40, 2, true);           // many channels, few entries
  for (Dtype dt : all) check_gather(dt, 8, 301, 500, 300, 2, true);  // channel groups, every dtype
  for (Dtype dt : {Dtype::Float32, Dtype::Float16}) {
    check_gather(dt, 1, 2, 300000, 30000, 1, false);  // sparse rows, direct forward
  }
  for (Dtype dt : all) check_gather(dt, 2, 9, 500, 5000, 3, true);
  for (Dtype dt : all) check_gather(dt, 2, 9, 500, 5000, 1, false);
  check_gather(Dtype::Float32, 3, 7, 2000, 9000, 2, true);
  // Packed rows: row chunks of 16, 8, 4 and 2 bytes, pointers off their 16-byte alignment, the
  // backward's 16-byte channel groups and single channels, weighted and general T.
  for (Dtype dt : all) {
    for (int64_t C : {1, 2, 3, 4, 8, 64, 67}) {
      check_gather_rows(dt, 2000, C, 3000, 1, false, 0);
      check_gather_rows(dt, 2000, C, 3000, 1, false, 1);
    }
    check_gather_rows(dt, 5000, 64, 20000, 16, false, 0);        // Pointcept's grouping, many entries per row
    check_gather_rows(dt, 5000, 64, 20000, 16, false, 0, true);  // the same with int32 indices
    check_gather_rows(dt, 70000, 8, 3000, 4, false, 0);          // sparse rows: long gaps between used ones
    knob("POINTOPS_GATHER_ROWS_COUNTED", "1");
    check_gather_rows(dt, 5000, 64, 20000, 16, false, 0, true);
    check_gather_rows(dt, 500, 16, 4000, 3, true, 0);
    knob("POINTOPS_GATHER_ROWS_COUNTED", nullptr);
    check_gather_rows(dt, 500, 16, 4000, 3, true, 0);  // interpolation
    check_gather_rows(dt, 500, 16, 4000, 3, true, 2);
  }
  // 16-bit channel pairs (T = 3): rows not a multiple of 8 (unvectorized staging), one channel
  // (a half pair), unweighted; then the unpaired 16-bit stage.
  check_gather(Dtype::BFloat16, 2, 5, 301, 2000, 3, true);
  check_gather(Dtype::Float16, 1, 1, 500, 3000, 3, true);
  check_gather(Dtype::BFloat16, 2, 3, 4096, 9000, 3, false);
  knob("POINTOPS_GATHER_PAIRED", "0");
  check_gather(Dtype::Float16, 2, 37, 3000, 20000, 3, true);
  check_gather(Dtype::BFloat16, 2, 6, 300, 2000, 3, true);
  knob("POINTOPS_GATHER_PAIRED", nullptr);
  // Long grad_out rows on the transposed path (two channel slabs, T = 1, 3 and a runtime T,
  // every dtype; the first three have 2^16 entries or more, so their rows are built on the
  // second stream beside the transpose, the float64 one in line); then the direct sums.
  check_gather(Dtype::Float32, 2, 70, 500, 60000, 1, false);
  check_gather(Dtype::Float16, 1, 5, 300, 120000, 3, true);
  check_gather(Dtype::BFloat16, 1, 33, 4000, 100000, 1, false);
  check_gather(Dtype::Float64, 1, 3, 2000, 30000, 2, true);
  // More slabs than the workspace holds: two buffers taken in turn, and one buffer (slabs too
  // large for two).
  check_gather(Dtype::Float32, 1, 200, 300, 70000, 3, true);
  check_gather(Dtype::Float32, 1, 130, 2000, 270000, 1, false);
  // The sparse sums (a lane per target) from grad_out, also on dense shapes (long rows), then
  // from staged grad_out rows (several spans and channel groups), and the dense sums on a
  // sparse shape.
  knob("POINTOPS_GATHER_SPARSE", "1");
  check_gather(Dtype::Float32, 2, 130, 500, 300, 1, false);
  check_gather(Dtype::Float16, 1, 70, 3000, 2000, 3, true);
  check_gather(Dtype::Float64, 2, 9, 500, 5000, 3, true);
  check_gather(Dtype::BFloat16, 2, 37, 300, 20000, 3, true);
  check_gather(Dtype::Float32, 1, 3, 7, 40000, 2, true);
  check_gather(Dtype::Float32, 2, 130, 5000, 300, 1, false);
  knob("POINTOPS_GATHER_SPARSE", "2");
  check_gather(Dtype::Float32, 2, 37, 5000, 700, 3, true);
  check_gather(Dtype::Float16, 2, 40, 9000, 5000, 1, false);
  check_gather(Dtype::Float32, 1, 9, 4200, 3000, 5, true);  // > span entries: unstaged list
  check_gather(Dtype::Float64, 2, 6, 9000, 1000, 1, false);
  check_gather(Dtype::BFloat16, 3, 5, 4100, 33, 5, true);
  // The fused sparse sums: several spans and channel groups, a runtime T, odd N (scalar
  // stores), fewer targets than a vector, long rows (heap sort), and too many entries
  // (falls back to the staged sums).
  knob("POINTOPS_GATHER_SPARSE", "3");
  check_gather(Dtype::Float32, 2, 37, 5000, 700, 3, true);
  check_gather(Dtype::Float16, 2, 40, 9000, 5000, 1, false);
  check_gather(Dtype::Float64, 2, 6, 9001, 1000, 1, false);
  check_gather(Dtype::BFloat16, 3, 5, 4100, 33, 5, true);
  check_gather(Dtype::Float32, 1, 9, 4200, 3000, 2, true);
  check_gather(Dtype::Float16, 2, 3, 5, 300, 1, false);
  check_gather(Dtype::Float32, 1, 3, 7, 2000, 2, true);
  check_gather(Dtype::Float32, 1, 4, 9000, 9000, 1, false);
  check_gather(Dtype::Float32, 1, 5, 8000, 8000, 1, false);    // more summed targets than slots
  check_gather(Dtype::Float32, 64, 40, 4096, 1000, 1, false);  // two chunks per block (double buffer)
  check_gather(Dtype::Float16, 40, 128, 4000, 900, 1, false);
  check_gather(Dtype::Float16, 2, 6, 300, 2000, 1, false);  // rows of ~7: slot sums from registers and looped
  check_gather(Dtype::BFloat16, 2, 5, 500, 1000, 3, true);  // the same, weighted
  knob("POINTOPS_GATHER_SPARSE", "0");
  check_gather(Dtype::Float32, 1, 2, 300000, 30000, 1, false);
  // The chunked sums: 8 targets a thread and several chunks with a partial channel group, 4, 2
  // and 1 targets a thread, odd P (unaligned rows), rows a few targets long across every chunk,
  // every 16-bit type; float64 and too many targets fall back to the transposed sums.
  knob("POINTOPS_GATHER_SPARSE", "4");
  check_gather(Dtype::Float32, 2, 37, 4096, 20000, 3, true);
  check_gather(Dtype::Float32, 2, 9, 1500, 6000, 3, true);
  check_gather(Dtype::Float16, 3, 50, 1000, 9000, 3, true);
  check_gather(Dtype::BFloat16, 1, 30, 300, 5000, 1, false);
  check_gather(Dtype::Float32, 2, 7, 2500, 70001, 2, true);
  check_gather(Dtype::Float32, 2, 40, 5, 20000, 3, true);
  check_gather(Dtype::BFloat16, 2, 5, 3000, 40000, 3, true);
  check_gather(Dtype::Float64, 1, 9, 2000, 9000, 3, true);
  check_gather(Dtype::Float32, 1, 5, 5000, 3000, 3, true);
  // The dense sums: 8 and 4 targets a thread over several chunks with a partial channel
  // group, a runtime T, odd P (plain copies, no cp.async), every 16-bit type, rows of thousands
  // of entries per chunk (heap sort), fewer entries than targets; float64 and too many targets
  // fall back to the transposed sums.
  knob("POINTOPS_GATHER_SPARSE", "5");
  check_gather(Dtype::Float32, 2, 37, 4096, 20000, 3, true);
  check_gather(Dtype::Float16, 3, 50, 1000, 9000, 3, true);
  check_gather(Dtype::BFloat16, 1, 30, 3000, 5000, 1, false);
  check_gather(Dtype::Float32, 2, 7, 2500, 70001, 2, true);
  check_gather(Dtype::Float32, 2, 40, 5, 20000, 3, true);
  check_gather(Dtype::BFloat16, 2, 5, 3000, 40000, 3, true);
  check_gather(Dtype::Float16, 2, 6, 4000, 300, 1, false);
  check_gather(Dtype::Float16, 1, 9, 300, 1024, 3, true);  // one chunk: 69 KB of dynamic smem
  check_gather(Dtype::Float64, 1, 9, 2000, 9000, 3, true);
  check_gather(Dtype::Float32, 1, 5, 5000, 3000, 3, true);
  knob("POINTOPS_GATHER_DENSE_WIDE", "1");  // the wide shape: 4 and 8 targets a thread
  check_gather(Dtype::Float32, 2, 37, 4096, 20000, 3, true);
  check_gather(Dtype::Float16, 3, 50, 1000, 9000, 3, true);
  check_gather(Dtype::BFloat16, 2, 5, 3000, 40000, 1, false);
  check_gather(Dtype::Float32, 2, 40, 5, 20000, 3, true);
  knob("POINTOPS_GATHER_DENSE_WIDE", nullptr);
  knob("POINTOPS_GATHER_SPARSE", nullptr);
  knob("POINTOPS_GATHER_STAGED", "0");  // the direct forward and backward
  check_gather(Dtype::Float32, 1, 3, 500, 60000, 1, false);
  check_gather(Dtype::Float16, 3, 130, 700, 900, 1, false);
  check_gather(Dtype::Float64, 2, 7, 300, 100, 5, true);
  check_gather(Dtype::Float32, 2, 37, 3000, 20000, 3, true);  // direct path on a stageable shape
  check_gather(Dtype::BFloat16, 2, 3, 30000, 40000, 1, false);
  check_gather(Dtype::Float32, 2, 7, 300, 100, 3, true);
  knob("POINTOPS_GATHER_STAGED", nullptr);
}

// ---------------------------------------------------------------------------------------------
// Benchmarks

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median over `reps` timed runs after `warm` runs, each timed by CUDA events.
static double time_ms(const std::function<void()>& f, int warm, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < warm; ++i) f();
  CK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return median(t);
}

struct Row {
  std::string op, shape;
  double ms, target, peer, floor_ms;
  std::string note;
};
static std::vector<Row> rows;

static void add_row(const std::string& op, const std::string& shape, double ms, double target, double peer,
                    double floor_ms, const std::string& note = "") {
  rows.push_back({op, shape, ms, target, peer, floor_ms, note});
  std::printf("%-18s %-34s %9.4f ms  target %7.3f  peer %8.3f  floor %.4f (%.0f%%)  %s %s\n", op.c_str(),
              shape.c_str(), ms, target, peer, floor_ms, floor_ms > 0 ? 100.0 * floor_ms / ms : 0.0,
              target <= 0 ? "" : (ms <= target ? "PASS" : "MISS"), note.c_str());
  std::fflush(stdout);
}

static double copy_bandwidth() {  // bytes read + written per second, device to device
  const size_t bytes = size_t(1) << 31;
  DeviceBuffer a(bytes), b(bytes);
  CK(cudaMemset(a.ptr, 1, bytes));
  const double ms =
      time_ms([&] { CK(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice)); }, 2, 10);
  return 2.0 * bytes / (ms * 1e-3);
}

template <class T>
__global__ void atomic_scatter_kernel(const T* g, const int64_t* idx, const T* w, int64_t B, int64_t C,
                                      int64_t N, int64_t P, int64_t T_, float* out) {
  const int64_t total = B * C * P;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total;
       o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = o % P, bc = o / P, b = bc / C;
    const float v = float(g[o]);
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t e = (b * P + p) * T_ + t;
      const int64_t j = idx[e];
      if (j >= 0) atomicAdd(&out[bc * N + j], w ? float(w[e]) * v : v);
    }
  }
}

static void write_json(const char* json_path, double bw) {
  if (json_path) {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    FILE* f = std::fopen(json_path, "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path);
      std::exit(2);
    }
    std::fprintf(
        f,
        "{\n  \"tool\": \"kernel_oracle\",\n  \"gpu\": \"%s\",\n  \"sms\": %d,\n  \"cuda_driver_api\": %d,\n"
        "  \"cuda_runtime\": %d,\n  \"copy_GBps\": %.1f,\n  \"rows\": [\n",
        prop.name, prop.multiProcessorCount, driver, runtime, bw / 1e9);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(
          f,
          "    {\"op\": \"%s\", \"shape\": \"%s\", \"ms\": %.5f, \"target_ms\": %.5f, \"peer_ms\": %.5f, "
          "\"floor_ms\": %.5f, \"note\": \"%s\"}%s\n",
          r.op.c_str(), r.shape.c_str(), r.ms, r.target, r.peer, r.floor_ms, r.note.c_str(),
          i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
  }
}

static void bench_rest(double bw, bool sweep);
static void bench_gathers(double bw, bool sweep);

// sweep: also time the FPS strategies the planner did not pick; sweep_all: and the other paths
// of the neighbour searches and gathers (then the rest of the shapes run too).
static void bench_all(const char* json_path, bool sweep, bool sweep_all) {
  const double bw = copy_bandwidth();
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n", bw / 1e9);

  struct FpsShape {
    int64_t B, N, K;
    double peer, target;
  };
  for (const FpsShape& s : {FpsShape{1, 1000000, 4096, 756.3, 25}, FpsShape{1, 100000, 1024, 20.40, 3},
                            FpsShape{8, 16384, 4096, 17.03, 6}, FpsShape{32, 100000, 1024, 41.45, 10},
                            FpsShape{16, 4096, 1024, 1.309, 0.65}}) {
    for (Dtype dt : {Dtype::Float32, Dtype::Float16}) {
      if (dt == Dtype::Float16 && s.N != 100000) continue;
      const auto pts = uniform_points(s.B * s.N * 3, false);
      auto d_xyz = upload(encode(pts, dt));
      const CudaPlan plan = furthest_point_sample_cuda_plan(dt, s.B, s.N, s.K);
      DeviceBuffer d_idx(s.B * s.K * 8), ws(plan.workspace_bytes);
      const double ms = time_ms(
          [&] {
            check_status(furthest_point_sample_cuda(plan, dt, d_xyz.ptr, nullptr, s.B, s.N, s.K, 0,
                                                    d_idx.as<int64_t>(), ws.ptr, nullptr),
                         "fps");
          },
          2, s.N >= 1000000 ? 3 : 10);
      char shape[100];
      std::snprintf(shape, sizeof shape, "B%lld N%lld K%lld %s", (long long)s.B, (long long)s.N,
                    (long long)s.K, dt_name(dt));
      char note[100];
      std::snprintf(note, sizeof note, "%.2f us/step", ms * 1e3 / s.K);
      add_row("fps", shape, ms, s.target, s.peer, 0, note);
      if (sweep && dt == Dtype::Float32 && s.N <= 100000) {  // the alternatives the planner skipped
        for (const char* g : {"1", "2", "4", "8", "16"}) {
          knob("POINTOPS_FPS_GROUP", g);
          const CudaPlan forced = furthest_point_sample_cuda_plan(dt, s.B, s.N, s.K);
          DeviceBuffer ws_forced(forced.workspace_bytes);
          const double alt = time_ms(
              [&] {
                check_status(furthest_point_sample_cuda(forced, dt, d_xyz.ptr, nullptr, s.B, s.N, s.K, 0,
                                                        d_idx.as<int64_t>(), ws_forced.ptr, nullptr),
                             "fps");
              },
              1, 3);
          knob("POINTOPS_FPS_GROUP", nullptr);
          std::snprintf(note, sizeof note, "variant POINTOPS_FPS_GROUP=%s, %.2f us/step", g, alt * 1e3 / s.K);
          add_row("fps_variant", shape, alt, s.target, s.peer, 0, note);
        }
      }
    }
  }

  if (!sweep || sweep_all) bench_rest(bw, sweep_all);
  write_json(json_path, bw);
}

// Neighbour searches and gathers.
static void bench_rest(double bw, bool sweep) {
  auto floor_of = [&](double bytes) { return bytes / bw * 1e3; };
  struct NbShape {
    const char* op;
    int64_t B, N, M;
    double r;
    int64_t K;
    double peer, target;
  };
  for (const NbShape& s : {NbShape{"ball_query", 1, 1000000, 65536, 0.01, 16, 78.44, 5},
                           NbShape{"ball_query", 8, 16384, 4096, 0.05, 32, 1.406, 0.5},
                           NbShape{"ball_query", 16, 4096, 1024, 0.2, 32, 0.911, 0.45},
                           NbShape{"knn", 8, 16384, 4096, 0, 16, 2.166, 1.0},
                           NbShape{"knn", 1, 1000000, 65536, 0, 16, 127.8, 15},
                           NbShape{"three_nn", 8, 4096, 16384, 0, 3, 11.09, 1.5}}) {
    for (Dtype dt : {Dtype::Float32, Dtype::Float16}) {
      if (dt == Dtype::Float16 && s.B != 8) continue;
      const auto pts = uniform_points(s.B * s.N * 3, false);
      std::vector<double> q(s.B * s.M * 3);
      if (std::string(s.op) == "three_nn") {
        q = uniform_points(s.B * s.M * 3, false);  // unknown points, a separate cloud
      } else {
        for (int64_t b = 0; b < s.B; ++b)
          std::copy(pts.begin() + b * s.N * 3, pts.begin() + (b * s.N + s.M) * 3, q.begin() + b * s.M * 3);
      }
      auto d_xyz = upload(encode(pts, dt)), d_q = upload(encode(q, dt));
      DeviceBuffer d_idx(s.B * s.M * s.K * 8), d_cnt(s.B * s.M * 8), d_d(s.B * s.M * s.K * elem_size(dt));
      const bool ball = std::string(s.op) == "ball_query";
      auto plan_search = [&] {
        return ball ? ball_query_cuda_plan(dt, s.B, s.N, s.M, s.K) : knn_cuda_plan(dt, s.B, s.N, s.M, s.K);
      };
      const CudaPlan plan = plan_search();
      DeviceBuffer ws(plan.workspace_bytes);
      auto search = [&](const CudaPlan& plan, void* workspace) {
        if (ball)
          check_status(
              ball_query_cuda(plan, dt, d_xyz.ptr, d_q.ptr, nullptr, nullptr, s.B, s.N, s.M, s.r, true, s.K,
                              d_idx.as<int64_t>(), d_cnt.as<int64_t>(), nullptr, workspace, nullptr),
              "ball");
        else
          check_status(knn_cuda(plan, dt, d_xyz.ptr, d_q.ptr, nullptr, nullptr, s.B, s.N, s.M, s.K, d_d.ptr,
                                d_idx.as<int64_t>(), workspace, nullptr),
                       "knn");
      };
      const double ms = time_ms([&] { search(plan, ws.ptr); }, 3, 10);
      const double bytes = (s.B * s.N * 3.0 + s.B * s.M * 3.0) * elem_size(dt) + s.B * s.M * s.K * 8.0 +
                           (ball ? s.B * s.M * 8.0 : s.B * s.M * s.K * double(elem_size(dt)));
      char shape[100];
      if (ball)
        std::snprintf(shape, sizeof shape, "B%lld N%lld M%lld r%g k%lld %s", (long long)s.B, (long long)s.N,
                      (long long)s.M, s.r, (long long)s.K, dt_name(dt));
      else
        std::snprintf(shape, sizeof shape, "B%lld N%lld M%lld k%lld %s", (long long)s.B, (long long)s.N,
                      (long long)s.M, (long long)s.K, dt_name(dt));
      add_row(s.op, shape, ms, s.target, s.peer, floor_of(bytes));
      if (sweep && dt == Dtype::Float32 && s.N <= 16384) {  // the other neighbour-search path
        knob("POINTOPS_GRID_MIN_POINTS", s.N >= 8192 ? "1000000000" : "1");
        const CudaPlan other = plan_search();
        DeviceBuffer ws2(other.workspace_bytes);
        const double alt = time_ms([&] { search(other, ws2.ptr); }, 2, 5);
        knob("POINTOPS_GRID_MIN_POINTS", nullptr);
        add_row(std::string(s.op) + "_variant", shape, alt, s.target, s.peer, floor_of(bytes),
                s.N >= 8192 ? "variant tiled scan" : "variant spatial grid");
      }
    }
  }
  bench_gathers(bw, sweep);
}

// The gathers (forward, backward), on the issue's shapes and PointNet++'s feature propagation.
// sweep: also the forward and backward paths the planners did not pick.
static void bench_gathers(double bw, bool sweep) {
  auto floor_of = [&](double bytes) { return bytes / bw * 1e3; };
  struct GShape {
    const char* op;
    int64_t B, C, N, P, T;
    bool weighted;
    double peer, target;
  };
  for (const GShape& s : {GShape{"gather_points", 8, 128, 16384, 4096, 1, false, 0.057, 0.057 * 1.2},
                          GShape{"group_points", 8, 64, 16384, 4096 * 32, 1, false, 0.425, 0.2},
                          GShape{"three_interpolate", 8, 128, 4096, 16384, 3, true, 1.519, 0.1},
                          GShape{"gather_points_large_out", 16, 256, 16384, 65536, 1, false, 0, 0},
                          GShape{"gather_points_huge_rows", 8, 256, 262144, 131072, 1, false, 0, 0},
                          GShape{"three_interpolate_fp64", 16, 512, 64, 256, 3, true, 0, 0},
                          GShape{"three_interpolate_fp256", 16, 256, 256, 1024, 3, true, 0, 0},
                          GShape{"three_interpolate_fp1024", 16, 128, 1024, 4096, 3, true, 0, 0}}) {
    // ORACLE_GATHERS_ONLY=name: that op's shape alone (a quicker sweep, or a profile of one shape).
    const char* only = std::getenv("ORACLE_GATHERS_ONLY");
    if (only != nullptr && *only != '\0' && std::strcmp(s.op, only) != 0) continue;
    for (Dtype dt : {Dtype::Float32, Dtype::Float16, Dtype::BFloat16}) {
      const auto feat = uniform_points(s.B * s.C * s.N, false);
      const auto idx = random_indices(s.B * s.P * s.T, s.N, 0.0);
      const auto w = uniform_points(s.B * s.P * s.T, false);
      auto d_f = upload(encode(feat, dt)), d_w = upload(encode(w, dt)), d_i = upload_i64(idx);
      DeviceBuffer d_out(s.B * s.C * s.P * elem_size(dt)), d_gf(s.B * s.C * s.N * elem_size(dt)),
          d_acc(s.B * s.C * s.N * 4), d_gw(s.B * s.P * s.T * elem_size(dt)),
          ws(gather_backward_feat_cuda_plan(dt, s.B, s.C, s.N, s.P, s.T).workspace_bytes);
      const CudaPlan bwd_plan = gather_backward_feat_cuda_plan(dt, s.B, s.C, s.N, s.P, s.T);
      const void* wp = s.weighted ? d_w.ptr : nullptr;
      const double es = elem_size(dt);
      char shape[120];
      std::snprintf(shape, sizeof shape, "B%lld C%lld N%lld P%lld T%lld %s", (long long)s.B, (long long)s.C,
                    (long long)s.N, (long long)s.P, (long long)s.T, dt_name(dt));
      const double fwd = time_ms(
          [&] {
            check_status(gather_forward_cuda(dt, d_f.ptr, d_i.as<int64_t>(), wp, s.B, s.C, s.N, s.P, s.T,
                                             d_out.ptr, nullptr, nullptr),
                         "gather");
          },
          3, 20);
      // Floor: write out, read idx/weight, read the gathered features (each at most once).
      const double gathered = std::min<double>(s.B * s.C * s.N, s.B * s.C * s.P * s.T) * es;
      add_row(s.op, shape, fwd, s.target, s.peer,
              floor_of(s.B * s.C * s.P * es + s.B * s.P * s.T * (8.0 + (s.weighted ? es : 0)) + gathered));
      if (sweep && dt == Dtype::Float32) {
        for (const char* v : {"0", "1"}) {
          knob("POINTOPS_GATHER_STAGED", v);
          const double alt = time_ms(
              [&] {
                check_status(gather_forward_cuda(dt, d_f.ptr, d_i.as<int64_t>(), wp, s.B, s.C, s.N, s.P, s.T,
                                                 d_out.ptr, nullptr, nullptr),
                             "gather");
              },
              2, 5);
          knob("POINTOPS_GATHER_STAGED", nullptr);
          add_row(std::string(s.op) + "_variant", shape, alt, s.target, s.peer,
                  floor_of(s.B * s.C * s.P * es + s.B * s.P * s.T * (8.0 + (s.weighted ? es : 0)) + gathered),
                  std::string("variant POINTOPS_GATHER_STAGED=") + v);
        }
      }
      const double bwd = time_ms(
          [&] {
            check_status(gather_backward_feat_cuda(bwd_plan, dt, d_out.ptr, d_i.as<int64_t>(), wp, s.B, s.C,
                                                   s.N, s.P, s.T, d_gf.ptr, ws.ptr, nullptr, nullptr),
                         "bwd");
          },
          3, 20);
      if (sweep) {
        const std::pair<const char*, const char*> variants[] = {{"POINTOPS_GATHER_SPARSE", "0"},
                                                                {"POINTOPS_GATHER_SPARSE", "4"},
                                                                {"POINTOPS_GATHER_SPARSE", "5"},
                                                                {"POINTOPS_GATHER_ROWS_COUNTED", "1"},
                                                                {"POINTOPS_GATHER_OVERLAP", "0"}};
        for (const auto& [name, value] : variants) {
          knob(name, value);
          const CudaPlan forced = gather_backward_feat_cuda_plan(dt, s.B, s.C, s.N, s.P, s.T);
          DeviceBuffer ws_forced(forced.workspace_bytes);
          const double alt = time_ms(
              [&] {
                check_status(
                    gather_backward_feat_cuda(forced, dt, d_out.ptr, d_i.as<int64_t>(), wp, s.B, s.C, s.N,
                                              s.P, s.T, d_gf.ptr, ws_forced.ptr, nullptr, nullptr),
                    "bwd");
              },
              3, 20);
          knob(name, nullptr);
          add_row(std::string(s.op) + "_bwd_variant", shape, alt, 0, 0,
                  floor_of(s.B * s.C * s.P * es + s.B * s.P * s.T * 8.0 + s.B * s.C * s.N * es),
                  std::string("variant ") + name + "=" + value + " path " + std::to_string(forced.path) +
                      "/" + std::to_string(forced.shape[1]));
        }
      }
      double atomic_ms = 0;
      if (dt == Dtype::Float32) {
        atomic_ms = time_ms(
            [&] {
              CK(cudaMemsetAsync(d_acc.ptr, 0, d_acc.bytes));
              atomic_scatter_kernel<float><<<4096, 256>>>(d_out.as<float>(), d_i.as<int64_t>(),
                                                          s.weighted ? d_w.as<float>() : nullptr, s.B, s.C,
                                                          s.N, s.P, s.T, d_acc.as<float>());
              CK(cudaGetLastError());
            },
            3, 20);
      }
      char note[100];
      std::snprintf(note, sizeof note, "atomicAdd scatter %.4f ms (x%.2f)", atomic_ms,
                    atomic_ms > 0 ? atomic_ms / bwd : 0);
      add_row(std::string(s.op) + "_bwd", shape, bwd, atomic_ms > 0 ? atomic_ms / 2 : 0, 0,
              floor_of(s.B * s.C * s.P * es + s.B * s.P * s.T * 8.0 + s.B * s.C * s.N * es), note);
      if (s.weighted) {
        const double bw_ms = time_ms(
            [&] {
              check_status(gather_backward_weight_cuda(dt, d_out.ptr, d_f.ptr, d_i.as<int64_t>(), s.B, s.C,
                                                       s.N, s.P, s.T, d_gw.ptr, nullptr, nullptr),
                           "bwd_w");
            },
            3, 20);
        add_row(std::string(s.op) + "_bwd_w", shape, bw_ms, 0, 0,
                floor_of(s.B * s.C * s.P * es + s.B * s.P * s.T * (8.0 + es) + gathered));
      }
    }
  }
}

int main(int argc, char** argv) {
  cpu::set_parallel_backend(thread_backend, thread_total);
  const std::string mode = argc > 1 ? argv[1] : "check";
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
  const auto t0 = std::chrono::steady_clock::now();
  if (mode == "check" || mode == "small" || mode == "tiny") {
    if (mode == "tiny")
      run_tiny();
    else
      run_checks(mode == "small");
    std::printf("%s: %d failure(s) in %.1f s\n", mode.c_str(), failures,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return failures == 0 ? 0 : 1;
  }
  if (mode == "gathers") {  // the gathers alone, with the paths the planners did not pick
    bench_gathers(copy_bandwidth(), true);
    write_json(argc > 2 ? argv[2] : nullptr, 0);
    return 0;
  }
  if (mode == "bench" || mode == "sweep" || mode == "sweep-all") {
    bench_all(argc > 2 ? argv[2] : nullptr, mode != "bench", mode == "sweep-all");
    return 0;
  }
  std::fprintf(stderr, "usage: %s check|small|tiny|bench|sweep|sweep-all|gathers [json]\n", argv[0]);
  return 2;
}

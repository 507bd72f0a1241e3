// Weighted gather on CUDA (gather_points, group_points, three_interpolate forward):
//   out[b,c,p] = sum_t w[b,p,t] * feat[b,c,idx[b,p,t]]   (sum in ascending t, idx -1 adds 0)
#include <cstdlib>

#include "common.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

// One thread per output element, p fastest so that idx/weight/out accesses are coalesced.
template <class T>
__global__ void __launch_bounds__(kThreads)
    gather_forward_kernel(const T* __restrict__ feat, const int64_t* __restrict__ idx,
                          const T* __restrict__ weight, int64_t B, int64_t C, int64_t N, int64_t P,
                          int64_t T_, T* __restrict__ out, KernelChecks checks) {
  using A = acc_t<T>;
  const bool poisoned = checks.recorded();
  const int64_t total = B * C * P;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = o % P;
    const int64_t bc = o / P;
    const int64_t b = bc / C;
    const T* f = feat + bc * N;
    const int64_t* ix = idx + (b * P + p) * T_;
    if (weight == nullptr && T_ == 1) {  // plain gather: copy the value itself
      const int64_t j = ix[0];
      T value = (j >= 0 && j < N) ? f[j] : from_acc<T>(A(0));
      if (!(j >= -1 && j < N) && checks.device_code != nullptr) {
        checks.report();
        value = from_acc<T>(quiet_nan<A>());
      }
      out[o] = poisoned ? from_acc<T>(quiet_nan<A>()) : value;
      continue;
    }
    const T* w = weight == nullptr ? nullptr : weight + (b * P + p) * T_;
    A acc = A(0);
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t j = ix[t];
      if (j < 0 || j >= N) {
        if (j != -1 && checks.device_code != nullptr) {
          checks.report();
          acc = quiet_nan<A>();
        }
        continue;
      }
      const A v = to_acc(f[j]);
      acc = add_rn(acc, w == nullptr ? v : mul_rn(to_acc(w[t]), v));
    }
    out[o] = from_acc<T>(poisoned ? quiet_nan<A>() : acc);
  }
}

// Staged path: a block copies CC whole feature rows feat[b, c0..c0+CC, :] into shared memory
// with coalesced loads, then gathers from there for a range of p. A direct gather pulls a
// 32-byte sector from L2 for every 4-byte element; staging reads each row once.
// Each SM runs 32 warps: one 1024-thread block with a stage of up to 192 KB for plain
// gathers (T = 1: many channels per block, so each index is read for more outputs), or two
// 512-thread blocks with ~96 KB each for the weighted T = 3 case (one stages while the other
// gathers). TT is the number of entries per output (1: gather/group, 3: three_interpolate)
// known at compile time, so a thread loads its indices and weights once, into registers, and
// reuses them for every channel; TT = 0 is the runtime-T fallback.
template <int TT>
__host__ __device__ constexpr int staged_threads() {
  return TT == 1 ? 1024 : 512;
}

constexpr int kStageLoads = 4;  // 16-byte loads in flight per thread while staging

// 16-bit features (float16, bfloat16) of three_interpolate are staged as channel pairs: word (q, j) holds
// channel 2q of point j in its low half and channel 2q+1 in its high half (zero past the last
// channel), so that one 32-bit shared-memory load serves two channels. The shared loads, and
// their bank conflicts, are what bound the gather from the stage; unpaired, a 16-bit gather
// issues as many of them as a float32 one.
template <int THREADS, class T>
__device__ __forceinline__ void stage_row_pairs(const T* __restrict__ src, int cn, int64_t N,
                                                uint32_t* words) {
  const int64_t pairs = (cn + 1) / 2;
  if (reinterpret_cast<uintptr_t>(src) % 16 == 0 && N % 8 == 0) {
    const int64_t per_row = N / 8;  // 16-byte vectors per row
    const uint4* s4 = reinterpret_cast<const uint4*>(src);
    uint4* d4 = reinterpret_cast<uint4*>(words);
    for (int64_t i = threadIdx.x; i < pairs * per_row; i += THREADS) {
      const int64_t q = i / per_row, k = i - q * per_row;
      const uint4 a = s4[2 * q * per_row + k];
      const uint4 b = 2 * q + 1 < cn ? s4[(2 * q + 1) * per_row + k] : make_uint4(0, 0, 0, 0);
      // 0x5410 pairs the low halves of a and b, 0x7632 their high halves.
      d4[2 * i] = make_uint4(__byte_perm(a.x, b.x, 0x5410), __byte_perm(a.x, b.x, 0x7632),
                             __byte_perm(a.y, b.y, 0x5410), __byte_perm(a.y, b.y, 0x7632));
      d4[2 * i + 1] = make_uint4(__byte_perm(a.z, b.z, 0x5410), __byte_perm(a.z, b.z, 0x7632),
                                 __byte_perm(a.w, b.w, 0x5410), __byte_perm(a.w, b.w, 0x7632));
    }
  } else {
    const unsigned short* s16 = reinterpret_cast<const unsigned short*>(src);
    for (int64_t i = threadIdx.x; i < pairs * N; i += THREADS) {
      const int64_t q = i / N, j = i - q * N;
      const uint32_t lo = s16[2 * q * N + j];
      const uint32_t hi = 2 * q + 1 < cn ? s16[(2 * q + 1) * N + j] : 0u;
      words[i] = lo | (hi << 16);
    }
  }
}

__device__ __forceinline__ __half from_bits(uint32_t bits, __half) {
  return __ushort_as_half(static_cast<unsigned short>(bits));
}
__device__ __forceinline__ __nv_bfloat16 from_bits(uint32_t bits, __nv_bfloat16) {
  return __ushort_as_bfloat16(static_cast<unsigned short>(bits));
}

template <class T, int TT>
__global__ void __launch_bounds__(staged_threads<TT>())
    gather_staged_kernel(const T* __restrict__ feat, const int64_t* __restrict__ idx,
                         const T* __restrict__ weight, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T_,
                         T* __restrict__ out, int64_t CC, int64_t p_chunk, bool paired, KernelChecks checks) {
  using A = acc_t<T>;
  // kBad marks an index outside -1..N-1 (checks on): it makes its output NaN.
  constexpr int kBad = -2;
  const bool poisoned = checks.recorded();
  extern __shared__ __align__(16) unsigned char stage_raw[];
  T* rows = reinterpret_cast<T*>(stage_raw);
  // The host launches at most INT32_MAX blocks, so the tile decode fits 32-bit arithmetic.
  const unsigned int c_groups = static_cast<unsigned int>(ceil_div(C, CC));
  const unsigned int p_chunks = static_cast<unsigned int>(ceil_div(P, p_chunk));
  const unsigned int tile = blockIdx.x;
  const int64_t pc = tile % p_chunks;
  const int64_t cg = (tile / p_chunks) % c_groups;
  const int64_t b = tile / p_chunks / c_groups;
  const int64_t c0 = cg * CC;
  const int cn = static_cast<int>(C - c0 < CC ? C - c0 : CC);

  // Rows c0..c0+cn of cloud b are one contiguous range of feat.
  constexpr int kStagedThreads = staged_threads<TT>();
  if constexpr (sizeof(T) == 2 && TT == 3) {
    if (paired) {
      stage_row_pairs<kStagedThreads>(feat + (b * C + c0) * N, cn, N, reinterpret_cast<uint32_t*>(stage_raw));
    } else {
      stage_to_shared<kStagedThreads, kStageLoads>(feat + (b * C + c0) * N, cn * N, rows);
    }
  } else {
    stage_to_shared<kStagedThreads, kStageLoads>(feat + (b * C + c0) * N, cn * N, rows);
  }
  __syncthreads();

  const int64_t p_end = (pc + 1) * p_chunk < P ? (pc + 1) * p_chunk : P;
  const int64_t p_first = pc * p_chunk + threadIdx.x;
  T* o_base = out + (b * C + c0) * P;
  if constexpr (TT > 0) {
    // Each thread keeps U outputs in flight, so their index loads (the latency that bounds
    // this loop) overlap; offsets into a staged row (-1: adds nothing) and weights are loaded
    // once and reused for every channel.
    constexpr int U = 4;
    for (int64_t p0 = p_first; p0 < p_end; p0 += U * kStagedThreads) {
      int j[U][TT];
      A w[U][TT];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t p = p0 + static_cast<int64_t>(u) * kStagedThreads;
#pragma unroll
        for (int t = 0; t < TT; ++t) {
          int jj = -1;
          A ww = A(0);
          if (p < p_end) {
            const int64_t e = (b * P + p) * TT + t;
            const int64_t v = idx[e];
            jj = (v >= 0 && v < N) ? static_cast<int>(v) : -1;
            if (!(v >= -1 && v < N) && checks.device_code != nullptr) {
              checks.report();
              jj = kBad;
            }
            ww = weight == nullptr ? A(1) : to_acc(weight[e]);
          }
          j[u][t] = jj;
          w[u][t] = ww;
        }
      }
      if constexpr (sizeof(T) == 2 && TT == 3) {
        if (paired) {
          const uint32_t* words = reinterpret_cast<const uint32_t*>(stage_raw);
          for (int cc = 0; cc < cn; cc += 2) {
            const uint32_t* row = words + static_cast<int64_t>(cc / 2) * N;
            T* o = o_base + static_cast<int64_t>(cc) * P + p0;
            const bool second = cc + 1 < cn;
#pragma unroll
            for (int u = 0; u < U; ++u) {
              if (p0 + static_cast<int64_t>(u) * kStagedThreads >= p_end) break;
              A acc_lo = poisoned ? quiet_nan<A>() : A(0), acc_hi = acc_lo;
#pragma unroll
              for (int t = 0; t < TT; ++t) {
                if (j[u][t] == kBad) acc_lo = acc_hi = quiet_nan<A>();
                if (j[u][t] < 0) continue;
                const uint32_t word = row[j[u][t]];
                const A v_lo = to_acc(from_bits(word, T())), v_hi = to_acc(from_bits(word >> 16, T()));
                acc_lo = add_rn(acc_lo, weight == nullptr ? v_lo : mul_rn(w[u][t], v_lo));
                acc_hi = add_rn(acc_hi, weight == nullptr ? v_hi : mul_rn(w[u][t], v_hi));
              }
              o[u * kStagedThreads] = from_acc<T>(acc_lo);
              if (second) o[P + u * kStagedThreads] = from_acc<T>(acc_hi);
            }
          }
          continue;
        }
      }
      for (int cc = 0; cc < cn; ++cc) {
        const T* row = rows + static_cast<int64_t>(cc) * N;
        T* o = o_base + static_cast<int64_t>(cc) * P + p0;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (p0 + static_cast<int64_t>(u) * kStagedThreads >= p_end) break;
          T value;
          if (TT == 1 && weight == nullptr) {  // plain gather: copy the value itself
            value = j[u][0] >= 0 ? row[j[u][0]] : from_acc<T>(j[u][0] == kBad ? quiet_nan<A>() : A(0));
            if (poisoned) value = from_acc<T>(quiet_nan<A>());
          } else {
            A acc = poisoned ? quiet_nan<A>() : A(0);
#pragma unroll
            for (int t = 0; t < TT; ++t) {
              if (j[u][t] == kBad) acc = quiet_nan<A>();
              if (j[u][t] < 0) continue;
              const A v = to_acc(row[j[u][t]]);
              acc = add_rn(acc, weight == nullptr ? v : mul_rn(w[u][t], v));
            }
            value = from_acc<T>(acc);
          }
          o[u * kStagedThreads] = value;
        }
      }
    }
  } else {
    for (int64_t p = p_first; p < p_end; p += kStagedThreads) {
      const int64_t* ix = idx + (b * P + p) * T_;
      const T* w = weight == nullptr ? nullptr : weight + (b * P + p) * T_;
      T* o = o_base + p;
      for (int cc = 0; cc < cn; ++cc) {
        A acc = poisoned ? quiet_nan<A>() : A(0);
        for (int64_t t = 0; t < T_; ++t) {
          const int64_t j = ix[t];
          if (j < 0 || j >= N) {
            if (j != -1 && checks.device_code != nullptr) {
              checks.report();
              acc = quiet_nan<A>();
            }
            continue;
          }
          const A v = to_acc(rows[cc * N + j]);
          acc = add_rn(acc, w == nullptr ? v : mul_rn(to_acc(w[t]), v));
        }
        o[cc * P] = from_acc<T>(acc);
      }
    }
  }
}

// Shared memory per staged block (see staged_threads); rows longer than the budget of their
// case still stage one at a time, up to kMaxStageBytes. POINTOPS_GATHER_STAGE_KB overrides it.
constexpr int64_t kMaxStageBytes = 192 * 1024;

// The most one staged block may take: kMaxStageBytes, or what the device allows.
int64_t max_stage_bytes() { return smem_budget(kMaxStageBytes); }

int64_t stage_budget(int64_t row_bytes, int TT) {
  const int64_t fallback = TT == 1 ? 192 : 96;
  const int64_t kb = tuning_or(Knob::GatherStageKb, fallback);
  const int64_t most = max_stage_bytes();
  int64_t budget = (kb > 0 ? kb : fallback) * 1024;
  if (budget > most) budget = most;
  return row_bytes <= budget ? budget : most;
}

template <class E, int TT>
Status launch_staged(const E* feat, const int64_t* idx, const E* weight, int64_t B, int64_t C, int64_t N,
                     int64_t P, int64_t T, E* out, KernelChecks checks, cudaStream_t s, bool* launched) {
  const int64_t row_bytes = N * static_cast<int64_t>(sizeof(E));
  // Channels per block: as many rows as fit, spread evenly over the channel groups.
  constexpr int kStagedThreads = staged_threads<TT>();
  int64_t max_cc = stage_budget(row_bytes, TT) / row_bytes;
  // 16-bit three_interpolate stages channel pairs when two rows fit (an even channel count per
  // block): H200, B8 C128 N4096 P16384, 55 -> 43 µs. Plain gathers (T = 1) measured slower paired
  // (group_points 93 -> 98 µs), so they stage rows as they are.
  const bool paired = sizeof(E) == 2 && TT == 3 && max_cc >= 2 && tuning_or(Knob::GatherPaired, 1) != 0;
  if (paired) max_cc -= max_cc % 2;
  const int64_t groups = ceil_div(C, max_cc);
  int64_t CC = ceil_div(C, groups);
  if (paired) CC += CC % 2;
  const size_t smem = static_cast<size_t>(CC * row_bytes);
  auto kernel = gather_staged_kernel<E, TT>;
  if (cudaError_t err = allow_dynamic_smem(kernel, smem)) return cudaGetErrorString(err);
  const int per_sm = blocks_per_sm(kernel, kStagedThreads, smem);
  // Split p into chunks (each re-stages its rows) for at least two waves of blocks, taking the
  // count up to 2x that whose last wave is fullest (B8 C64 group_points: 4 full waves rather
  // than 2.7).
  const int64_t base_blocks = B * groups;
  const int64_t wave = static_cast<int64_t>(per_sm) * current_device_sm_count();
  const int64_t max_chunks = ceil_div(P, kStagedThreads);
  const int64_t least = ceil_div(2 * wave, base_blocks);
  int64_t p_chunks = least;
  double best_fill = 0;
  for (int64_t c = least; c <= 2 * least; ++c) {
    const int64_t blocks_c = base_blocks * c;
    const double fill = static_cast<double>(blocks_c) / static_cast<double>(ceil_div(blocks_c, wave) * wave);
    if (fill > best_fill + 1e-9) {
      best_fill = fill;
      p_chunks = c;
    }
  }
  if (p_chunks > max_chunks) p_chunks = max_chunks;
  if (p_chunks < 1) p_chunks = 1;
  const int64_t p_chunk = ceil_div(P, p_chunks);
  const int64_t blocks = base_blocks * ceil_div(P, p_chunk);
  if (blocks > INT32_MAX) return nullptr;  // the direct path (a grid-stride loop) takes it
  kernel<<<static_cast<unsigned int>(blocks), kStagedThreads, smem, s>>>(feat, idx, weight, B, C, N, P, T,
                                                                         out, CC, p_chunk, paired, checks);
  *launched = true;
  return launch_status();
}

}  // namespace

Status gather_forward_cuda(Dtype dt, const void* feat, const int64_t* idx, const void* weight, int64_t B,
                           int64_t C, int64_t N, int64_t P, int64_t T, void* out,
                           const InKernelChecks* in_kernel_checks, void* stream) {
  const KernelChecks checks = KernelChecks::from(in_kernel_checks);
  if (B == 0 || C == 0 || P == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    const E* f = static_cast<const E*>(feat);
    const E* w = static_cast<const E*>(weight);
    E* o = static_cast<E*>(out);
    // Staged when a feature row fits in shared memory and reading it whole costs less than
    // half the direct gather's 32-byte sector per gathered element (H200, N = 4*P*T: about
    // equal in float32, staged 1.5x faster in float16).
    const int64_t row_bytes = N * static_cast<int64_t>(sizeof(E));
    const int64_t forced = tuning(Knob::GatherStaged);
    const bool fits = N > 0 && row_bytes <= max_stage_bytes() && N <= INT32_MAX;
    const bool staged = forced >= 0 ? (forced == 1 && fits) : (fits && row_bytes < 16 * P * T);
    if (staged) {
      bool launched = false;
      Status st = nullptr;
      if (T == 1) {
        st = launch_staged<E, 1>(f, idx, w, B, C, N, P, T, o, checks, s, &launched);
      } else if (T == 3) {
        st = launch_staged<E, 3>(f, idx, w, B, C, N, P, T, o, checks, s, &launched);
      } else {
        st = launch_staged<E, 0>(f, idx, w, B, C, N, P, T, o, checks, s, &launched);
      }
      if (st != nullptr || launched) return st;
    }
    gather_forward_kernel<E>
        <<<grid_for(B * C * P, kThreads), kThreads, 0, s>>>(f, idx, w, B, C, N, P, T, o, checks);
    return launch_status();
  });
}

}  // namespace pointops

// The weighted-gather family on CPU (gather_points, group_points, three_interpolate and their
// gradients). The feature gradient walks (p, t) in ascending order for each (b, c) row, which
// makes it deterministic without atomics.
#include <algorithm>
#include <vector>

#include "common.h"
#include "parallel.h"

namespace pointops {

namespace {

inline bool valid_index(int64_t j, int64_t N) { return j >= 0 && j < N; }

int64_t row_grain(int64_t work_per_row) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_row));
}

}  // namespace

Status gather_forward_cpu(Dtype dt, const void* feat, const int64_t* idx, const void* weight, int64_t B,
                          int64_t C, int64_t N, int64_t P, int64_t T, void* out) {
  if (B <= 0 || C <= 0 || P <= 0) return nullptr;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using S = decltype(zero);
    const S* f = static_cast<const S*>(feat);
    const S* w = static_cast<const S*>(weight);
    S* o = static_cast<S*>(out);
    cpu::parallel_for(0, B * C, row_grain(P * T), [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        const int64_t b = row / C;
        const S* frow = f + N * row;
        const int64_t* ib = idx + P * T * b;
        const S* wb = w == nullptr ? nullptr : w + P * T * b;
        for (int64_t p = 0; p < P; ++p) {
          S acc = S(0);
          for (int64_t t = 0; t < T; ++t) {
            const int64_t j = ib[T * p + t];
            if (!valid_index(j, N)) continue;
            acc += (wb == nullptr ? S(1) : wb[T * p + t]) * frow[j];
          }
          o[P * row + p] = acc;
        }
      }
    });
  });
}

Status gather_backward_feat_cpu(Dtype dt, const void* grad_out, const int64_t* idx, const void* weight,
                                int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, void* grad_feat) {
  if (B <= 0 || C <= 0 || N <= 0) return nullptr;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using S = decltype(zero);
    const S* g = static_cast<const S*>(grad_out);
    const S* w = static_cast<const S*>(weight);
    S* gf = static_cast<S*>(grad_feat);
    cpu::parallel_for(0, B * C, row_grain(P * T + N), [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        const int64_t b = row / C;
        S* grow = gf + N * row;
        std::fill(grow, grow + N, S(0));
        const S* gout = g + P * row;
        const int64_t* ib = idx + P * T * b;
        const S* wb = w == nullptr ? nullptr : w + P * T * b;
        for (int64_t p = 0; p < P; ++p) {
          for (int64_t t = 0; t < T; ++t) {
            const int64_t j = ib[T * p + t];
            if (!valid_index(j, N)) continue;
            grow[j] += (wb == nullptr ? S(1) : wb[T * p + t]) * gout[p];
          }
        }
      }
    });
  });
}

Status gather_backward_weight_cpu(Dtype dt, const void* grad_out, const void* feat, const int64_t* idx,
                                  int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, void* grad_weight) {
  if (B <= 0 || P <= 0 || T <= 0) return nullptr;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using S = decltype(zero);
    const S* g = static_cast<const S*>(grad_out);
    const S* f = static_cast<const S*>(feat);
    S* gw = static_cast<S*>(grad_weight);
    cpu::parallel_for(0, B * P, row_grain(C * T), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / P, p = r % P;
        for (int64_t t = 0; t < T; ++t) {
          const int64_t j = idx[T * r + t];
          S acc = S(0);
          if (valid_index(j, N)) {
            for (int64_t c = 0; c < C; ++c) acc += g[(b * C + c) * P + p] * f[(b * C + c) * N + j];
          }
          gw[T * r + t] = acc;
        }
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Channels-last rows (packed batches): feat [P, C], idx / weight [Q, T], out [Q, C].

Status gather_rows_cpu(Dtype dt, const void* feat, const int64_t* idx, const void* weight, int64_t P,
                       int64_t C, int64_t Q, int64_t T, void* out) {
  if (Q <= 0 || C <= 0) return nullptr;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using S = decltype(zero);
    const S* f = static_cast<const S*>(feat);
    const S* w = static_cast<const S*>(weight);
    S* o = static_cast<S*>(out);
    cpu::parallel_for(0, Q, row_grain(C * T), [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q) {
        S* row = o + C * q;
        std::fill(row, row + C, S(0));
        for (int64_t t = 0; t < T; ++t) {  // ascending t for every channel, as on CUDA
          const int64_t j = idx[T * q + t];
          if (!valid_index(j, P)) continue;
          const S wt = w == nullptr ? S(1) : w[T * q + t];
          const S* src = f + C * j;
          for (int64_t c = 0; c < C; ++c) row[c] += wt * src[c];
        }
      }
    });
  });
}

Status gather_rows_backward_feat_cpu(Dtype dt, const void* grad_out, const int64_t* idx, const void* weight,
                                     int64_t P, int64_t C, int64_t Q, int64_t T, void* grad_feat) {
  if (P <= 0 || C <= 0) return nullptr;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using S = decltype(zero);
    const S* g = static_cast<const S*>(grad_out);
    const S* w = static_cast<const S*>(weight);
    S* out = static_cast<S*>(grad_feat);
    // Entries grouped by target row in ascending entry order (counting sort), then each row summed.
    std::vector<int64_t> start(static_cast<size_t>(P) + 1, 0);
    const int64_t entries = Q * T;
    for (int64_t e = 0; e < entries; ++e) {
      if (valid_index(idx[e], P)) ++start[static_cast<size_t>(idx[e]) + 1];
    }
    for (int64_t r = 0; r < P; ++r) start[r + 1] += start[r];
    std::vector<int64_t> list(static_cast<size_t>(start[P]));
    std::vector<int64_t> cursor(start.begin(), start.end() - 1);
    for (int64_t e = 0; e < entries; ++e) {
      if (valid_index(idx[e], P)) list[static_cast<size_t>(cursor[idx[e]]++)] = e;
    }
    cpu::parallel_for(0, P, row_grain(C * 4), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        S* row = out + C * r;
        std::fill(row, row + C, S(0));
        for (int64_t k = start[r]; k < start[r + 1]; ++k) {
          const int64_t e = list[k];
          const S wt = w == nullptr ? S(1) : w[e];
          const S* src = g + C * (e / T);
          for (int64_t c = 0; c < C; ++c) row[c] += wt * src[c];
        }
      }
    });
  });
}

Status gather_rows_backward_weight_cpu(Dtype dt, const void* grad_out, const void* feat, const int64_t* idx,
                                       int64_t P, int64_t C, int64_t Q, int64_t T, void* grad_weight) {
  if (Q <= 0 || T <= 0) return nullptr;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using S = decltype(zero);
    const S* g = static_cast<const S*>(grad_out);
    const S* f = static_cast<const S*>(feat);
    S* gw = static_cast<S*>(grad_weight);
    cpu::parallel_for(0, Q * T, row_grain(C), [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) {
        const int64_t j = idx[e];
        S acc = S(0);
        if (valid_index(j, P)) {
          const S* grow = g + C * (e / T);
          const S* frow = f + C * j;
          for (int64_t c = 0; c < C; ++c) acc += grow[c] * frow[c];
        }
        gw[e] = acc;
      }
    });
  });
}

}  // namespace pointops

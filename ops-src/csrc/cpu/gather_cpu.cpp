// The weighted-gather family on CPU (gather_points, group_points, three_interpolate and their
// gradients). The feature gradient walks (p, t) in ascending order for each (b, c) row, which
// makes it deterministic without atomics.
#include <algorithm>

#include "common.h"
#include "parallel.h"

namespace pointops {

namespace {

inline bool valid_index(int64_t j, int64_t N) { return j >= 0 && j < N; }

int64_t row_grain(int64_t work_per_row) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_row));
}

}  // namespace

Status gather_forward_cpu(Dtype dt, const void* feat, const int64_t* idx, const void* weight,
                          int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, void* out) {
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

Status gather_backward_feat_cpu(Dtype dt, const void* grad_out, const int64_t* idx,
                                const void* weight, int64_t B, int64_t C, int64_t N, int64_t P,
                                int64_t T, void* grad_feat) {
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

Status gather_backward_weight_cpu(Dtype dt, const void* grad_out, const void* feat,
                                  const int64_t* idx, int64_t B, int64_t C, int64_t N, int64_t P,
                                  int64_t T, void* grad_weight) {
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

}  // namespace pointops

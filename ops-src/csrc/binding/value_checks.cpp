#include "value_checks.h"

#include <torch/csrc/stable/ops.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <string>

#include "checks.h"
#include "ops.h"

namespace pointops {
namespace binding {
namespace {

std::atomic<bool> enabled{true};

// The largest coordinate magnitude whose squared distances stay finite in the accumulation
// type: (2x)^2 summed over 3 axes <= the type's max.
}  // namespace

double coordinate_limit(Dtype dt) {
  // A power of two below the exact bound sqrt(max / 12): 12 * (2^62)^2 = 1.5 * 2^127 stays under
  // float's max with room for the rounding of the sum (2^510 likewise for double). The CPU
  // checks (checks.cpp) and pointops.coordinate_limit use the same powers.
  return std::ldexp(1.0, dt == Dtype::Float64 ? 510 : 62);
}

#ifdef POINTOPS_WITH_CUDA
namespace {

// grid_cluster's problems (its kernels record them: cuda/grid_cluster.cu).
std::string describe_grid(CheckedArg arg, Problem problem) {
  if (arg == CheckedArg::Size && problem == Problem::OutOfRange)
    return "size held a value that is not finite and > 0 (cell sizes must be positive)";
  if (arg == CheckedArg::Size && problem == Problem::Overflow)
    return "the grid had more cells than int64 ids can number (the product over the dimensions of "
           "trunc((end - start) / size) + 1 exceeded 2^63 - 1); use a larger size";
  if (arg == CheckedArg::End && problem == Problem::OutOfRange)
    return "end was below start along some dimension (start and end default to the minimum and maximum "
           "of pos); the grid needs end >= start";
  if (arg == CheckedArg::Pos && problem == Problem::Overflow)
    return "a point's voxel id did not fit in int64 (a point far outside the grid from start to end)";
  return std::string(arg_name(arg)) + " held nan or inf";
}

// The problem of the other ops' checks (the check kernel's, the gathers').
std::string describe_problem(CheckedArg arg, Problem problem) {
  switch (problem) {
    case Problem::NotFinite:
      return std::string(arg_name(arg)) +
             " held nan, inf or a coordinate too large for its squared distances to be finite "
             "(|x| > 2**62 in float32/float16/bfloat16, > 2**510 in float64)";
    case Problem::OutOfRange:
      return std::string(arg_name(arg)) + " held a value outside its range (" +
             (arg == CheckedArg::Idx ? "-1 .. the size of the indexed dimension - 1"
                                     : "0 .. the size of the point dimension") +
             ")";
    case Problem::BadRowPointer:
      return std::string(arg_name(arg)) +
             " was not a row pointer (it must start at 0, never decrease, and end at the number of rows; it "
             "is Pointcept's offset with a 0 in front, or built from a batch vector or counts; for "
             "packed.furthest_point_sample no cloud may exceed max_points)";
    default: return "an argument held invalid values";
  }
}

std::string describe(int32_t code, const char* calling_op) {
  const CheckedOp op = code_op(code);
  const std::string what = op == CheckedOp::GridCluster
                               ? describe_grid(code_arg(code), code_problem(code))
                               : describe_problem(code_arg(code), code_problem(code));
  return std::string("pointops.") + calling_op + ": an earlier pointops." + op_name(op) +
         " call on this GPU was given bad values: " + what +
         ". This was found on the GPU after that call returned; its outputs, and those of every pointops "
         "call on this GPU since, were overwritten with NaN (floats) and -2**63 (indices). Fix the input; "
         "pointops.check_errors() reports such problems where you call it.";
}

}  // namespace
#endif

bool value_checks_enabled() { return enabled.load(std::memory_order_relaxed); }

bool set_value_checks_enabled(bool on) { return enabled.exchange(on); }

#ifdef POINTOPS_WITH_CUDA

void raise_recorded_problem(int32_t device, void* stream, const char* calling_op) {
  const int32_t code = value_check_error(device, /*take=*/true, stream);
  STD_TORCH_CHECK(code == 0, describe(code, calling_op));
}

InKernelChecks in_kernel_checks(CheckedOp op, CheckedArg arg, const Tensor& like, void* stream) {
  raise_recorded_problem(like.get_device_index(), stream, op_name(op));
  InKernelChecks checks{nullptr, nullptr, 0};
  if (!value_checks_enabled()) return checks;
  bool available = false;
  raise_on_error(in_kernel_checks_cuda(check_code(op, arg, Problem::OutOfRange), stream, &checks, &available),
                 op_name(op));
  return available ? checks : InKernelChecks{nullptr, nullptr, 0};
}

AsyncValueChecks::AsyncValueChecks(CheckedOp op, const Tensor& like, void* stream)
    : op_(op), stream_(stream), enabled_(value_checks_enabled()) {
  raise_recorded_problem(like.get_device_index(), stream, op_name(op));
}

void AsyncValueChecks::coordinates(const Tensor& points, CheckedArg arg) {
  if (!enabled_) return;
  const Dtype dt = float_dtype(points, arg_name(arg));
  checks_.push_back(ValueCheck{CheckKind::Coordinates, check_code(op_, arg, Problem::NotFinite),
                               points.const_data_ptr(), points.numel(), dt, coordinate_limit(dt), 0, 0});
}

void AsyncValueChecks::range(const std::optional<Tensor>& values, CheckedArg arg, int64_t low, int64_t high) {
  if (!enabled_ || !values.has_value()) return;
  checks_.push_back(ValueCheck{CheckKind::Range, check_code(op_, arg, Problem::OutOfRange),
                               values->const_data_ptr(), values->numel(), Dtype::Float32, 0.0, low, high});
}

void AsyncValueChecks::row_pointer(const Tensor& ptr, CheckedArg arg, int64_t rows, int64_t max_count) {
  if (!enabled_) return;
  checks_.push_back(ValueCheck{CheckKind::RowPointer, check_code(op_, arg, Problem::BadRowPointer),
                               ptr.const_data_ptr(), ptr.numel(), Dtype::Float32, 0.0, max_count, rows});
}

void AsyncValueChecks::run() {
  if (!enabled_ || checks_.empty()) return;
  bool skipped = false;
  raise_on_error(value_checks_cuda(checks_.data(), static_cast<int>(checks_.size()), stream_, &skipped),
                 op_name(op_));
  ran_ = !skipped;
  checks_.clear();
}

void AsyncValueChecks::poison(std::initializer_list<const Tensor*> outputs) {
  if (!ran_) return;
  PoisonTarget targets[kMaxPoisonTargets];
  int count = 0;
  for (const Tensor* t : outputs) {
    if (t == nullptr || t->numel() == 0 || count == kMaxPoisonTargets) continue;
    const bool is_index = t->scalar_type() == ScalarType::Long;
    targets[count++] = PoisonTarget{t->mutable_data_ptr(), t->numel(), is_index,
                                    is_index ? Dtype::Float32 : float_dtype(*t, "output")};
  }
  raise_on_error(poison_outputs_cuda(targets, count, stream_), op_name(op_));
}

void check_unread_indices(CheckedOp op, const Tensor& idx, int64_t n, const Tensor& out) {
  if (!idx.is_cuda() || idx.numel() == 0) return;
  CudaContext cuda(idx);
  Tensor wide = idx;  // the range check reads int64 (the packed gather takes int32 as well)
  if (idx.scalar_type() == ScalarType::Int) {
    std::vector<int64_t> sizes;
    for (int64_t d = 0; d < idx.dim(); ++d) sizes.push_back(idx.size(d));
    wide = empty_like_shape(idx, sizes, ScalarType::Long);
    torch::stable::copy_(wide, idx);
  }
  AsyncValueChecks checks(op, idx, cuda.stream);
  checks.range(wide, CheckedArg::Idx, -1, n - 1);
  checks.run();
  checks.poison({&out});
}

#else  // CPU-only build: values are checked directly by the CPU binding.

void raise_recorded_problem(int32_t, void*, const char*) {}
InKernelChecks in_kernel_checks(CheckedOp, CheckedArg, const Tensor&, void*) {
  return InKernelChecks{nullptr, nullptr, 0};
}
AsyncValueChecks::AsyncValueChecks(CheckedOp op, const Tensor&, void* stream)
    : op_(op), stream_(stream), enabled_(false) {}
void AsyncValueChecks::coordinates(const Tensor&, CheckedArg) {}
void check_unread_indices(CheckedOp, const Tensor&, int64_t, const Tensor&) {}
void AsyncValueChecks::range(const std::optional<Tensor>&, CheckedArg, int64_t, int64_t) {}
void AsyncValueChecks::row_pointer(const Tensor&, CheckedArg, int64_t, int64_t) {}
void AsyncValueChecks::run() {}
void AsyncValueChecks::poison(std::initializer_list<const Tensor*>) {}

#endif

}  // namespace binding
}  // namespace pointops

// The asynchronous value checks of one CUDA op call (kernels.h): a problem recorded by an
// earlier call on the device is raised first; then the call's checks are queued before its
// kernels and its outputs are listed for poisoning after them. Off with set_value_checks(false).
#pragma once

#include <optional>
#include <vector>

#include "../value_check_codes.h"
#include "tensors.h"

namespace pointops {
namespace binding {

// The largest coordinate magnitude accepted: squared distances between such points stay finite
// in dt's accumulation type (2^62 for float accumulation, 2^510 for float64).
double coordinate_limit(Dtype dt);

bool value_checks_enabled();
bool set_value_checks_enabled(bool enabled);  // returns the previous setting

// Raises the problem recorded on `device` (visible to the host now), if any, clearing it.
void raise_recorded_problem(int32_t device, void* stream, const char* calling_op);

// For kernels that check their own input: raises a recorded problem first (as AsyncValueChecks
// does), then returns where to record a new one (device_code null: checks off or not available).
InKernelChecks in_kernel_checks(CheckedOp op, CheckedArg arg, const Tensor& like, void* stream);

// For a gather whose kernels do not run on CUDA (an empty output, no points, no entries), so
// that none reads idx: checks it against -1..n-1 on the device all the same and poisons `out`,
// so a bad index is reported whatever the shape. Nothing for CPU tensors (checked already).
void check_unread_indices(CheckedOp op, const Tensor& idx, int64_t n, const Tensor& out);

class AsyncValueChecks {
 public:
  AsyncValueChecks(CheckedOp op, const Tensor& like, void* stream);

  void coordinates(const Tensor& points, CheckedArg arg);
  void range(const std::optional<Tensor>& values, CheckedArg arg, int64_t low, int64_t high);
  // 0, nondecreasing, ending at `rows`; with max_count > 0 no segment longer than that.
  void row_pointer(const Tensor& ptr, CheckedArg arg, int64_t rows, int64_t max_count = 0);
  // Queues the checks added so far.
  void run();
  // Queues the poisoning of these outputs (after the op's kernels).
  void poison(std::initializer_list<const Tensor*> outputs);

 private:
  CheckedOp op_;
  void* stream_;
  bool enabled_;
  bool ran_ = false;
  std::vector<ValueCheck> checks_;
};

}  // namespace binding
}  // namespace pointops

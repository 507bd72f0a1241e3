// The codes of the asynchronous value checks (kernels.h): which op, which argument, what
// problem, packed in one int32 so that a kernel can record a problem with one atomic.
#pragma once

#include <cstdint>

namespace pointops {

enum class CheckedOp : int32_t {
  FurthestPointSample = 1,
  BallQuery,
  Knn,
  Gather,
  KnnPacked,
  BallQueryPacked,
  FurthestPointSamplePacked,
  GatherRows,
  GridCluster,
  Count,
};

enum class CheckedArg : int32_t {
  Xyz = 1,
  Query,
  Lengths,
  QueryLengths,
  Idx,
  Ptr,
  QueryPtr,
  SamplePtr,
  Pos,
  Size,
  Start,
  End,
  Count,
};

enum class Problem : int32_t {
  NotFinite = 1,  // nan, inf, or beyond the coordinate limit
  OutOfRange,
  BadRowPointer,
  Overflow,  // a result that does not fit its integer type
  Count,
};

constexpr int32_t check_code(CheckedOp op, CheckedArg arg, Problem problem) {
  return (static_cast<int32_t>(op) << 16) | (static_cast<int32_t>(arg) << 8) | static_cast<int32_t>(problem);
}
constexpr CheckedOp code_op(int32_t code) { return static_cast<CheckedOp>((code >> 16) & 0xff); }
constexpr CheckedArg code_arg(int32_t code) { return static_cast<CheckedArg>((code >> 8) & 0xff); }
constexpr Problem code_problem(int32_t code) { return static_cast<Problem>(code & 0xff); }

inline const char* op_name(CheckedOp op) {
  switch (op) {
    case CheckedOp::FurthestPointSample: return "furthest_point_sample";
    case CheckedOp::BallQuery: return "ball_query";
    case CheckedOp::Knn: return "knn";
    case CheckedOp::Gather: return "gather (gather_points / group_points / three_interpolate)";
    case CheckedOp::KnnPacked: return "packed.knn";
    case CheckedOp::BallQueryPacked: return "packed.ball_query";
    case CheckedOp::FurthestPointSamplePacked: return "packed.furthest_point_sample";
    case CheckedOp::GatherRows: return "packed.gather";
    case CheckedOp::GridCluster: return "grid_cluster";
    default: return "an operator";
  }
}

inline const char* arg_name(CheckedArg arg) {
  switch (arg) {
    case CheckedArg::Xyz: return "xyz";
    case CheckedArg::Query: return "query";
    case CheckedArg::Lengths: return "lengths";
    case CheckedArg::QueryLengths: return "query_lengths";
    case CheckedArg::Idx: return "idx";
    case CheckedArg::Ptr: return "ptr";
    case CheckedArg::QueryPtr: return "query_ptr";
    case CheckedArg::SamplePtr: return "sample_ptr";
    case CheckedArg::Pos: return "pos";
    case CheckedArg::Size: return "size";
    case CheckedArg::Start: return "start";
    case CheckedArg::End: return "end";
    default: return "an argument";
  }
}

}  // namespace pointops

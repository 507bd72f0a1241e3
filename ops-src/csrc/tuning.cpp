#include "tuning.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace pointops {
namespace {

constexpr int kKnobs = static_cast<int>(Knob::Count);

constexpr const char* kNames[kKnobs] = {
    "POINTOPS_FPS_GROUP",
    "POINTOPS_FPS_NO_CLUSTER",
    "POINTOPS_FPS_LEAN",
    "POINTOPS_FPS_GENERAL",
    "POINTOPS_GRID_MIN_POINTS",
    "POINTOPS_GATHER_STAGED",
    "POINTOPS_GATHER_STAGE_KB",
    "POINTOPS_GATHER_PAIRED",
    "POINTOPS_GATHER_SPARSE",
    "POINTOPS_GATHER_SUM_STAGE_KB",
    "POINTOPS_GATHER_SUM_SPAN",
    "POINTOPS_GATHER_OVERLAP",
    "POINTOPS_CPU_FPS_PATH",
    "POINTOPS_CPU_NEIGHBORS_PATH",
    "POINTOPS_GATHER_ROWS_COUNTED",
    "POINTOPS_GRID_CLUSTER_TWO_KERNELS",
    "POINTOPS_GRID_CLUSTER_FUSED_BLOCKS",
    "POINTOPS_GATHER_DENSE_WIDE",
    "POINTOPS_BALL_QUERY_LANES",
    "POINTOPS_SMEM_LIMIT_KB",
};

// Unparseable values count as unset; the CPU FPS path takes words.
int64_t parse(int knob, const char* text) {
  if (text == nullptr || *text == '\0') return kUnset;
  if (knob == static_cast<int>(Knob::CpuFpsPath) || knob == static_cast<int>(Knob::CpuNeighborsPath)) {
    if (std::strcmp(text, "brute") == 0) return 0;
    if (std::strcmp(text, "kdtree") == 0) return 1;
    return kUnset;  // "auto" or anything else
  }
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  return end != text && *end == '\0' && v >= 0 ? static_cast<int64_t>(v) : kUnset;
}

struct Table {
  std::atomic<int64_t> value[kKnobs];
  Table() {
    for (int k = 0; k < kKnobs; ++k) value[k].store(parse(k, std::getenv(kNames[k])));
  }
};

std::atomic<int64_t> generation{0};

Table& table() {
  static Table t;  // the environment is read once, on first use
  return t;
}

}  // namespace

int64_t tuning_generation() { return generation.load(std::memory_order_acquire); }

const char* tuning_name(Knob knob) { return kNames[static_cast<int>(knob)]; }

bool tuning_knob(const char* name, Knob* knob) {
  if (name == nullptr) return false;
  const char* prefix = "POINTOPS_";
  const bool has_prefix = std::strncmp(name, prefix, std::strlen(prefix)) == 0;
  for (int k = 0; k < kKnobs; ++k) {
    const char* full = kNames[k];
    if (std::strcmp(has_prefix ? full : full + std::strlen(prefix), name) == 0) {
      *knob = static_cast<Knob>(k);
      return true;
    }
  }
  return false;
}

int64_t tuning(Knob knob) { return table().value[static_cast<int>(knob)].load(std::memory_order_relaxed); }

int64_t set_tuning(Knob knob, int64_t value) {
  const int64_t previous = table().value[static_cast<int>(knob)].exchange(value < 0 ? kUnset : value);
  generation.fetch_add(1, std::memory_order_acq_rel);
  return previous;
}

}  // namespace pointops

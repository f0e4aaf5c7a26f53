// How an embedding request turns the final hidden states of its prompt into one vector. A plain
// value the engine puts on a request, the scheduler hands to the executor in every StepPlan item,
// and the executor applies (executor/pooling.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace drift {

enum class PoolingMode : uint8_t {
  kNone,  // a generation request: no pooling, a token is sampled
  kMean,  // the mean over every prompt token
  kLast,  // the last prompt token's
  kCls,   // the first prompt token's (BERT's [CLS] position)
};

std::string_view pooling_mode_name(PoolingMode mode);  // "none", "mean", "last", "cls"
// The mode named `name` ("mean", "last" or "cls"); nullopt for any other name ("none" too).
std::optional<PoolingMode> parse_pooling_mode(std::string_view name);

}  // namespace drift

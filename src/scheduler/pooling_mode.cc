#include "scheduler/pooling_mode.h"

namespace drift {

std::string_view pooling_mode_name(PoolingMode mode) {
  switch (mode) {
    case PoolingMode::kNone:
      return "none";
    case PoolingMode::kMean:
      return "mean";
    case PoolingMode::kLast:
      return "last";
    case PoolingMode::kCls:
      return "cls";
  }
  return "unknown";
}

std::optional<PoolingMode> parse_pooling_mode(std::string_view name) {
  for (PoolingMode mode : {PoolingMode::kMean, PoolingMode::kLast, PoolingMode::kCls})
    if (name == pooling_mode_name(mode)) return mode;
  return std::nullopt;
}

}  // namespace drift

#include "scheduler/sequence_state.h"

namespace drift {

std::string_view sequence_phase_name(SequencePhase phase) {
  switch (phase) {
    case SequencePhase::kWaiting:
      return "waiting";
    case SequencePhase::kPrefill:
      return "prefill";
    case SequencePhase::kDecode:
      return "decode";
    case SequencePhase::kFinished:
      return "finished";
  }
  return "unknown";
}

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
    case FinishReason::kRejected:
      return "rejected";
  }
  return "unknown";
}

}  // namespace drift

// Per-request sampling settings: a plain value shared by the scheduler, which hands each
// sequence's settings to the executor in every StepPlan item, and the sampling library, which
// applies them to the logits. SamplingParams' own field defaults sample from the model's
// distribution unchanged; what a request that sets nothing gets is decided by the engine
// (engine/sampling_defaults.h), from SamplingSettings layered over those defaults.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace drift {

// A shift of one token's logit (OpenAI's logit_bias), before penalties and filters. kBanBias
// removes the token from the draw.
struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;  // in [-100, 100]
  bool operator==(const LogitBias&) const = default;
};
inline constexpr float kBanBias = -100.0f;
// Most logit_bias entries a request may carry (each one is applied to every sampled token).
inline constexpr size_t kMaxLogitBias = 1024;

// Most alternatives a request may ask log-probabilities of (OpenAI's top_logprobs limit).
inline constexpr int32_t kMaxTopLogprobs = 20;

// Log-probabilities of one generated token under the model's distribution (softmax of the raw
// logits, before temperature, penalties and truncation, as OpenAI and vLLM report them). Fixed
// size, so carrying it through a step allocates nothing.
struct TokenLogprobs {
  float logprob = 0.0f;                            // of the sampled token
  int32_t num_top = 0;                             // entries used below
  std::array<int32_t, kMaxTopLogprobs> top_ids{};  // most likely first (lower id on ties)
  std::array<float, kMaxTopLogprobs> top_logprobs{};
};

// The filters of a draw, applied one after the other to the candidates that are left
// (sampler.h). Penalties always come first, on the raw logits.
enum class SamplerStage : uint8_t { kTopK, kTopP, kMinP, kTemperature };
inline constexpr int kNumSamplerStages = 4;

// The order of the filters: always all four, each once. The default is llama.cpp's
// (top-k, top-p, min-p, then temperature), so top-p and min-p measure the untempered
// distribution; a model may recommend another (general.sampling.sequence).
struct SamplerOrder {
  std::array<SamplerStage, kNumSamplerStages> stages = {
      SamplerStage::kTopK, SamplerStage::kTopP, SamplerStage::kMinP, SamplerStage::kTemperature};
  bool operator==(const SamplerOrder&) const = default;
};

// "top_k", "top_p", "min_p", "temperature" (llama.cpp's sampler names).
std::string_view sampler_stage_name(SamplerStage stage);
// The stages joined by ';' as general.sampling.sequence writes them:
// "top_k;top_p;min_p;temperature".
std::string sampler_order_string(const SamplerOrder& order);

struct SamplingParams {
  // Logits are divided by this before softmax; 0 selects greedy decoding (argmax).
  float temperature = 1.0f;
  // Keep only the k most likely tokens. Absent: no limit.
  std::optional<int32_t> top_k;
  // Nucleus sampling: keep the smallest set of tokens whose probabilities sum to at least top_p.
  // 1 keeps every token.
  float top_p = 1.0f;
  // Drop tokens whose probability is below min_p times the most likely token's. 0 keeps every
  // token.
  float min_p = 0.0f;
  // Divides positive logits (multiplies negative ones) of every token present in the prompt or
  // the generated text. 1 disables it; above 1 discourages repetition.
  float repetition_penalty = 1.0f;
  // Repetition, presence and frequency penalties look at the last penalty_last_n tokens of the
  // history only (llama.cpp's penalty_last_n); -1: the whole history; 0: no penalties at all.
  int32_t penalty_last_n = -1;
  // Subtracted once from the logit of every token that appears in the generated text.
  float presence_penalty = 0.0f;
  // Subtracted from a token's logit once per occurrence in the generated text.
  float frequency_penalty = 0.0f;
  // Seed of the request's random stream. Absent: the engine derives one from the request id.
  std::optional<uint64_t> seed;
  // Token ids that end the sequence (finish reason "stop"), besides the model's end-of-sequence
  // tokens. The stop token is reported as the sequence's last token.
  std::vector<int32_t> stop_token_ids;
  // Keep generating past the model's end-of-sequence tokens (stop_token_ids still apply).
  bool ignore_eos = false;
  // Report each sampled token's log-probability and this many most likely alternatives
  // (0..kMaxTopLogprobs). Absent: none.
  std::optional<int32_t> logprobs;
  // The order in which top-k, top-p, min-p and temperature are applied.
  SamplerOrder order;
  // Added to the logits of these tokens before penalties (kBanBias: the token is never drawn).
  // Token ids are checked against the vocabulary by the engine.
  std::vector<LogitBias> logit_bias;

  bool greedy() const { return temperature == 0.0f; }

  // An error naming the first invalid field, with the accepted range.
  Status validate() const {
    if (!std::isfinite(temperature) || temperature < 0.0f)
      return make_error("temperature must be a finite number >= 0, got {}", temperature);
    if (top_k && *top_k < 1) return make_error("top_k must be >= 1 when set, got {}", *top_k);
    if (!(top_p > 0.0f && top_p <= 1.0f))
      return make_error("top_p must be in (0, 1], got {}", top_p);
    if (!(min_p >= 0.0f && min_p <= 1.0f))
      return make_error("min_p must be in [0, 1], got {}", min_p);
    if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f)
      return make_error("repetition_penalty must be a finite number > 0, got {}",
                        repetition_penalty);
    if (penalty_last_n < -1)
      return make_error("penalty_last_n must be -1 (whole history), 0 (off) or > 0, got {}",
                        penalty_last_n);
    if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
      return make_error("presence_penalty must be in [-2, 2], got {}", presence_penalty);
    if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
      return make_error("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
    if (logprobs && (*logprobs < 0 || *logprobs > kMaxTopLogprobs))
      return make_error("logprobs must be in [0, {}] when set, got {}", kMaxTopLogprobs, *logprobs);
    for (int32_t id : stop_token_ids)
      if (id < 0) return make_error("stop_token_ids must be >= 0, got {}", id);
    if (logit_bias.size() > kMaxLogitBias)
      return make_error("logit_bias may hold at most {} tokens, got {}", kMaxLogitBias,
                        logit_bias.size());
    for (const LogitBias& b : logit_bias) {
      if (b.token < 0) return make_error("logit_bias token ids must be >= 0, got {}", b.token);
      if (!(b.bias >= -100.0f && b.bias <= 100.0f))
        return make_error("logit_bias values must be in [-100, 100], got {} for token {}", b.bias,
                          b.token);
    }
    return Status::Ok();
  }
};

// Sampling as a caller asks for it: every field that has a default is optional, so a field the
// caller did not set is told apart from one set to the default's value, and only unset fields
// take the engine's defaults (engine/sampling_defaults.h). Also the shape of each layer of
// defaults (a model's recommendation, an operator's flags).
struct SamplingSettings {
  std::optional<float> temperature;  // 0: greedy
  std::optional<int32_t> top_k;      // 0: no limit (overrides a default top-k)
  std::optional<float> top_p;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<int32_t> penalty_last_n;
  std::optional<float> presence_penalty;
  std::optional<float> frequency_penalty;
  std::optional<SamplerOrder> order;
  // Not defaulted: taken as they are.
  std::optional<uint64_t> seed;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  std::optional<int32_t> logprobs;
  std::vector<LogitBias> logit_bias;
};

}  // namespace drift

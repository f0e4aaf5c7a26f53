// Python values -> the engine's types: engine options from keyword arguments (named as the CLI's
// flags), a request's sampling from the fields a drift.SamplingParams set, a prompt from text,
// token ids or chat messages. A value of the wrong type raises TypeError, an unknown name
// ValueError; the engine itself judges every value (and raises through the caller).
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "engine/request.h"
#include "runtime/engine_options.h"
#include "util/sampling_params.h"

namespace drift::python {

// `options`: {"threads": 2, "parallel": 16, "kv_mib": 64.0, "no_prefix_cache": True, ...}.
EngineOptions engine_options_from(const nanobind::dict& options);

// `fields`: the sampling fields set, e.g. {"temperature": 0.0, "top_k": 40, "seed": 1}; "stop"
// (the request's stop strings, Request::stop) is not a sampling field and is left out here.
SamplingSettings sampling_from(const nanobind::dict& fields);
// The "stop" entry of `fields` (a list of str), empty when absent.
std::vector<std::string> stop_strings_from(const nanobind::dict& fields);

// `kind` "text" (a str, tokenized with the model's special tokens parsed, as `drift generate`
// does), "tokens" (a list of ids) or "chat" (a list of {"role", "content"[, "name"]} dicts,
// rendered with the model's chat template).
Prompt prompt_from(const std::string& kind, const nanobind::handle& prompt);

}  // namespace drift::python

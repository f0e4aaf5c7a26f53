// drift._drift: the native half of the `drift` package. The Python half (python/drift/) gives it
// vLLM's shape (LLM, AsyncLLM, SamplingParams, RequestOutput); this module only converts values
// and hands requests to the engine.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <limits>

#include "engine/output_processor.h"
#include "engine/sampling_defaults.h"
#include "py_conversion.h"
#include "py_engine.h"
#include "stream_channel.h"

namespace nb = nanobind;
using namespace drift;
using namespace drift::python;

namespace {

// vLLM's finish reasons: "stop", "length", or "abort" for a cancelled request.
const char* vllm_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    default:
      return "abort";
  }
}

nb::object stop_string_of(const Finish& finish) {
  return finish.stop_string ? nb::object(nb::str(finish.stop_string->c_str())) : nb::none();
}

// A job from Python: (kind, prompt, max_tokens or None, sampling fields, n) -> its n engine
// requests (the engine's fan-out: seeds seed, seed + 1, ...).
std::vector<Request> requests_from(const nb::tuple& job) {
  if (job.size() != 5) throw nb::value_error("a job is (kind, prompt, max_tokens, sampling, n)");
  Request r;
  r.prompt = prompt_from(nb::cast<std::string>(job[0]), job[1]);
  if (!job[2].is_none()) {
    if (!nb::isinstance<nb::int_>(job[2])) throw nb::type_error("max_tokens: expected an int");
    const long long max_tokens = nb::cast<long long>(job[2]);
    if (max_tokens < 1 || max_tokens > std::numeric_limits<int32_t>::max())
      throw nb::value_error(
          ("max_tokens must be in [1, 2^31 - 1], got " + std::to_string(max_tokens)).c_str());
    r.max_tokens = int32_t(max_tokens);
  }
  const nb::dict fields = nb::cast<nb::dict>(job[3]);
  r.sampling = sampling_from(fields);
  r.stop = stop_strings_from(fields);
  if (!nb::isinstance<nb::int_>(job[4]) || nb::isinstance<nb::bool_>(job[4]))
    throw nb::type_error("n: expected an int");
  const long long n = nb::cast<long long>(job[4]);
  Expected<std::vector<Request>> choices =
      fan_out_choices(r, int32_t(std::clamp<long long>(n, INT32_MIN, INT32_MAX)));
  if (!choices.ok()) throw nb::value_error(choices.error().message.c_str());
  return std::move(*choices);
}

// A stream's finish for Python: (finish_reason, error kind None | "value" | "engine", message,
// prompt tokens, completion tokens, the stop string that ended it or None).
nb::tuple finish_tuple(const Finish& finish) {
  nb::object kind = nb::none();
  try {
    raise_if_failed(finish);
  } catch (const nb::builtin_exception&) {
    kind = nb::str("value");
  } catch (const EngineError&) {
    kind = nb::str("engine");
  }
  return nb::make_tuple(vllm_finish_reason(finish.reason), kind, finish.message,
                        finish.usage.prompt_tokens, finish.usage.completion_tokens,
                        stop_string_of(finish));
}

// What an engine option left out of drift.LLM(...) gets: the `drift` commands' defaults, read
// from EngineConfig (runtime/engine_options.h), so Python code never repeats them.
nb::dict engine_option_defaults() {
  const EngineOptions o;
  nb::dict d;
  d["threads"] = o.threads;
  d["parallel"] = o.parallel;
  d["batch_tokens"] = o.batch_tokens;
  d["page_size"] = o.page_size;
  d["kv_cache_dtype"] = o.kv_cache_dtype;
  d["kv_ram_fraction"] = o.kv_ram_fraction;
  d["admission"] = o.admission;
  d["policy"] = o.policy;
  d["max_queued"] = o.max_queued;
  d["spec"] = o.spec;
  d["spec_pool_mib"] = o.spec_pool_mib;
  d["spec_max_draft"] = o.spec_max_draft;
  return d;
}

}  // namespace

NB_MODULE(_drift, m) {
  nb::exception<EngineError>(m, "EngineError", PyExc_RuntimeError);
  m.attr("MAX_CHOICES") = kMaxChoices;  // SamplingParams.n's bound, the engine's

  m.def("engine_option_defaults", &engine_option_defaults,
        "The engine options' defaults, as a dict of the keyword arguments drift.LLM takes.");

  m.def(
      "check_sampling",
      [](const nb::dict& fields) {
        // The engine's own check of a request's sampling, on the fields set (unset ones take
        // neutral values here and the engine's defaults when the request runs). Its stop
        // strings' messages name no field: SamplingParams calls it "stop".
        Status s = SamplingDefaults{}.resolve(sampling_from(fields)).validate();
        if (!s.ok()) throw nb::value_error(s.message().c_str());
        s = validate_stop_strings(stop_strings_from(fields));
        if (!s.ok()) throw nb::value_error(("stop: " + s.message()).c_str());
      },
      "Raises ValueError naming the first invalid sampling field.");

  nb::class_<StreamChannel>(m, "StreamChannel")
      .def_static("open",
                  [] {
                    Expected<std::shared_ptr<StreamChannel>> channel = StreamChannel::open();
                    if (!channel.ok()) throw EngineError(channel.error().message);
                    return *channel;
                  })
      .def("fileno", &StreamChannel::fd)
      .def("drain", [](StreamChannel& channel) {
        // [(key, token id or None, text delta, finish tuple or None)]
        nb::list out;
        for (auto& [key, event] : channel.drain()) {
          nb::object token = event.token ? nb::object(nb::int_(*event.token)) : nb::none();
          nb::object finish = event.finish ? nb::object(finish_tuple(*event.finish)) : nb::none();
          out.append(nb::make_tuple(key, token, event.text, finish));
        }
        return out;
      });

  nb::class_<StreamHandle>(m, "StreamHandle")
      .def("cancel", &StreamHandle::cancel)
      .def_prop_ro("prompt_tokens", &StreamHandle::prompt_tokens);

  nb::class_<PyEngine>(m, "Engine")
      .def(nb::init<const std::string&, const nb::dict&, std::optional<std::string>>(),
           nb::arg("model_path"), nb::arg("options"), nb::arg("chat_template") = nb::none())
      .def("generate",
           [](PyEngine& engine, const nb::list& jobs) {
             std::vector<Request> requests;  // each job's n choices, in order
             for (nb::handle job : jobs)
               for (Request& r : requests_from(nb::cast<nb::tuple>(job)))
                 requests.push_back(std::move(r));
             nb::list out;
             for (BatchOutcome& o : engine.run_batch(std::move(requests)))
               out.append(nb::make_tuple(o.prompt_token_ids, o.token_ids, o.text,
                                         vllm_finish_reason(o.finish.reason),
                                         stop_string_of(o.finish)));
             return out;
           })
      .def(
          "submit_stream",
          [](PyEngine& engine, const nb::tuple& job, std::shared_ptr<StreamChannel> channel,
             const std::vector<uint64_t>& keys) {
            // One key per choice: choice i's events arrive under keys[i].
            std::vector<Request> choices = requests_from(job);
            if (choices.size() != keys.size())
              throw nb::value_error("submit_stream: one key per choice (n) is needed");
            nb::list handles;
            for (size_t i = 0; i < choices.size(); ++i)
              handles.append(nb::cast(engine.submit_stream(std::move(choices[i]), channel, keys[i]),
                                      nb::rv_policy::move));
            return handles;
          })
      .def("tokenize",
           [](const PyEngine& engine, const std::string& kind, const nb::handle& prompt) {
             return engine.tokenize(prompt_from(kind, prompt));
           })
      .def("detokenize", &PyEngine::detokenize, nb::arg("ids"), nb::arg("render_special") = false)
      .def("stats", &PyEngine::stats)
      .def_prop_ro("max_model_len", [](const PyEngine& e) { return e.setup().max_model_len; })
      .def_prop_ro("parallel", [](const PyEngine& e) { return e.setup().scheduler.max_num_seqs; })
      .def("shutdown", &PyEngine::shutdown);
}

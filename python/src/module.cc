// drift._drift: the native half of the `drift` package. The Python half (python/drift/) gives it
// vLLM's shape (LLM, AsyncLLM, SamplingParams, RequestOutput); this module only converts values
// and hands requests to the engine.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <limits>

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

// A job from Python: (kind, prompt, max_tokens or None, sampling fields).
Request request_from(const nb::tuple& job) {
  if (job.size() != 4) throw nb::value_error("a job is (kind, prompt, max_tokens, sampling)");
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
  r.sampling = sampling_from(nb::cast<nb::dict>(job[3]));
  return r;
}

// A stream's finish for Python: (finish_reason, error kind None | "value" | "engine", message,
// prompt tokens, completion tokens).
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
                        finish.usage.prompt_tokens, finish.usage.completion_tokens);
}

}  // namespace

NB_MODULE(_drift, m) {
  nb::exception<EngineError>(m, "EngineError", PyExc_RuntimeError);

  m.def(
      "check_sampling",
      [](const nb::dict& fields) {
        // The engine's own check of a request's sampling, on the fields set (unset ones take
        // neutral values here and the engine's defaults when the request runs).
        Status s = SamplingDefaults{}.resolve(sampling_from(fields)).validate();
        if (!s.ok()) throw nb::value_error(s.message().c_str());
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
             std::vector<Request> requests;
             for (nb::handle job : jobs) requests.push_back(request_from(nb::cast<nb::tuple>(job)));
             nb::list out;
             for (BatchOutcome& o : engine.run_batch(std::move(requests)))
               out.append(nb::make_tuple(o.prompt_token_ids, o.token_ids, o.text,
                                         vllm_finish_reason(o.finish.reason)));
             return out;
           })
      .def("submit_stream",
           [](PyEngine& engine, const nb::tuple& job, std::shared_ptr<StreamChannel> channel,
              uint64_t key) { return engine.submit_stream(request_from(job), channel, key); })
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

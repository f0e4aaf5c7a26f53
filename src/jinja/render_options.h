// What a render may consume and where it gets the time from. Templates come from model files
// and are untrusted: every limit here turns a hostile template (endless loops, recursion bombs,
// exponential strings) into an Error returned quickly instead of a hang or a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <functional>

namespace drift::jinja {

struct RenderLimits {
  // Expression evaluations, statements and loop iterations (20 per macro call), plus one step
  // per 64 bytes of strings (or per item of lists) that operations build. Rendering a
  // 1,000-message conversation with Qwen 3's template takes about 60k.
  uint64_t max_steps = 1'000'000;
  // The rendered text, any buffer a macro or block set renders into, and any single string.
  size_t max_output_bytes = 16u << 20;
  // Nested macro calls (recursion). jinja2 hits Python's recursion limit not far above this.
  uint32_t max_call_depth = 100;
  // Nested evaluations at run time: statements, expressions and macro bodies together.
  uint32_t max_eval_depth = 1500;
  // Nesting of lists and dicts, in the inputs and in what templates build.
  uint32_t max_value_depth = 256;
  // Items in a range() or built by list repetition; jinja2's sandbox caps range() at 100000.
  int64_t max_range = 100'000;
};

struct RenderOptions {
  RenderLimits limits;
  // The local date and time strftime_now() formats (Python's datetime.now()). Unset: the
  // system clock in the process's time zone. Tests freeze it.
  std::function<std::tm()> clock;
};

}  // namespace drift::jinja

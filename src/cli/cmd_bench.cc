// `drift bench`: single-stream speed as llama-bench measures it — prefill of a P-token prompt
// (pp, one batch) and decode of N tokens one at a time (tg) — over R repetitions after a
// warm-up, printed as a table and as JSON, with the memory-bandwidth ceiling for decode (the
// weights' bytes plus the K/V bytes a step reads at its depth). The KV pages are split into KV
// groups as `drift serve` splits them (kv/kv_groups.h; one group with
// --no-hybrid-kv), each layer reading through its group's page list; nothing is freed (one
// sequence, repeated from position 0).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "kv/kv_groups.h"
#include "kv/kv_layout.h"
#include "model/forward_pass.h"
#include "model_locator.h"
#include "runtime/engine_options.h"
#include "runtime/load_engine.h"
#include "sampling/random_stream.h"
#include "util/memory_bandwidth.h"

namespace drift::cli {
namespace {

struct BenchOptions {
  std::optional<std::string> model;
  int64_t prompt_tokens = 512;
  int64_t gen_tokens = 128;
  int repetitions = 3;
  int threads = program_engine_defaults().threads;
  int64_t depth = 0;  // decode (tg) starts after this many cached positions, as llama-bench's -d
  std::string kv_cache_dtype{kv_dtype_name(program_engine_defaults().kv.dtype)};
  bool no_hybrid_kv = false;  // one KV group of every layer, as `drift serve --no-hybrid-kv`
};

struct Stats {
  double mean = 0, stddev = 0;
};

Stats stats_of(const std::vector<double>& v) {
  Stats s;
  for (double x : v) s.mean += x;
  s.mean /= v.size();
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(s.stddev / (v.size() - 1)) : 0.0;
  return s;
}

class Runner {
 public:
  Runner(ForwardPass& forward, KvPages& kv, ThreadPool& pool, std::vector<int32_t> pages,
         int64_t n_vocab)
      : forward_(forward), kv_(kv), pool_(pool), pages_(std::move(pages)), logits_(n_vocab) {}

  // One forward of `tokens` at positions [start, start + n); logits for the last one.
  Status step(std::span<const int32_t> tokens, int64_t start) {
    ForwardSequence s;
    s.n_tokens = static_cast<int64_t>(tokens.size());
    s.start_pos = start;
    s.page_table = pages_;
    s.want_logits = true;
    return forward_.run(ForwardBatch{tokens, std::span<const ForwardSequence>(&s, 1)}, kv_, pool_,
                        logits_);
  }

 private:
  ForwardPass& forward_;
  KvPages& kv_;
  ThreadPool& pool_;
  std::vector<int32_t> pages_;
  std::vector<float> logits_;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The KV pages of one sequence of `context` tokens, in the KV groups the serving engine would
// use (one group with `one_group`): sets `groups` and the pages per group, `n_pages`.
Expected<KvPages> bench_kv_pages(const ModelConfig& c, int64_t context, KVDtype dtype,
                                 bool one_group, int64_t& groups, int64_t& n_pages) {
  std::vector<int32_t> windows;  // [n_layers]: each layer's sliding window, 0 for full attention
  for (const LayerConfig& layer : c.layers)
    windows.push_back(layer.sliding_window ? int32_t(c.sliding_window) : 0);
  auto grouping = group_kv_layers(windows, !one_group);
  if (!grouping.ok()) return grouping.error();
  groups = grouping->num_groups();
  const int64_t page_size = program_engine_defaults().kv.page_size;
  n_pages = (context + page_size - 1) / page_size;
  return KvPages::create(c, groups * n_pages, page_size, kv_format_of(dtype),
                         groups > 1 ? KvLayerPlacement{grouping->layers_per_group,
                                                       grouping->layer_group, grouping->layer_slot}
                                    : KvLayerPlacement{});
}

// The K/V bytes one decode step reads on average over positions [depth, depth + gen): each layer
// reads every cached position it attends to (a sliding layer at most its window), in `dtype`'s
// page bytes (scales included). With the weights' bytes this is the step's memory traffic.
double kv_bytes_per_decode_token(const ModelConfig& c, KVDtype dtype, int64_t depth, int64_t gen) {
  KVLayout one_layer{.num_layers = 1,
                     .num_kv_heads = int32_t(c.n_kv_heads),
                     .head_dim = int32_t(c.head_dim),
                     .page_size = 16,
                     .dtype = dtype};
  if (!one_layer.validate().ok()) return 0;
  const double bytes_per_position = double(one_layer.bytes_per_page()) / one_layer.page_size;
  double positions = 0;  // summed over layers, averaged over the decode steps
  for (const LayerConfig& layer : c.layers) {
    const int64_t window =
        layer.sliding_window ? c.sliding_window : std::numeric_limits<int64_t>::max();
    for (int64_t i = 0; i < gen; ++i) positions += double(std::min(depth + i + 1, window));
  }
  return gen > 0 ? bytes_per_position * positions / double(gen) : 0;
}

// o.repetitions rounds of the prompt's prefill (pp) and o.gen_tokens decode steps after o.depth
// cached positions (tg), each round's rate in tokens per second appended.
Status measure(Runner& runner, const std::vector<int32_t>& prompt, const BenchOptions& o,
               std::vector<double>& pp_rates, std::vector<double>& tg_rates) {
  for (int r = 0; r < o.repetitions; ++r) {
    if (o.prompt_tokens > 0) {
      auto start = std::chrono::steady_clock::now();
      DRIFT_RETURN_IF_ERROR(runner.step(prompt, 0));
      pp_rates.push_back(o.prompt_tokens / seconds_since(start));
    }
    if (o.gen_tokens > 0) {
      auto start = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < o.gen_tokens; ++i) {
        int32_t token = prompt.empty() ? 0 : prompt[i % prompt.size()];
        DRIFT_RETURN_IF_ERROR(runner.step(std::span<const int32_t>(&token, 1), o.depth + i));
      }
      tg_rates.push_back(o.gen_tokens / seconds_since(start));
    }
  }
  return Status::Ok();
}

int run_bench(const BenchOptions& o) {
  auto fail = [](const Error& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    return 1;
  };
  auto path = resolve_model_path(o.model);
  if (!path.ok()) return fail(path.error());
  CpuFeatures cpu = detect_cpu_features();
  auto isa = select_isa(cpu);
  if (!isa.ok()) return fail(isa.error());
  auto load_start = std::chrono::steady_clock::now();
  auto model = Model::load(*path, *isa);
  if (!model.ok()) return fail(model.error());
  const ModelConfig& c = (*model)->config();
  const int64_t context = std::max(o.prompt_tokens, o.depth) + o.gen_tokens;
  if (context > c.n_ctx_train)
    return fail(
        make_error("max(-p, -d) + -n = {} exceeds the model's context {}", context, c.n_ctx_train));
  const std::optional<KVDtype> dtype = parse_kv_dtype(o.kv_cache_dtype);
  if (!dtype) return fail(make_error("--kv-cache-dtype: expected f16, bf16, f32, int8 or int4"));

  int64_t groups = 0, n_pages = 0;  // KV groups, pages per group
  auto kv = bench_kv_pages(c, context, *dtype, o.no_hybrid_kv, groups, n_pages);
  if (!kv.ok()) return fail(kv.error());
  constexpr int64_t kDepthChunk = 512;  // the cached positions are prefilled in chunks of this
  const int64_t max_tokens =
      std::max<int64_t>({o.prompt_tokens, 1, std::min(o.depth, kDepthChunk)});
  auto forward = ForwardPass::create(**model, ForwardLimits{max_tokens, 1, context, o.threads});
  if (!forward.ok()) return fail(forward.error());
  ThreadPool pool(o.threads);
  std::vector<int32_t> pages(groups * n_pages);  // [groups][n_pages]
  for (int64_t i = 0; i < groups * n_pages; ++i) pages[i] = static_cast<int32_t>(i);
  Runner runner(**forward, *kv, pool, pages, c.n_vocab);

  // Random prompt tokens, as llama-bench uses.
  std::vector<int32_t> prompt(o.prompt_tokens);
  for (int64_t i = 0; i < o.prompt_tokens; ++i)
    prompt[i] = static_cast<int32_t>(stream_bits(1234, i) % c.n_vocab);
  // Warm-up on the prompt's first 16 tokens, or one token when only decode is measured (-p 0).
  const int32_t first_token = 0;
  Status warm = runner.step(
      prompt.empty()
          ? std::span<const int32_t>(&first_token, 1)
          : std::span<const int32_t>(prompt.data(), std::min<int64_t>(16, prompt.size())),
      0);
  if (!warm.ok()) return fail(warm.error());
  // Decode reads the K/V of positions [0, depth): fill them once (tg writes only after them).
  for (int64_t at = 0; at < o.depth; at += kDepthChunk) {
    std::vector<int32_t> chunk(std::min(kDepthChunk, o.depth - at));
    for (size_t i = 0; i < chunk.size(); ++i)
      chunk[i] = static_cast<int32_t>(stream_bits(4321, at + int64_t(i)) % c.n_vocab);
    if (Status s = runner.step(chunk, at); !s.ok()) return fail(s.error());
  }
  const double load_seconds = seconds_since(load_start);

  std::vector<double> pp_rates, tg_rates;
  if (Status s = measure(runner, prompt, o, pp_rates, tg_rates); !s.ok()) return fail(s.error());

  const double bandwidth = measure_read_bandwidth(pool);
  const double bytes_per_token = static_cast<double>((*model)->weights().matrix_bytes);
  const double kv_bytes = kv_bytes_per_decode_token(c, *dtype, o.depth, o.gen_tokens);
  const double roofline = bandwidth / (bytes_per_token + kv_bytes);
  const std::string model_name = c.name.empty() ? c.arch_name : c.name;
  fmt::print(stderr,
             "load + warm-up {:.2f} s; {}; memory read bandwidth {:.1f} GB/s; {} KV cache in {} "
             "KV group{}, tg after {} cached positions\n",
             load_seconds, describe_cpu(cpu), bandwidth / 1e9, o.kv_cache_dtype, groups,
             groups > 1 ? "s" : "", o.depth);
  fmt::print("| model | size | isa | threads | test | t/s | of ceiling |\n");
  fmt::print("| --- | ---: | --- | ---: | --- | ---: | ---: |\n");
  std::string json_tests;
  auto row = [&](const char* kind, int64_t n, const std::vector<double>& rates, double ceiling) {
    if (rates.empty()) return;
    Stats s = stats_of(rates);
    std::string ceiling_text = ceiling > 0 ? fmt::format("{:.0f}%", 100 * s.mean / ceiling) : "";
    fmt::print("| {} | {:.2f} MiB | {} | {} | {}{} | {:.2f} ± {:.2f} | {} |\n", model_name,
               (*model)->file().file_size() / 1048576.0, isa_name(*isa), o.threads, kind, n, s.mean,
               s.stddev, ceiling_text);
    if (!json_tests.empty()) json_tests += ", ";
    json_tests += fmt::format(
        "{{\"test\": \"{}{}\", \"tokens_per_second\": {:.3f}, \"stddev\": {:.3f}, "
        "\"samples\": [{:.3f}]}}",
        kind, n, s.mean, s.stddev, fmt::join(rates, ", "));
  };
  row("pp", o.prompt_tokens, pp_rates, 0);
  row("tg", o.gen_tokens, tg_rates, roofline);
  fmt::print(
      "{{\"model\": \"{}\", \"file_bytes\": {}, \"isa\": \"{}\", \"threads\": {}, "
      "\"bandwidth_bytes_per_second\": {:.0f}, \"weight_bytes_per_token\": {:.0f}, "
      "\"kv_bytes_per_token\": {:.0f}, "
      "\"decode_roofline_tokens_per_second\": {:.1f}, \"load_seconds\": {:.3f}, \"kv_groups\": {}, "
      "\"tests\": [{}]}}\n",
      model_name, (*model)->file().file_size(), isa_name(*isa), o.threads, bandwidth,
      bytes_per_token, kv_bytes, roofline, load_seconds, groups, json_tests);
  return 0;
}

}  // namespace

void register_bench(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Single-stream prefill (pp) and decode (tg) tokens/s, as llama-bench measures");
  cmd->add_option("-m,--model", options->model, "GGUF file (default: the cached default model)");
  cmd->add_option("-p,--n-prompt", options->prompt_tokens, "prompt tokens")
      ->capture_default_str()
      ->check(CLI::Range(0, 65536));
  cmd->add_option("-n,--n-gen", options->gen_tokens, "generated tokens")
      ->capture_default_str()
      ->check(CLI::Range(0, 65536));
  cmd->add_option("-r,--repetitions", options->repetitions, "measured repetitions")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("-t,--threads", options->threads, "compute threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("-d,--depth", options->depth,
                  "decode after this many cached positions (the K/V attention reads per token)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--kv-cache-dtype", options->kv_cache_dtype,
                  "element type of the KV cache: f16, bf16, f32, int8 or int4")
      ->capture_default_str();
  cmd->add_flag("--no-hybrid-kv", options->no_hybrid_kv,
                "keep every layer's K/V in one page (no KV groups), as drift serve --no-hybrid-kv");
  cmd->callback([options] {
    int code = run_bench(*options);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace drift::cli

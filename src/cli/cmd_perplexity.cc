// `drift perplexity -m MODEL -f FILE [-c CTX]`: perplexity computed exactly as llama.cpp's
// llama-perplexity does: the whole text is tokenized (with BOS if the model adds one), cut into
// chunks of CTX tokens, the first token of each chunk replaced by BOS when the model adds one,
// and only the second half of each chunk scored (each position predicting the next token).
//
// With --kv-keep R, each chunk runs in steps of --kv-compress-every tokens, and after each step the
// cache is compressed as KV-Compress does (executor/kv_compressor.h, policy --kv-evict), so that
// the scored tokens see only the entries a serving engine with that kv_keep would have kept.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "executor/kv_compressor.h"
#include "kv/kv_eviction.h"
#include "kv/kv_layout.h"
#include "model/forward_pass.h"
#include "model_locator.h"
#include "runtime/engine_options.h"
#include "runtime/load_engine.h"
#include "tokenizer/tokenizer.h"

namespace drift::cli {
namespace {

struct PerplexityOptions {
  std::optional<std::string> model;
  std::string file;
  int64_t context = 512;
  int threads = program_engine_defaults().threads;
  std::optional<int64_t> max_chunks;
  std::string kv_cache_dtype{kv_dtype_name(program_engine_defaults().kv.dtype)};
  std::optional<double> kv_keep;  // set: compress as it goes
  std::string kv_evict{kv_evict_policy_name(KvCompressConfig{}.policy)};
  int64_t kv_compress_min_tokens = KvCompressConfig{}.min_tokens;
  int64_t kv_compress_every = 64;
  KvCompressConfig kv;  // sinks, recent window, metric window and intervals
};

// What the scored tokens saw: the entries a head held against the positions before them.
struct KeptShare {
  double entries = 0.0;
  double positions = 0.0;
};

// -log softmax(logits)[target], with the log-sum-exp taken in double.
double negative_log_likelihood(const float* logits, int64_t n_vocab, int32_t target) {
  float max_logit = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  return -(static_cast<double>(logits[target] - max_logit) - std::log(sum));
}

// The summed negative log-likelihood of a window's second half: each token from position
// ctx / 2 + 1 on, predicted by the logits of the position before it ([ctx, n_vocab]).
double second_half_nll(const std::vector<float>& logits, const std::vector<int32_t>& window,
                       int64_t n_vocab) {
  const int64_t ctx = int64_t(window.size());
  double nll = 0.0;
  for (int64_t j = ctx / 2; j < ctx - 1; ++j)
    nll += negative_log_likelihood(&logits[j * n_vocab], n_vocab, window[j + 1]);
  return nll;
}

void print_result(double mean_nll, std::optional<KeptShare> kept) {
  fmt::print("perplexity: {:.4f}\n", std::exp(mean_nll));
  if (kept)
    fmt::print("kv kept: {:.4f} of the positions (longest head, scored steps)\n",
               kept->entries / kept->positions);
}

// KV-Compress's settings for the run (off unless --kv-keep), checked; prints them when on.
Expected<KvCompressConfig> compress_config(const PerplexityOptions& o, int64_t ctx) {
  KvCompressConfig compress;
  if (!o.kv_keep) return compress;
  std::optional<KvEvictPolicy> policy = parse_kv_evict_policy(o.kv_evict);
  if (!policy) return make_error("--kv-evict: expected attention or window");
  compress.keep = *o.kv_keep;
  compress.policy = *policy;
  compress.min_tokens = o.kv_compress_min_tokens;
  compress.sink_tokens = o.kv.sink_tokens;
  compress.recent_tokens = o.kv.recent_tokens;
  compress.metric_window = o.kv.metric_window;
  compress.metric_intervals = o.kv.metric_intervals;
  if (Status valid = compress.validate(); !valid.ok()) return valid.error();
  if (o.kv_compress_every < compress.metric_window || o.kv_compress_every > ctx)
    return make_error("--kv-compress-every must be {} to -c {}, got {}", compress.metric_window,
                      ctx, o.kv_compress_every);
  fmt::print(stderr, "KV-Compress: keep {}, policy {}, every {} tokens after {}\n", compress.keep,
             o.kv_evict, o.kv_compress_every, compress.min_tokens);
  return compress;
}

int run_perplexity(const PerplexityOptions& o) {
  auto fail = [](const Error& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    return 1;
  };
  auto path = resolve_model_path(o.model);
  if (!path.ok()) return fail(path.error());
  auto isa = select_isa(detect_cpu_features());
  if (!isa.ok()) return fail(isa.error());
  auto model = Model::load(*path, *isa);
  if (!model.ok()) return fail(model.error());
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  if (!tokenizer.ok()) return fail(tokenizer.error());
  std::ifstream in(o.file, std::ios::binary);
  if (!in) return fail(make_error("cannot read '{}'", o.file));
  std::string text((std::istreambuf_iterator<char>(in)), {});

  const ModelConfig& config = (*model)->config();
  const int64_t ctx = o.context;
  if (ctx < 16 || ctx > config.n_ctx_train)
    return fail(
        make_error("-c must be 16 to the model's context {}, got {}", config.n_ctx_train, ctx));
  std::vector<int32_t> tokens = tokenizer->encode(text);
  int64_t n_chunks = static_cast<int64_t>(tokens.size()) / ctx;
  if (o.max_chunks) n_chunks = std::min(n_chunks, *o.max_chunks);
  if (n_chunks < 1)
    return fail(
        make_error("the text has {} tokens, fewer than one chunk of {}", tokens.size(), ctx));
  fmt::print(stderr, "{} tokens, {} chunks of {}, {} threads, {} kernels, {} KV cache\n",
             tokens.size(), n_chunks, ctx, o.threads, isa_name(*isa), o.kv_cache_dtype);

  const int64_t page_size = program_engine_defaults().kv.page_size;
  const int64_t n_pages = (ctx + page_size - 1) / page_size;
  const std::optional<KVDtype> dtype = parse_kv_dtype(o.kv_cache_dtype);
  if (!dtype) return fail(make_error("--kv-cache-dtype: expected f16, bf16, f32, int8 or int4"));
  auto kv = KvPages::create(config, n_pages, page_size, kv_format_of(*dtype));
  if (!kv.ok()) return fail(kv.error());
  ForwardLimits limits{ctx, 1, ctx, o.threads};
  auto forward = ForwardPass::create(**model, limits);
  if (!forward.ok()) return fail(forward.error());
  ThreadPool pool(o.threads);
  std::vector<int32_t> pages(n_pages);
  for (int64_t i = 0; i < n_pages; ++i) pages[i] = static_cast<int32_t>(i);
  std::vector<float> logits(static_cast<size_t>(ctx) * config.n_vocab);
  const bool add_bos = tokenizer->add_bos() && tokenizer->bos().has_value();

  Expected<KvCompressConfig> compress = compress_config(o, ctx);
  if (!compress.ok()) return fail(compress.error());
  KvCompressor compressor(*compress);
  KvHeadTable heads(config.n_layers, config.n_kv_heads, ctx, compress->metric_intervals);
  KeptShare kept;

  double nll = 0.0;
  int64_t scored = 0;
  auto start = std::chrono::steady_clock::now();
  for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
    std::vector<int32_t> window(tokens.begin() + chunk * ctx, tokens.begin() + (chunk + 1) * ctx);
    if (add_bos) window[0] = *tokenizer->bos();
    if (!o.kv_keep) {
      // The whole window in one pass, every position's logits.
      ForwardSequence sequence{.n_tokens = ctx, .page_table = pages, .all_logits = true};
      ForwardBatch batch{window, std::span<const ForwardSequence>(&sequence, 1)};
      if (Status s = (*forward)->run(batch, *kv, pool, logits); !s.ok()) return fail(s.error());
    } else {
      // Steps of kv_compress_every tokens, the last metric_window of each adding to the metric,
      // the cache compressed after each.
      heads = KvHeadTable(config.n_layers, config.n_kv_heads, ctx, compress->metric_intervals);
      for (int64_t begin = 0; begin < ctx; begin += o.kv_compress_every) {
        ForwardSequence sequence;
        sequence.start_pos = begin;
        sequence.n_tokens = std::min(o.kv_compress_every, ctx - begin);
        sequence.page_table = pages;
        sequence.all_logits = true;
        sequence.heads = &heads;
        sequence.metric_tokens = std::min(compress->metric_window, sequence.n_tokens);
        ForwardBatch batch{std::span<const int32_t>(window).subspan(begin, sequence.n_tokens),
                           std::span<const ForwardSequence>(&sequence, 1)};
        Status status = (*forward)->run(batch, *kv, pool,
                                        std::span<float>(logits).subspan(begin * config.n_vocab));
        if (!status.ok()) return fail(status.error());
        if (begin + sequence.n_tokens > ctx / 2) {
          // Entries in use (the longest head's) against positions, per scored token of the step.
          const int64_t n = std::min(sequence.n_tokens, begin + sequence.n_tokens - ctx / 2);
          kept.entries += static_cast<double>(n) * heads.max_length();
          kept.positions += static_cast<double>(n) * (begin + sequence.n_tokens);
        }
        compressor.compress(begin + sequence.n_tokens, heads, *kv, pages);
      }
    }
    nll += second_half_nll(logits, window, config.n_vocab);
    scored += ctx - 1 - ctx / 2;  // the positions second_half_nll scores
    fmt::print("[{}]{:.4f},", chunk + 1, std::exp(nll / scored));
    std::fflush(stdout);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("\n");
  fmt::print(stderr, "{:.1f} s, {:.1f} tokens/s\n", seconds, n_chunks * ctx / seconds);
  print_result(nll / double(scored), o.kv_keep ? std::optional<KeptShare>(kept) : std::nullopt);
  return 0;
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto options = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity of a text file, computed as llama.cpp's llama-perplexity does");
  cmd->add_option("-m,--model", options->model, "GGUF file (default: the cached default model)");
  cmd->add_option("-f,--file", options->file, "text file")->required();
  cmd->add_option("-c,--ctx-size", options->context, "tokens per chunk")->capture_default_str();
  cmd->add_option("-t,--threads", options->threads, "compute threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--chunks", options->max_chunks, "score at most this many chunks");
  cmd->add_option("--kv-cache-dtype", options->kv_cache_dtype,
                  "element type of the KV cache: f16, bf16, f32, int8 or int4")
      ->capture_default_str();
  cmd->add_option("--kv-keep", options->kv_keep,
                  "compress the KV cache as it goes, each head keeping this fraction (0, 1] of "
                  "the positions (KV-Compress)");
  cmd->add_option("--kv-evict", options->kv_evict,
                  "which entries a head keeps: attention (most attended) or window (first and "
                  "most recent)")
      ->capture_default_str();
  cmd->add_option("--kv-compress-min-tokens", options->kv_compress_min_tokens,
                  "compress only once a sequence is longer than this")
      ->capture_default_str();
  cmd->add_option("--kv-compress-every", options->kv_compress_every,
                  "tokens run between two compressions")
      ->capture_default_str();
  cmd->add_option("--kv-sink-tokens", options->kv.sink_tokens, "first positions always kept")
      ->capture_default_str();
  cmd->add_option("--kv-recent-tokens", options->kv.recent_tokens, "last positions always kept")
      ->capture_default_str();
  cmd->add_option("--kv-metric-window", options->kv.metric_window,
                  "last tokens of each step whose squared attention the metric adds")
      ->capture_default_str();
  cmd->add_option("--kv-metric-intervals", options->kv.metric_intervals,
                  "steps between compressions whose attention the metric sums")
      ->capture_default_str();
  cmd->callback([options] {
    int code = run_perplexity(*options);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace drift::cli

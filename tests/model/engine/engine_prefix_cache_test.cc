// The prefix cache on SmolLM2 (and Gemma 3): greedy outputs are identical with the cache on and off
// — requests run one after another (each later one starts from the cached system prompt),
// concurrently with chunked prefill (pages shared while being filled), and under KV pressure with
// preemption.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "runtime/load_engine.h"
#include "test_models.h"

namespace drift {
namespace {

using Clock = std::chrono::steady_clock;

// A system prompt of about 150 tokens shared by every request, then a short question of its own.
std::vector<std::string> prompts() {
  const std::string system =
      "<|im_start|>system\nYou are a careful assistant for a public library. You answer "
      "questions about opening hours, borrowing rules, late fees, room bookings and the events "
      "calendar. Opening hours are nine to six on weekdays and ten to four on Saturdays; the "
      "library is closed on Sundays and public holidays. Members may borrow up to twelve items "
      "for three weeks and renew them twice unless another member has reserved them. Late fees "
      "are twenty cents per item per day, capped at five dollars. Study rooms can be booked for "
      "two hours a day. Answer in one or two sentences.<|im_end|>\n";
  const std::vector<std::string> questions = {
      "When do you open on Saturday?",      "How many books can I borrow?",
      "What is the late fee for a DVD?",    "Can I renew a reserved book?",
      "Are you open on Easter Sunday?",     "How long can I keep a study room?",
      "What is the maximum late fee?",      "Can my child get a membership card?",
      "Do you have printers for visitors?", "How do I book a room for tomorrow?",
  };
  std::vector<std::string> out;
  for (const std::string& q : questions)
    out.push_back(system + "<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n");
  return out;
}

struct Outputs {
  std::vector<std::vector<TokenId>> tokens;  // per prompt
  EngineMetrics metrics;
};

EngineConfig base_config(bool prefix_caching) {
  EngineConfig c;
  c.threads = 1;  // see engine_batching_test.cc: outputs do not depend on it
  c.max_model_len = 512;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{64} << 20);
  c.kv.enable_prefix_caching = prefix_caching;
  c.max_queued_requests = 64;
  return c;
}

Outputs run(const EngineConfig& config, bool concurrent, int32_t max_tokens, const char* what,
            std::string_view model_file = test::kSmolLm2File) {
  Outputs result;
  const auto path = test::model_path(model_file);
  EXPECT_TRUE(test::model_available(path));
  auto engine = load_engine(path.string(), config);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  if (!engine.ok()) return result;
  const auto start = Clock::now();
  std::vector<std::string> texts = prompts();
  std::vector<RequestHandle> handles;
  result.tokens.resize(texts.size());
  auto finish = [&](size_t i) {
    Expected<Completion> c = handles[i].wait();
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->finish.reason, FinishReason::kLength) << c->finish.message;
    result.tokens[i] = c->tokens;
  };
  for (size_t i = 0; i < texts.size(); ++i) {
    Request r;
    r.prompt = TextPrompt{texts[i], /*add_special=*/true, /*parse_special=*/true};
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    handles.push_back((*engine)->submit(std::move(r)));
    if (!concurrent) finish(i);
  }
  if (concurrent)
    for (size_t i = 0; i < texts.size(); ++i) finish(i);
  result.metrics = (*engine)->metrics();
  const PrefixCacheStats& p = result.metrics.prefix_cache;
  std::printf("%s: %.2f s, %llu steps, %llu preemptions, prefix cache %llu of %llu tokens hit\n",
              what, std::chrono::duration<double>(Clock::now() - start).count(),
              (unsigned long long)result.metrics.steps,
              (unsigned long long)result.metrics.preemptions, (unsigned long long)p.hit_tokens,
              (unsigned long long)p.queried_tokens);
  return result;
}

// The reference: every request alone, without the cache.
const Outputs& uncached() {
  static const Outputs r =
      run(base_config(false), /*concurrent=*/false, 16, "cache off, one by one");
  return r;
}

TEST(EnginePrefixCache, OneByOneTheSameTokensAsWithoutTheCache) {
  ASSERT_EQ(uncached().tokens.size(), 10u);
  EXPECT_EQ(uncached().metrics.prefix_cache.queries, 0u);
  Outputs cached = run(base_config(true), /*concurrent=*/false, 16, "cache on, one by one");
  EXPECT_EQ(cached.tokens, uncached().tokens);
  // Requests 2 to 10 find the system prompt (about 130 tokens: 8 pages of 16) cached.
  EXPECT_GE(cached.metrics.prefix_cache.hits, 9u);
  EXPECT_GE(cached.metrics.prefix_cache.hit_tokens, 9u * 112);
}

TEST(EnginePrefixCache, ConcurrentChunkedTheSameTokensAsWithoutTheCache) {
  EngineConfig c = base_config(true);
  c.scheduler.max_num_batched_tokens = 48;  // the system prompt takes several chunks
  c.scheduler.max_num_seqs = 10;
  c.scheduler.max_num_partial_prefills = 4;
  Outputs cached = run(c, /*concurrent=*/true, 16, "cache on, concurrent, chunks of 48");
  EXPECT_EQ(cached.tokens, uncached().tokens);
  EXPECT_GT(cached.metrics.prefix_cache.hit_tokens, 0u);
}

TEST(EnginePrefixCache, PreemptedUnderKvPressureTheSameTokensAsWithoutTheCache) {
  EngineConfig c = base_config(true);
  c.scheduler.admission = AdmissionMode::kOptimistic;
  c.scheduler.max_num_batched_tokens = 64;
  c.scheduler.max_num_seqs = 10;
  c.scheduler.max_num_partial_prefills = 4;
  c.kv.page_size = 16;
  // SmolLM2: 23040 bytes per token. 36 pages: the shared system prompt (9 pages) plus room for
  // about 5 sequences' own pages, so the 10 requests' decodes must preempt.
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{23040} * 16 * 36);
  Outputs cached = run(c, /*concurrent=*/true, 40, "cache on, optimistic, 36 pages");
  Outputs reference = run(base_config(false), /*concurrent=*/false, 40, "cache off, 40 tokens");
  EXPECT_EQ(cached.tokens, reference.tokens);
  EXPECT_GT(cached.metrics.preemptions, 0u) << "the cache is small enough that some must wait";
  EXPECT_GT(cached.metrics.prefix_cache.hit_tokens, 0u);
  EXPECT_GT(cached.metrics.prefix_cache.evictions, 0u);
}

// Gemma 3 (sliding-window layers, another tokenizer): the same equality, one by one and
// concurrently with chunked prefill.
TEST(EnginePrefixCache, Gemma3TheSameTokensAsWithoutTheCache) {
  Outputs reference =
      run(base_config(false), /*concurrent=*/false, 12, "gemma3 cache off", test::kGemma3File);
  ASSERT_EQ(reference.tokens.size(), 10u);
  Outputs one_by_one =
      run(base_config(true), /*concurrent=*/false, 12, "gemma3 cache on", test::kGemma3File);
  EXPECT_EQ(one_by_one.tokens, reference.tokens);
  EXPECT_GE(one_by_one.metrics.prefix_cache.hits, 9u);
  EngineConfig c = base_config(true);
  c.scheduler.max_num_batched_tokens = 48;
  c.scheduler.max_num_seqs = 10;
  c.scheduler.max_num_partial_prefills = 4;
  Outputs concurrent =
      run(c, /*concurrent=*/true, 12, "gemma3 cache on, chunks of 48", test::kGemma3File);
  EXPECT_EQ(concurrent.tokens, reference.tokens);
}

}  // namespace
}  // namespace drift

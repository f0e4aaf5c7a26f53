// The engine on SmolLM2: greedy outputs do not depend on what else runs. Each request's tokens
// are the same alone (its prompt prefilled in one step) as among 16 concurrent requests whose
// prompts are chunked into 64-token steps; and under KV pressure, guaranteed admission (which
// queues) and optimistic admission (which preempts and recomputes) give those same tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "runtime/load_engine.h"
#include "test_models.h"
#include "tokenizer/tokenizer.h"

namespace drift {
namespace {

using Clock = std::chrono::steady_clock;

// 16 prompts of about 4 to 60 tokens, each different from its first words.
std::vector<std::string> prompts() {
  const std::vector<std::string> sentences = {
      "The committee met on Tuesday to discuss the new library budget.",
      "A small boat drifted slowly across the quiet harbour at dawn.",
      "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
      "She tuned the old piano before the evening concert began.",
      "In 1969, two astronauts walked on the surface of the Moon.",
      "The recipe calls for three eggs, a cup of flour and some butter.",
      "Rivers carve valleys over millions of years of steady erosion.",
      "Our train was delayed by forty minutes because of the snow.",
  };
  const std::vector<std::string> openings = {
      "Summarize:",         "Continue the story:",      "Explain simply:", "Translate to French:",
      "Write a poem about", "List three facts about",   "Question:",       "Once upon a time,",
      "Dear diary,",        "Breaking news:",           "Step 1:",         "Fun fact:",
      "def fibonacci(n):",  "The capital of France is", "1, 2, 3, 5, 8,",  "Hello! My name is"};
  std::vector<std::string> out;
  for (size_t i = 0; i < openings.size(); ++i) {
    std::string text = openings[i];
    const size_t n = (i * 3) % 5;  // 0 to 4 sentences
    for (size_t k = 0; k < n; ++k) text += " " + sentences[(i + k) % sentences.size()];
    out.push_back(text);
  }
  return out;
}

struct Job {
  Request request;
  size_t prompt_index = 0;
  int32_t prompt_tokens = 0;    // output: the prompt's length once tokenized
  std::vector<TokenId> tokens;  // output
};

// `count` greedy requests with ids 1..count over the prompts in turn (a prompt may repeat under
// another id), each generating `max_tokens(i)` tokens — never stopping early at EOS.
template <typename MaxTokens>
std::vector<Job> make_jobs(size_t count, MaxTokens max_tokens) {
  std::vector<Job> jobs;
  std::vector<std::string> texts = prompts();
  for (size_t i = 0; i < count; ++i) {
    Job job;
    job.prompt_index = i % texts.size();
    job.request.id = i + 1;
    job.request.prompt =
        TextPrompt{texts[job.prompt_index], /*add_special=*/true, /*parse_special=*/false};
    job.request.max_tokens = max_tokens(i);
    job.request.sampling.temperature = 0;    // greedy
    job.request.sampling.ignore_eos = true;  // every request runs its full length
    jobs.push_back(std::move(job));
  }
  return jobs;
}

// 24 to 32 generated tokens per request.
int32_t long_outputs(size_t i) { return 24 + int32_t(i % 9); }

EngineConfig base_config() {
  EngineConfig c;
  // One compute thread: on a busy 2-core machine a second one that is descheduled makes every
  // parallel region wait for it (steps measured 25x slower), and outputs do not depend on it.
  c.threads = 1;
  c.max_model_len = 512;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{64} << 20);
  c.max_queued_requests = 64;
  return c;
}

std::unique_ptr<Engine> load_engine(const EngineConfig& config) {
  const auto path = test::model_path(test::kSmolLm2File);
  EXPECT_TRUE(test::model_available(path));
  auto engine = load_engine(path.string(), config);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  return engine.ok() ? std::move(engine).value() : nullptr;
}

// Runs every job to its end, one at a time or all submitted at once; prints what it took.
EngineMetrics run(Engine& engine, std::vector<Job>& jobs, bool concurrent, const char* what) {
  const auto start = Clock::now();
  std::vector<RequestHandle> handles;
  auto finish = [&](RequestHandle& h, Job& job) {
    Expected<Completion> c = h.wait();
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->finish.reason, FinishReason::kLength)
        << "request " << job.request.id.value() << ": " << c->finish.message;
    job.tokens = c->tokens;
    job.prompt_tokens = c->finish.usage.prompt_tokens;
  };
  for (Job& job : jobs) {
    handles.push_back(engine.submit(job.request));
    if (!concurrent) finish(handles.back(), job);
  }
  if (concurrent)
    for (size_t i = 0; i < jobs.size(); ++i) finish(handles[i], jobs[i]);
  EngineMetrics m = engine.metrics();
  std::printf(
      "%s: %zu requests, %llu prompt + %llu generated tokens, %llu steps, %llu "
      "preemptions, %.2f s\n",
      what, jobs.size(), (unsigned long long)m.prompt_tokens_total,
      (unsigned long long)m.generation_tokens_total, (unsigned long long)m.steps,
      (unsigned long long)m.preemptions,
      std::chrono::duration<double>(Clock::now() - start).count());
  return m;
}

// Every prompt run alone — its whole prompt prefilled in one step, nothing else in the engine —
// once for the whole suite: the reference outputs.
const std::vector<Job>& solo_outputs() {
  static const std::vector<Job> solo = [] {
    std::vector<Job> jobs = make_jobs(prompts().size(), long_outputs);
    EngineConfig c = base_config();
    c.scheduler.max_num_batched_tokens = 512;
    c.scheduler.max_num_seqs = 1;
    c.scheduler.enable_chunked_prefill = false;
    std::unique_ptr<Engine> engine = load_engine(c);
    if (engine) run(*engine, jobs, /*concurrent=*/false, "solo");
    return jobs;
  }();
  return solo;
}

// Each job's tokens are the first tokens of its prompt's solo output.
void expect_solo_tokens(const std::vector<Job>& jobs) {
  const std::vector<Job>& solo = solo_outputs();
  for (const Job& job : jobs) {
    const std::vector<TokenId>& ref = solo[job.prompt_index].tokens;
    const size_t n = size_t(*job.request.max_tokens);
    ASSERT_LE(n, ref.size());
    EXPECT_EQ(job.tokens, std::vector<TokenId>(ref.begin(), ref.begin() + ptrdiff_t(n)))
        << "request " << job.request.id.value() << " (prompt " << job.prompt_index << ")";
  }
}

TEST(EngineBatching, SixteenConcurrentChunkedRequestsMatchTheirSoloRuns) {
  ASSERT_EQ(solo_outputs().size(), 16u);
  std::vector<Job> jobs = make_jobs(16, long_outputs);
  EngineConfig c = base_config();
  c.scheduler.max_num_batched_tokens = 64;  // prompts are split into chunks
  c.scheduler.max_num_seqs = 16;
  c.scheduler.max_num_partial_prefills = 4;
  std::unique_ptr<Engine> engine = load_engine(c);
  ASSERT_TRUE(engine);
  EngineMetrics m = run(*engine, jobs, /*concurrent=*/true, "16 concurrent, chunks of 64");
  expect_solo_tokens(jobs);
  EXPECT_GT(m.prompt_tokens_total, 64u * 4) << "prompts must need several chunks in all";
  EXPECT_LT(m.steps, m.generation_tokens_total / 4) << "steps must carry many sequences";
  EXPECT_EQ(m.kv_pages_used, 0);
}

// 24 requests over the 16 prompts, 20 to 22 tokens each (within every solo run's 24 or more),
// with KV for the 4 largest at once.
// Long enough that every request is still running when the last is submitted, however slowly
// the test thread gets the CPU (with 10 to 12 tokens each, a loaded machine once let the optimistic
// run finish without a preemption).
EngineConfig pressure_config(AdmissionMode mode, const std::vector<Job>& jobs) {
  EngineConfig c = base_config();
  c.scheduler.admission = mode;
  c.scheduler.max_num_batched_tokens = 64;
  c.scheduler.max_num_seqs = 16;
  c.scheduler.max_num_partial_prefills = 4;
  c.kv.page_size = 16;
  const std::vector<Job>& solo = solo_outputs();
  std::vector<int64_t> pages;
  for (const Job& job : jobs)
    pages.push_back((solo[job.prompt_index].prompt_tokens + *job.request.max_tokens + 15) / 16);
  std::sort(pages.rbegin(), pages.rend());
  // SmolLM2: 30 layers x 3 KV heads x 64 dims x (K, V) x 2 bytes = 23040 bytes per token.
  constexpr uint64_t kBytesPerPage = 23040 * 16;
  c.kv.budget =
      KVMemoryBudget::of_bytes(uint64_t(pages[0] + pages[1] + pages[2] + pages[3]) * kBytesPerPage);
  return c;
}

TEST(EngineKvPressure, GuaranteedAndOptimisticAdmissionGiveTheSoloOutputs) {
  for (AdmissionMode mode : {AdmissionMode::kGuaranteed, AdmissionMode::kOptimistic}) {
    const std::string name(admission_mode_name(mode));
    SCOPED_TRACE(name);
    std::vector<Job> jobs = make_jobs(24, [](size_t i) { return 20 + int32_t(i % 3); });
    std::unique_ptr<Engine> engine = load_engine(pressure_config(mode, jobs));
    ASSERT_TRUE(engine);
    ASSERT_EQ(engine->setup().kv_layout.bytes_per_page(), 23040u * 16);
    EngineMetrics m = run(*engine, jobs, /*concurrent=*/true, name.c_str());
    expect_solo_tokens(jobs);
    EXPECT_EQ(m.finished(FinishReason::kLength), 24u);
    EXPECT_EQ(m.kv_pages_used, 0);
    if (mode == AdmissionMode::kGuaranteed) {
      EXPECT_EQ(m.preemptions, 0u);
    } else {
      EXPECT_GT(m.preemptions, 0u) << "the cache is small enough that some must be preempted";
    }
  }
}

TEST(EngineText, StreamedTextIsTheTokenizersDecode) {
  const auto path = test::model_path(test::kSmolLm2File);
  ASSERT_TRUE(test::model_available(path));
  auto file = GgufFile::open(path.string());
  ASSERT_TRUE(file.ok());
  auto tokenizer = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tokenizer.ok());
  EngineConfig c = base_config();
  std::unique_ptr<Engine> engine = load_engine(c);
  ASSERT_TRUE(engine);
  Request r;
  r.prompt = TextPrompt{
      "<|im_start|>user\nWrite one sentence about the sea.<|im_end|>\n"
      "<|im_start|>assistant\n",
      /*add_special=*/true, /*parse_special=*/true};
  r.max_tokens = 40;
  r.sampling.temperature = 0;
  RequestHandle h = engine->submit(r);
  Expected<Completion> done = h.wait();
  ASSERT_TRUE(done.ok());
  std::vector<TokenId> shown = done->tokens;
  if (done->finish.reason == FinishReason::kStop) shown.pop_back();  // the stop token shows no text
  Expected<std::string> decoded = tokenizer->decode(shown);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(done->text, *decoded);
  EXPECT_FALSE(done->text.empty());
  EXPECT_EQ(done->finish.usage.prompt_tokens,
            int32_t(tokenizer->encode(std::get<TextPrompt>(r.prompt).text).size()));
  std::printf("reply: %s\n", done->text.c_str());
}

}  // namespace
}  // namespace drift

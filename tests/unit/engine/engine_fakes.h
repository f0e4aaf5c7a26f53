// Model-free stand-ins for the engine's executor and tokenizer, and helpers to build an engine
// over them.
//
// FakeModel: the next token is a hash of (sequence id, every token so far), so a request's output
// depends only on its own history — the same alone, batched, chunked or preempted.
// FakeExecutor: samples from the FakeModel for every item that asks, and lets a test inject
// faults or pauses through hooks that run on the engine's worker thread.
// FakeCodec: a byte-level text codec whose pieces include halves of multi-byte characters, so
// that text deltas must hold bytes back and repair ones that never complete.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "util/utf8.h"

namespace drift::testing {

inline constexpr TokenId kEos = 0;
inline constexpr TokenId kBos = 1;
inline constexpr int32_t kVocab = 1000;

struct FakeModel {
  // About one sampled token in eos_one_in is EOS; nullopt: never.
  std::optional<uint32_t> eos_one_in;

  TokenId next_token(SeqId seq, std::span<const TokenId> history) const {
    uint64_t h = 1469598103934665603ull ^ (seq * 0x9E3779B97F4A7C15ull);
    for (TokenId t : history) h = (h ^ uint64_t(uint32_t(t))) * 1099511628211ull;
    h ^= h >> 29;
    if (eos_one_in && h % *eos_one_in == 0) return kEos;
    return 2 + TokenId(h % uint64_t(kVocab - 2));
  }

  // What `seq` generates alone: EOS (unless ignored) and stop tokens end it, as does the limit.
  std::vector<TokenId> reference(SeqId seq, std::vector<TokenId> history, int32_t max_new_tokens,
                                 const SamplingSettings& sampling = {}) const {
    std::vector<TokenId> out;
    while (int32_t(out.size()) < max_new_tokens) {
      TokenId t = next_token(seq, history);
      out.push_back(t);
      history.push_back(t);
      const auto& stops = sampling.stop_token_ids;
      if ((!sampling.ignore_eos && t == kEos) ||
          std::find(stops.begin(), stops.end(), t) != stops.end())
        break;
    }
    return out;
  }
};

// Runs on the worker thread inside Executor::run.
struct FakeHooks {
  // First thing in every step; may block (to pause the engine) or throw.
  std::function<void(const StepPlan&)> before_step;
  // After the results are filled; may add item errors; its Status is the step's.
  std::function<Status(const StepPlan&, ExecutionResult&)> after_step;
};

// Its KV pages are plain bytes (kFakePageBytes a page) that no step reads or writes, so a disk
// tier can copy them out and back (the scheduler's fake checks their contents).
class FakeExecutor final : public Executor, public KVPageMemory {
 public:
  static constexpr uint64_t kFakePageBytes = 64;
  FakeExecutor(const EngineSetup& setup, FakeModel model, FakeHooks hooks)
      : setup_(setup),
        model_(model),
        hooks_(std::move(hooks)),
        page_memory_(size_t(setup.num_kv_pages) * kFakePageBytes) {}

  KVPageMemory* page_memory() override { return this; }
  uint64_t page_bytes() const override { return kFakePageBytes; }
  std::span<uint8_t> page(PageId page) override {
    return std::span<uint8_t>(page_memory_).subspan(size_t(page) * kFakePageBytes, kFakePageBytes);
  }

  Status run(const StepPlan& plan, ExecutionResult& result) override {
    ++steps_;
    if (hooks_.before_step) hooks_.before_step(plan);
    // What a real executor relies on.
    EXPECT_LE(plan.num_tokens(), setup_.scheduler.max_num_batched_tokens);
    EXPECT_LE(int32_t(plan.items.size()), setup_.scheduler.max_num_seqs);
    for (PageId page : plan.block_table) EXPECT_LT(page, setup_.num_kv_pages);
    result.reset(plan.items.size());
    for (size_t i = 0; i < plan.items.size(); ++i) {
      const StepItem& item = plan.items[i];
      if (item.sample && item.num_drafts > 0) {
        verify_drafts(plan, item, result.items[i]);
      } else if (item.sample) {
        result.items[i].token =
            model_.next_token(item.seq_id, item.history.first(size_t(item.context_len())));
      }
      if (item.pooling != PoolingMode::kNone) {
        // The fake pooling: element j sums (j + 1) * token over the prompt (fake_embedding).
        if (item.start_position == 0) std::fill(item.embedding.begin(), item.embedding.end(), 0.0f);
        for (int32_t p = item.start_position; p < item.context_len(); ++p)
          for (size_t j = 0; j < item.embedding.size(); ++j)
            item.embedding[j] += float(j + 1) * float(item.history[size_t(p)]);
        result.items[i].embedded = item.completes_embedding();
      }
    }
    return hooks_.after_step ? hooks_.after_step(plan, result) : Status::Ok();
  }

  bool healthy() const override { return healthy_.load(); }
  void set_healthy(bool healthy) { healthy_.store(healthy); }
  uint64_t steps() const { return steps_.load(); }

  // Speculative decoding: the drafts the fake model agrees with, one position at a time, then
  // the token after them.
  void verify_drafts(const StepPlan& plan, const StepItem& item, ItemResult& r) const {
    const size_t committed = size_t(item.context_len() - item.num_drafts);
    std::vector<TokenId> history(item.history.begin(), item.history.begin() + committed);
    std::span<const TokenId> drafts = plan.tokens(item).last(size_t(item.num_drafts));
    for (int32_t j = 0;; ++j) {
      const TokenId t = model_.next_token(item.seq_id, history);
      if (j < item.num_drafts && t == drafts[size_t(j)]) {
        history.push_back(t);
        continue;
      }
      r.token = t;
      r.accepted_drafts = j;
      return;
    }
  }

 private:
  EngineSetup setup_;
  FakeModel model_;
  FakeHooks hooks_;
  std::atomic<bool> healthy_{true};
  std::atomic<uint64_t> steps_{0};
  std::vector<uint8_t> page_memory_;  // [num_kv_pages][kFakePageBytes]
};

// Token t's text. Halves of "€" (E2 82 | AC) and of an emoji (F0 9F | 98 80) make some deltas
// hold bytes back, and some never complete (they become U+FFFD).
inline std::string fake_piece(TokenId t) {
  if (t == kEos || t == kBos) return "";
  switch (t % 16) {
    case 3:
      return "\xE2\x82";
    case 4:
      return "\xAC";
    case 5:
      return "\xC3\xA9";  // é
    case 6:
      return "\xF0\x9F";
    case 7:
      return "\x98\x80";
    default:
      return " w" + std::to_string(t);
  }
}

// What the engine's text deltas of `generated` must concatenate to: the pieces of every token but
// a final stop token, made valid UTF-8.
inline std::string expected_text(std::span<const TokenId> generated, bool last_is_stop) {
  std::string bytes;
  size_t n = generated.size() - (last_is_stop && !generated.empty() ? 1 : 0);
  for (size_t i = 0; i < n; ++i) bytes += fake_piece(generated[i]);
  return repair_utf8(bytes);
}

class FakeTextStream final : public TokenTextStream {
 public:
  Expected<std::string> push(TokenId token) override {
    if (token < 0 || token >= kVocab) return make_error("token {} is not in the vocabulary", token);
    held_ += fake_piece(token);
    // Hold back a trailing lead byte that announces more bytes than have arrived.
    size_t keep = held_.size();
    for (size_t back = 1; back <= 3 && back <= held_.size(); ++back) {
      uint8_t b = uint8_t(held_[held_.size() - back]);
      if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
      size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
      if (need > back) keep = held_.size() - back;
      break;
    }
    std::string out = held_.substr(0, keep);
    held_.erase(0, keep);
    return out;
  }
  std::string finish() override { return std::exchange(held_, {}); }

 private:
  std::string held_;
};

// Text to tokens: BOS (with add_special), then one token per byte. A conversation renders as
// "role: content\n" per message, then "assistant: ", after one BOS; a message without a role is
// the template's error.
class FakeCodec final : public TextCodec {
 public:
  std::vector<TokenId> encode(const TextPrompt& prompt) const override {
    std::vector<TokenId> ids;
    if (prompt.add_special) ids.push_back(kBos);
    for (char c : prompt.text) ids.push_back(2 + TokenId(uint8_t(c)));
    return ids;
  }
  Expected<std::vector<TokenId>> encode_chat(const ChatPrompt& chat) const override {
    std::string text;
    if (chat.tools) text += "tools: " + chat.tools->dump() + "\n";
    for (const ChatMessage& m : chat.messages) {
      if (m.role.empty()) return make_error("the fake template needs every message's role");
      text += m.role + ": " + m.content + "\n";
    }
    return encode(TextPrompt{text + "assistant: ", /*add_special=*/true});
  }
  ToolCallSyntax tool_call_syntax() const override { return ToolCallSyntax::kHermes; }
  Expected<std::string> decode(std::span<const TokenId> tokens,
                               bool render_special) const override {
    std::string text;
    for (TokenId t : tokens)
      text += render_special && t == kBos   ? "<s>"
              : render_special && t == kEos ? "</s>"
                                            : fake_piece(t);
    return text;
  }
  Expected<std::string> token_text(TokenId token) const override {
    return token == kBos ? "<s>" : token == kEos ? "</s>" : fake_piece(token);
  }
  std::unique_ptr<TokenTextStream> start_stream() const override {
    return std::make_unique<FakeTextStream>();
  }
};

// What FakeExecutor pools for `prompt`: kFakeEmbeddingSize floats.
inline constexpr int32_t kFakeEmbeddingSize = 4;
inline std::vector<float> fake_embedding(std::span<const TokenId> prompt) {
  std::vector<float> out(kFakeEmbeddingSize, 0.0f);
  for (TokenId t : prompt)
    for (size_t j = 0; j < out.size(); ++j) out[j] += float(j + 1) * float(t);
  return out;
}

inline ModelFacts fake_model_facts() {
  ModelFacts facts;
  facts.embedding_size = kFakeEmbeddingSize;
  facts.eog_token_ids = {kEos};
  facts.n_ctx_train = 256;
  facts.vocab_size = kVocab;
  facts.num_layers = 2;
  facts.num_kv_heads = 2;
  facts.head_dim = 8;
  return facts;
}

// 2 layers x 2 heads x 8 dims x K,V x 2 bytes = 128 bytes per token.
inline constexpr uint64_t kFakeBytesPerToken = 128;

// A small engine: pages of 4 tokens, `kv_pages` of them, small step budgets.
inline EngineConfig small_config(int32_t kv_pages = 64) {
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = 32;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.max_num_partial_prefills = 2;
  c.kv.page_size = 4;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t(kv_pages) * 4 * kFakeBytesPerToken);
  c.max_model_len = 128;
  c.default_max_tokens = 16;
  c.max_queued_requests = 64;
  return c;
}

struct FakeEngine {
  std::unique_ptr<Engine> engine;
  FakeExecutor* executor = nullptr;  // owned by the engine
};

inline FakeEngine make_fake_engine(const EngineConfig& config, FakeModel model = {},
                                   FakeHooks hooks = {},
                                   std::shared_ptr<const TextCodec> codec = nullptr) {
  FakeEngine out;
  auto factory = [&](const EngineSetup& setup) -> Expected<std::unique_ptr<Executor>> {
    auto executor = std::make_unique<FakeExecutor>(setup, model, std::move(hooks));
    out.executor = executor.get();
    return std::unique_ptr<Executor>(std::move(executor));
  };
  if (!codec) codec = std::make_shared<FakeCodec>();
  auto engine = Engine::create(config, fake_model_facts(), std::move(codec), factory);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  if (engine.ok()) out.engine = std::move(engine).value();
  return out;
}

// A prompt of `len` tokens that differs per id.
inline std::vector<TokenId> fake_prompt(RequestId id, int32_t len) {
  std::vector<TokenId> p(static_cast<size_t>(len));
  for (int32_t i = 0; i < len; ++i) p[size_t(i)] = 2 + TokenId((id * 31 + uint64_t(i) * 7) % 997);
  return p;
}

inline Request token_request(RequestId id, int32_t prompt_len, int32_t max_tokens) {
  Request r;
  r.id = id;
  r.prompt = fake_prompt(id, prompt_len);
  r.max_tokens = max_tokens;
  return r;
}

// Pauses the engine inside the executor at the first step that matches, until opened.
class StepGate {
 public:
  explicit StepGate(std::function<bool(const StepPlan&)> match) : match_(std::move(match)) {}

  void on_step(const StepPlan& plan) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (used_ || !match_(plan)) return;
    used_ = paused_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
    paused_ = false;
  }
  bool wait_paused(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return paused_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::function<bool(const StepPlan&)> match_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool used_ = false, paused_ = false, open_ = false;
};

// Hooks that pause at the gate.
inline FakeHooks pause_hooks(StepGate& gate) {
  FakeHooks hooks;
  hooks.before_step = [&gate](const StepPlan& plan) { gate.on_step(plan); };
  return hooks;
}

inline bool plan_has(const StepPlan& plan, SeqId seq, std::optional<StepItemKind> kind = {},
                     int32_t min_start = 0) {
  for (const StepItem& item : plan.items)
    if (item.seq_id == seq && (!kind || item.kind == *kind) && item.start_position >= min_start)
      return true;
  return false;
}

// Collects a handle's remaining events, failing the test if it takes longer than `timeout`.
inline Completion finish_within(RequestHandle& h,
                                std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  Completion c;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = deadline - std::chrono::steady_clock::now();
    std::optional<TokenEvent> e = h.next_for(std::max(left, decltype(left)::zero()));
    if (!e) {
      ADD_FAILURE() << "request " << h.id() << " did not finish in time";
      return c;
    }
    if (e->token) c.tokens.push_back(*e->token);
    c.text += e->text;
    if (!e->embedding.empty()) c.embedding = std::move(e->embedding);
    if (e->finish) {
      c.finish = *e->finish;
      return c;
    }
  }
}

// Polls the engine's metrics until `done` holds (or fails after `timeout`).
template <typename Pred>
EngineMetrics metrics_when(const Engine& engine, Pred done,
                           std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  EngineMetrics m = engine.metrics();
  while (!done(m) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    m = engine.metrics();
  }
  EXPECT_TRUE(done(m)) << "metrics never reached the expected state";
  return m;
}

// Nothing queued or running and no page held (pages may stay cached for the prefix cache).
inline bool idle(const EngineMetrics& m) {
  return m.num_running == 0 && m.num_waiting == 0 && m.kv_pages_used == 0 &&
         m.kv_pages_free + m.kv_pages_cached == m.kv_pages_total;
}

inline std::string describe(const EngineMetrics& m) {
  std::ostringstream os;
  os << "{running " << m.num_running << ", waiting " << m.num_waiting << ", kv pages "
     << m.kv_pages_used << " used " << m.kv_pages_free << " free " << m.kv_pages_cached
     << " cached of " << m.kv_pages_total << ", steps " << m.steps << ", finished "
     << m.finished_total() << "}";
  return os.str();
}

}  // namespace drift::testing

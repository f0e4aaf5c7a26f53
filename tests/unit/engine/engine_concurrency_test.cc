// Many threads submit, read, cancel and drop requests at once, in both admission modes. Every
// request the test watches gets exactly one finish event; one that was not cancelled produces
// exactly its solo output (tokens and text); a cancelled one a prefix of it; at the end nothing
// runs or waits and every KV page is free.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "engine/engine.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;
using std::chrono::milliseconds;

enum class Action { kRead, kCancelAtOnce, kCancelAfterEvents, kDrop, kCallback };

struct Record {
  RequestId id = 0;
  Action action = Action::kRead;
  std::vector<TokenId> want;
  bool want_stop = false;
  // What the events carried (under `mutex` for callback delivery).
  std::mutex mutex;
  std::vector<TokenId> tokens;
  std::string text;
  int finishes = 0;
  int events_after_finish = 0;
  std::optional<Finish> finish;
  bool utf8_ok = true;

  void take(TokenEvent e) {
    std::lock_guard<std::mutex> lock(mutex);
    utf8_ok &= valid_utf8_prefix_length(e.text) == e.text.size();
    if (e.token) tokens.push_back(*e.token);
    text += e.text;
    if (e.finish) {
      ++finishes;
      finish = std::move(e.finish);
    }
  }
};

class EngineConcurrency : public ::testing::TestWithParam<AdmissionMode> {};

TEST_P(EngineConcurrency, ManyThreadsSubmitCancelAndDrop) {
  constexpr int kThreads = 6;
  constexpr int kPerThread = 30;
  EngineConfig config = small_config(/*kv_pages=*/24);  // room for 1-6 requests at once
  config.scheduler.admission = GetParam();
  config.scheduler.max_num_seqs = 6;
  config.scheduler.max_num_batched_tokens = 24;
  config.max_queued_requests = kThreads * kPerThread;
  FakeModel model{.eos_one_in = 40};
  FakeEngine fake = make_fake_engine(config, model);
  Engine& engine = *fake.engine;

  std::vector<std::unique_ptr<Record>> records;
  for (int i = 0; i < kThreads * kPerThread; ++i) records.push_back(std::make_unique<Record>());
  // Callback requests keep their handles here (each thread writes its own slots), so that they
  // are not cancelled by a destroyed handle.
  std::vector<RequestHandle> callback_handles(records.size());
  auto client = [&](int thread) {
    std::mt19937 rng(1234 + thread);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    for (int i = 0; i < kPerThread; ++i) {
      Record& rec = *records[size_t(thread * kPerThread + i)];
      rec.id = RequestId(thread * 1000 + i + 1);
      Request r = token_request(rec.id, uniform(1, 40), uniform(1, 24));
      const std::vector<TokenId>& prompt = std::get<std::vector<TokenId>>(r.prompt);
      if (uniform(0, 3) == 0) {  // a stop token of its own, somewhere in its free run
        std::vector<TokenId> run = model.reference(rec.id, prompt, *r.max_tokens);
        r.sampling.stop_token_ids = {run[size_t(uniform(0, int(run.size()) - 1))]};
      }
      r.sampling.ignore_eos = uniform(0, 4) == 0;
      rec.want = model.reference(rec.id, prompt, *r.max_tokens, r.sampling);
      const auto& stops = r.sampling.stop_token_ids;
      rec.want_stop = (!r.sampling.ignore_eos && rec.want.back() == kEos) ||
                      std::find(stops.begin(), stops.end(), rec.want.back()) != stops.end();
      rec.action = Action(uniform(0, 4));

      if (rec.action == Action::kCallback) {
        // The handle lives on in `callback_handles` so that the request is not cancelled.
        callback_handles[size_t(thread * kPerThread + i)] =
            engine.submit(r, [&rec](TokenEvent e) { rec.take(std::move(e)); });
        continue;
      }
      RequestHandle h = engine.submit(r);
      if (rec.action == Action::kDrop) continue;  // destroyed here: cancels
      if (rec.action == Action::kCancelAtOnce) h.cancel();
      const int cancel_after = rec.action == Action::kCancelAfterEvents ? uniform(1, 6) : -1;
      int events = 0;
      while (std::optional<TokenEvent> e = h.next_for(std::chrono::seconds(30))) {
        rec.take(std::move(*e));
        if (++events == cancel_after) h.cancel();
        if (rec.finish) break;
      }
      if (h.next_for(milliseconds(0))) ++rec.events_after_finish;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(client, t);
  for (std::thread& t : threads) t.join();

  EngineMetrics m = metrics_when(
      engine, [&](const EngineMetrics& m) { return m.finished_total() == records.size(); });
  EXPECT_TRUE(idle(m)) << describe(m);
  EXPECT_EQ(m.kv_pages_used, 0);
  EXPECT_EQ(m.finished(FinishReason::kRejected), 0u);
  EXPECT_EQ(m.finished(FinishReason::kError), 0u);
  if (GetParam() == AdmissionMode::kGuaranteed) {
    EXPECT_EQ(m.preemptions, 0u);
  }
  engine.shutdown(ShutdownMode::kDrain);

  int cancelled = 0, completed = 0;
  for (const auto& owned : records) {
    Record& rec = *owned;
    if (rec.action == Action::kDrop) continue;
    SCOPED_TRACE(::testing::Message() << "request " << rec.id << " action " << int(rec.action));
    ASSERT_EQ(rec.finishes, 1);
    EXPECT_EQ(rec.events_after_finish, 0);
    EXPECT_TRUE(rec.utf8_ok);
    const bool may_cancel =
        rec.action == Action::kCancelAtOnce || rec.action == Action::kCancelAfterEvents;
    if (rec.finish->reason == FinishReason::kCancelled) {
      EXPECT_TRUE(may_cancel);
      EXPECT_LE(rec.tokens.size(), rec.want.size());
      EXPECT_TRUE(std::equal(rec.tokens.begin(), rec.tokens.end(), rec.want.begin()));
      EXPECT_EQ(rec.text, expected_text(rec.tokens, false));
      ++cancelled;
    } else {
      EXPECT_EQ(rec.tokens, rec.want);
      EXPECT_EQ(rec.finish->reason, rec.want_stop ? FinishReason::kStop : FinishReason::kLength);
      EXPECT_EQ(rec.text, expected_text(rec.want, rec.want_stop));
      EXPECT_EQ(rec.finish->usage.completion_tokens, int32_t(rec.want.size()));
      ++completed;
    }
  }
  EXPECT_GT(cancelled, 10);
  EXPECT_GT(completed, 50);
  // Whether optimistic mode preempts here depends on thread timing; the scheduler's tests and
  // the model tests pin preemption itself.
}

INSTANTIATE_TEST_SUITE_P(Modes, EngineConcurrency,
                         ::testing::Values(AdmissionMode::kGuaranteed, AdmissionMode::kOptimistic),
                         [](const auto& info) {
                           return std::string(admission_mode_name(info.param));
                         });

}  // namespace
}  // namespace drift

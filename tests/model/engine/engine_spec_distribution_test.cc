// Speculative sampling keeps the model's output distribution (issue 31): on SmolLM2, many
// sampled requests with n-gram drafts (seeds of their own) and as many without (other seeds)
// give the same distribution of their first tokens by a two-sample chi-square test, while drafts
// were both accepted and rejected. The same test tells apart a run at a lower temperature, so it
// has the power to notice a verifier that skews the distribution. (Each seed also gives the
// same tokens with and without drafts: engine_spec_decode_test.cc; this test does not rely on it.)
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "runtime/load_engine.h"
#include "test_models.h"

namespace drift {
namespace {

constexpr int kRequests = 300;
constexpr int32_t kTokens = 4;
// Its continuation copies earlier text, so n-gram drafts are proposed from the second token on.
constexpr const char* kPrompt =
    "The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat";

struct Outcomes {
  std::map<std::vector<TokenId>, int> counts;  // the first kTokens tokens -> requests
  EngineMetrics metrics;
};

Outcomes sample(SpecMode mode, float temperature, uint64_t first_seed) {
  Outcomes result;
  const auto path = test::model_path(test::kSmolLm2File);
  EXPECT_TRUE(test::model_available(path));
  EngineConfig c;
  c.threads = 2;
  c.max_model_len = 128;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{64} << 20);
  c.scheduler.max_num_batched_tokens = 512;
  c.scheduler.max_num_seqs = 32;
  c.max_queued_requests = kRequests;
  c.scheduler.spec.mode = mode;
  auto engine = load_engine(path.string(), c);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  if (!engine.ok()) return result;
  std::mutex mutex;
  std::condition_variable done;
  int finished = 0;
  std::vector<std::vector<TokenId>> tokens(kRequests);
  std::vector<RequestHandle> handles;
  for (int i = 0; i < kRequests; ++i) {
    Request r;
    r.prompt = TextPrompt{kPrompt, /*add_special=*/true, /*parse_special=*/false};
    r.max_tokens = kTokens;
    r.sampling.ignore_eos = true;
    r.sampling.temperature = temperature;
    r.sampling.top_k = 8;
    r.sampling.seed = first_seed + uint64_t(i);
    handles.push_back((*engine)->submit(std::move(r), [&, i](TokenEvent e) {
      std::lock_guard lock(mutex);
      if (e.token) tokens[size_t(i)].push_back(*e.token);
      if (e.finish) {
        EXPECT_EQ(e.finish->reason, FinishReason::kLength) << e.finish->message;
        ++finished;
        done.notify_one();
      }
    }));
  }
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return finished == kRequests; });
  for (const auto& t : tokens) ++result.counts[t];
  result.metrics = (*engine)->metrics();
  return result;
}

struct ChiSquare {
  double statistic = 0;
  int bins = 0;
  // The statistic's 99.9% quantile for bins - 1 degrees of freedom (Wilson-Hilferty).
  double critical() const {
    const double df = bins - 1, z = 3.090;
    return df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
  }
};

// Two samples of equal size: sum over bins of (a - b)^2 / (a + b), outcomes seen fewer than 10
// times in both together pooled into one bin.
ChiSquare two_sample(const Outcomes& a, const Outcomes& b) {
  std::map<std::vector<TokenId>, std::pair<int, int>> joint;
  for (const auto& [k, n] : a.counts) joint[k].first += n;
  for (const auto& [k, n] : b.counts) joint[k].second += n;
  std::vector<std::pair<int, int>> bins;
  std::pair<int, int> rare{0, 0};
  for (const auto& [k, ab] : joint) {
    if (ab.first + ab.second >= 10) {
      bins.push_back(ab);
    } else {
      rare.first += ab.first;
      rare.second += ab.second;
    }
  }
  if (rare.first + rare.second > 0) bins.push_back(rare);
  ChiSquare result;
  result.bins = int(bins.size());
  for (const auto& [x, y] : bins) result.statistic += double(x - y) * (x - y) / (x + y);
  return result;
}

TEST(EngineSpecDistribution, SampledOutputKeepsTheModelsDistributionWithDrafts) {
  const Outcomes plain = sample(SpecMode::kNone, 1.0f, 1);
  const Outcomes spec = sample(SpecMode::kNgram, 1.0f, 100001);
  // Drafts were verified both ways: some accepted, some rejected (the residual's path).
  EXPECT_GT(spec.metrics.spec_accepted_tokens, 0u);
  EXPECT_LT(spec.metrics.spec_accepted_tokens, spec.metrics.spec_draft_tokens);
  EXPECT_EQ(plain.metrics.spec_draft_tokens, 0u);
  const ChiSquare same = two_sample(spec, plain);
  std::printf(
      "with drafts vs without: chi-square %.1f over %d bins (99.9%%: %.1f); drafts %llu, "
      "accepted %llu\n",
      same.statistic, same.bins, same.critical(),
      (unsigned long long)spec.metrics.spec_draft_tokens,
      (unsigned long long)spec.metrics.spec_accepted_tokens);
  ASSERT_GE(same.bins, 4) << "too few distinct outcomes to compare";
  EXPECT_LT(same.statistic, same.critical());

  // The test's power: a colder distribution is told apart.
  const Outcomes colder = sample(SpecMode::kNone, 0.6f, 200001);
  const ChiSquare differs = two_sample(spec, colder);
  std::printf("with drafts vs temperature 0.6: chi-square %.1f over %d bins (99.9%%: %.1f)\n",
              differs.statistic, differs.bins, differs.critical());
  EXPECT_GT(differs.statistic, differs.critical());
}

}  // namespace
}  // namespace drift

// One Generation over the fake engine: its choices, stop strings, usage and how it fails.
#include "server/generation.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <nlohmann/json.hpp>

#include "../engine/engine_fakes.h"
#include "fake_exchange.h"

namespace drift::server {
namespace {

using namespace drift::testing;  // the fake engine

GenerationSpec spec_over(Prompt prompt, int choices, int32_t max_tokens) {
  GenerationSpec spec;
  spec.meta.id = "cmpl-test";
  spec.meta.model = "fake-model";
  for (int i = 0; i < choices; ++i) {
    GenerationSpec::Choice c;
    c.request.prompt = prompt;
    c.request.max_tokens = max_tokens;
    c.request.sampling.seed = uint64_t(i);
    c.counts_prompt_tokens = i == 0;
    spec.choices.push_back(std::move(c));
  }
  return spec;
}

struct GenerationRun {
  std::shared_ptr<FakeExchange> exchange = std::make_shared<FakeExchange>();
  GenerationOutcome outcome;
};

GenerationRun run(Engine& engine, GenerationSpec spec) {
  boost::asio::io_context io;
  GenerationRun r;
  auto g = std::make_shared<Generation>(io, engine, r.exchange, std::move(spec),
                                        [&r](const GenerationOutcome& o) { r.outcome = o; });
  g->start();
  EXPECT_TRUE(run_until_answered(io, *r.exchange));
  return r;
}

TEST(Generation, AStopStringEndsEachChoiceAndUsageCountsThePromptOnce) {
  FakeEngine fake = make_fake_engine(small_config());
  ASSERT_TRUE(fake.engine);
  // Every fake token's text has a "w" in it unless it is half a character: the stop string
  // matches within the first few tokens and cuts the text before it.
  GenerationSpec spec = spec_over(TextPrompt{"hi"}, 2, 12);
  for (GenerationSpec::Choice& c : spec.choices) c.request.stop = {"w"};
  GenerationRun r = run(*fake.engine, std::move(spec));
  ASSERT_EQ(r.exchange->status, 200) << r.exchange->body;
  nlohmann::json j = r.exchange->json();
  ASSERT_EQ(j["choices"].size(), 2u);
  for (const auto& choice : j["choices"]) {
    EXPECT_EQ(choice["finish_reason"], "stop");
    EXPECT_EQ(choice["text"].get<std::string>().find('w'), std::string::npos) << choice;
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3) << "BOS + 2 bytes, once for two choices";
  EXPECT_EQ(r.outcome.stop_string_matches, 2);
  EXPECT_EQ(r.outcome.prompt_tokens, 3);
  EXPECT_LT(r.outcome.completion_tokens, 24) << "the matches ended the rest";
  // The engine ended them "stop", not "cancelled" (as a client leaving would).
  EngineMetrics m = metrics_when(*fake.engine, [](const EngineMetrics& m) { return idle(m); });
  EXPECT_EQ(m.finished(FinishReason::kStop), 2u);
  EXPECT_EQ(m.finished(FinishReason::kCancelled), 0u);
}

TEST(Generation, ARefusalBeforeTheStreamIsAnHttpErrorNamingTheChatField) {
  FakeEngine fake = make_fake_engine(small_config());
  ASSERT_TRUE(fake.engine);
  ChatPrompt too_long;
  too_long.messages.emplace_back("user", std::string(300, 'x'));  // past max_model_len 128
  GenerationSpec spec = spec_over(std::move(too_long), 1, 4);
  spec.meta.chat = true;
  spec.stream = true;
  GenerationRun r = run(*fake.engine, std::move(spec));
  EXPECT_EQ(r.exchange->status, 400);
  EXPECT_TRUE(r.exchange->chunks.empty()) << "no stream was started";
  EXPECT_EQ(r.exchange->error_param(), "messages");
  EXPECT_EQ(r.outcome.status, 400);
}

TEST(Generation, ATemplateThatFailsIsTheClientsError) {
  FakeEngine fake = make_fake_engine(small_config());
  ASSERT_TRUE(fake.engine);
  GenerationSpec spec = spec_over(ChatPrompt{{{"", "no role"}}}, 1, 4);
  spec.meta.chat = true;
  GenerationRun r = run(*fake.engine, std::move(spec));
  EXPECT_EQ(r.exchange->status, 400) << r.exchange->body;
  EXPECT_EQ(r.exchange->error_param(), "messages");
  EXPECT_NE(r.exchange->body.find("needs every message's role"), std::string::npos);
}

}  // namespace
}  // namespace drift::server

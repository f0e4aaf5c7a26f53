// The sampling a request gets for the fields it leaves unset: the operator's flags, over the
// model's general.sampling.* recommendation, over llama.cpp's defaults (or OpenAI's), with the
// request's own fields always winning — resolved once, by the engine, for every program.
#include "engine/sampling_defaults.h"

#include <gtest/gtest.h>

#include <mutex>

#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;

SamplingDefaults resolved(const SamplingSettings& op, const SamplingSettings& model,
                          SamplingDefaultsBase base) {
  auto d = resolve_sampling_defaults(op, model, base);
  EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message);
  return d.ok() ? *d : SamplingDefaults{};
}

TEST(SamplingDefaults, WithoutARecommendationTheyAreLlamaCppDefaults) {
  SamplingDefaults d = resolved({}, {}, SamplingDefaultsBase::kModel);
  EXPECT_FLOAT_EQ(d.params.temperature, 0.8f);
  EXPECT_EQ(d.params.top_k, 40);
  EXPECT_FLOAT_EQ(d.params.top_p, 0.95f);
  EXPECT_FLOAT_EQ(d.params.min_p, 0.05f);
  EXPECT_FLOAT_EQ(d.params.repetition_penalty, 1.0f);
  EXPECT_EQ(d.params.order, SamplerOrder{});
  EXPECT_EQ(d.sources.temperature, SamplingSource::kLlamaCpp);
  EXPECT_EQ(d.describe(),
            "temperature 0.8 (llama.cpp), top_k 40 (llama.cpp), top_p 0.95 (llama.cpp), min_p "
            "0.05 (llama.cpp), repeat_penalty 1 (llama.cpp), penalty_last_n -1 (llama.cpp), "
            "presence_penalty 0 (llama.cpp), frequency_penalty 0 (llama.cpp), order "
            "top_k;top_p;min_p;temperature (llama.cpp)");
}

TEST(SamplingDefaults, OpenAIModeIsTemperatureOneAndNothingElse) {
  SamplingSettings model;
  model.temperature = 0.3f;  // ignored in this mode
  SamplingDefaults d = resolved({}, model, SamplingDefaultsBase::kOpenAI);
  EXPECT_FLOAT_EQ(d.params.temperature, 1.0f);
  EXPECT_FALSE(d.params.top_k);
  EXPECT_FLOAT_EQ(d.params.top_p, 1.0f);
  EXPECT_FLOAT_EQ(d.params.min_p, 0.0f);
  EXPECT_EQ(d.params.order.stages[0], SamplerStage::kTemperature);
  EXPECT_EQ(d.sources.temperature, SamplingSource::kOpenAI);
}

TEST(SamplingDefaults, OperatorBeatsModelBeatsBaseFieldByField) {
  SamplingSettings model;
  model.temperature = 0.6f;
  model.top_k = 20;
  SamplingSettings op;
  op.top_k = 0;  // "no limit" from the operator overrides the model's 20
  op.min_p = 0.1f;
  SamplingDefaults d = resolved(op, model, SamplingDefaultsBase::kModel);
  EXPECT_FLOAT_EQ(d.params.temperature, 0.6f);
  EXPECT_EQ(d.sources.temperature, SamplingSource::kModel);
  EXPECT_FALSE(d.params.top_k);
  EXPECT_EQ(d.sources.top_k, SamplingSource::kOperator);
  EXPECT_FLOAT_EQ(d.params.min_p, 0.1f);
  EXPECT_EQ(d.sources.min_p, SamplingSource::kOperator);
  EXPECT_FLOAT_EQ(d.params.top_p, 0.95f);
  EXPECT_EQ(d.sources.top_p, SamplingSource::kLlamaCpp);
  // --sampling-defaults llama.cpp skips the model's recommendation, keeps the operator's.
  SamplingDefaults l = resolved(op, model, SamplingDefaultsBase::kLlamaCpp);
  EXPECT_FLOAT_EQ(l.params.temperature, 0.8f);
  EXPECT_FLOAT_EQ(l.params.min_p, 0.1f);
}

TEST(SamplingDefaults, ARequestsOwnFieldsWinEvenWhenTheyEqualOpenAIsDefaults) {
  SamplingDefaults d = resolved({}, {}, SamplingDefaultsBase::kModel);
  SamplingSettings request;
  request.temperature = 1.0f;  // set: kept, though 1 is "the default" elsewhere
  request.top_k = 0;           // set: no limit
  request.seed = 7;
  request.stop_token_ids = {3};
  request.ignore_eos = true;
  SamplingParams p = d.resolve(request);
  EXPECT_FLOAT_EQ(p.temperature, 1.0f);
  EXPECT_FALSE(p.top_k);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);  // unset: the default
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.seed, 7u);
  EXPECT_EQ(p.stop_token_ids, std::vector<int32_t>{3});
  EXPECT_TRUE(p.ignore_eos);
  SamplingParams bare = d.resolve({});
  EXPECT_FLOAT_EQ(bare.temperature, 0.8f);
  EXPECT_EQ(bare.top_k, 40);
}

TEST(SamplingDefaults, AnInvalidOperatorValueIsAnErrorNamingTheField) {
  SamplingSettings op;
  op.top_p = 1.5f;
  auto d = resolve_sampling_defaults(op, {}, SamplingDefaultsBase::kModel);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("top_p must be in (0, 1], got 1.5"), std::string::npos)
      << d.error().message;
}

TEST(SamplingDefaults, AModelsRecommendationIsTheSourceOfTheFieldsItSets) {
  SamplingSettings model;
  model.top_k = 20;
  model.order = SamplerOrder{
      {SamplerStage::kTemperature, SamplerStage::kTopK, SamplerStage::kTopP, SamplerStage::kMinP}};
  SamplingDefaults d = resolved({}, model, SamplingDefaultsBase::kModel);
  EXPECT_EQ(d.params.top_k, 20);
  EXPECT_EQ(d.sources.top_k, SamplingSource::kModel);
  EXPECT_EQ(d.sources.order, SamplingSource::kModel);
  EXPECT_EQ(d.sources.presence_penalty, SamplingSource::kLlamaCpp);
}

TEST(EngineSampling, TheExecutorGetsTheRequestsFieldsOverTheEnginesDefaults) {
  // The engine, not its callers, fills unset fields: what reaches the executor is the resolved
  // sampling of each request.
  std::mutex mu;
  std::vector<SamplingParams> seen;
  FakeHooks hooks;
  hooks.before_step = [&](const StepPlan& plan) {
    std::lock_guard lock(mu);
    for (const StepItem& item : plan.items)
      if (item.sampling) seen.push_back(*item.sampling);
  };
  EngineConfig config = small_config();
  config.sampling.top_p = 0.5f;  // the operator's default
  FakeEngine fake = make_fake_engine(config, {}, hooks);
  ASSERT_TRUE(fake.engine);
  EXPECT_EQ(fake.engine->setup().sampling.sources.top_p, SamplingSource::kOperator);

  RequestHandle bare = fake.engine->submit(token_request(1, 4, 1));
  finish_within(bare);
  Request own = token_request(2, 4, 1);
  own.sampling.temperature = 1.0f;
  own.sampling.top_p = 1.0f;
  RequestHandle own_handle = fake.engine->submit(own);
  finish_within(own_handle);

  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_FLOAT_EQ(seen[0].temperature, 0.8f);
  EXPECT_EQ(seen[0].top_k, 40);
  EXPECT_FLOAT_EQ(seen[0].top_p, 0.5f);
  EXPECT_FLOAT_EQ(seen[1].temperature, 1.0f);
  EXPECT_FLOAT_EQ(seen[1].top_p, 1.0f);
  EXPECT_EQ(seen[1].top_k, 40);
}

}  // namespace
}  // namespace drift

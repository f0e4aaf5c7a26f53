// Every refusal carries its kind (RejectReason), so that a caller acts on the kind and not on the
// message's words; the prompt a rejection reports and the handle's prompt_tokens agree.
#include <gtest/gtest.h>

#include "engine_fakes.h"
#include "jinja/template.h"

namespace drift::testing {
namespace {

Finish finish_of(Engine& engine, Request request) {
  auto done = engine.submit(std::move(request)).wait();
  EXPECT_TRUE(done.ok());
  return done.ok() ? done->finish : Finish{};
}

RejectReason rejected_for(Engine& engine, Request request) {
  Finish f = finish_of(engine, std::move(request));
  EXPECT_EQ(f.reason, FinishReason::kRejected) << f.message;
  EXPECT_TRUE(f.reject_reason) << f.message;
  return f.reject_reason.value_or(RejectReason::kInvalidRequest);
}

TEST(EngineRejection, EachRefusalHasItsKind) {
  FakeEngine fake = make_fake_engine(small_config(/*kv_pages=*/16));  // 64 tokens of KV
  Engine& engine = *fake.engine;
  EXPECT_EQ(rejected_for(engine, token_request(1, 0, 4)), RejectReason::kEmptyPrompt);
  Request outside = token_request(2, 4, 4);
  std::get<std::vector<TokenId>>(outside.prompt)[2] = kVocab;
  EXPECT_EQ(rejected_for(engine, std::move(outside)), RejectReason::kTokenOutsideVocabulary);
  EXPECT_EQ(rejected_for(engine, token_request(3, 128, 4)), RejectReason::kPromptTooLong);
  EXPECT_EQ(rejected_for(engine, token_request(4, 100, 40)), RejectReason::kMaxTokensTooLong);
  EXPECT_EQ(rejected_for(engine, token_request(5, 50, 20)), RejectReason::kExceedsKvCache);
  EXPECT_EQ(rejected_for(engine, token_request(6, 4, 0)), RejectReason::kInvalidRequest);
  Request priority = token_request(7, 4, 4);
  priority.priority = 3;
  EXPECT_EQ(rejected_for(engine, std::move(priority)), RejectReason::kPriorityNotScheduled);
  Request chat;
  chat.prompt = ChatPrompt{{{"", "the fake template needs a role"}}};
  EXPECT_EQ(rejected_for(engine, std::move(chat)), RejectReason::kInvalidPrompt);
  Request bias = token_request(9, 4, 4);
  bias.sampling.logit_bias = {{1, 2.0f}, {kVocab, -100.0f}};
  EXPECT_EQ(rejected_for(engine, std::move(bias)), RejectReason::kInvalidLogitBias);
  // The fake codec compiles no grammar: the refusal says so, as a grammar refusal.
  Request grammar = token_request(10, 4, 4);
  grammar.grammar = GrammarSpec{GrammarKind::kRegex, "[a-z]+"};
  Finish refused = finish_of(engine, std::move(grammar));
  EXPECT_EQ(refused.reject_reason, RejectReason::kInvalidGrammar);
  EXPECT_NE(refused.message.find("regex"), std::string::npos) << refused.message;
  engine.shutdown(ShutdownMode::kDrain);
  EXPECT_EQ(rejected_for(engine, token_request(8, 4, 4)), RejectReason::kShuttingDown);
}

// What a real template's failure becomes: the kind of the template's error decides, never its
// words.
TEST(EngineRejection, AChatTemplatesRefusalAndFailureAreTheirOwnKinds) {
  auto failure = [](const char* source) {
    auto compiled = jinja::Template::parse(source);
    if (!compiled.ok()) return reject_reason_for_prompt(compiled.error());
    auto rendered = compiled->render(jinja::Json::object());
    EXPECT_FALSE(rendered.ok()) << source;
    return rendered.ok() ? RejectReason::kInvalidRequest
                         : reject_reason_for_prompt(rendered.error());
  };
  EXPECT_EQ(failure("{{ raise_exception('roles must alternate') }}"),
            RejectReason::kChatTemplateRefused);
  EXPECT_EQ(failure("{{ 'a'.no_such_method() }}"), RejectReason::kChatTemplateFailed);
  EXPECT_EQ(failure("{% if %}"), RejectReason::kChatTemplateFailed);
  EXPECT_EQ(failure("{{ range(100001) | length }}"), RejectReason::kInvalidPrompt);
  // The words of a raise_exception message do not matter: only its kind does.
  EXPECT_EQ(reject_reason_for_prompt(Error{"raise_exception: roles must alternate"}),
            RejectReason::kInvalidPrompt);
}

TEST(EngineRejection, ABusySessionIsRefusedAsBusy) {
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 1); });
  FakeEngine fake = make_fake_engine(small_config(), FakeModel{}, pause_hooks(gate));
  Request first = token_request(1, 4, 4);
  first.session_id = "s";
  RequestHandle running = fake.engine->submit(std::move(first));
  ASSERT_TRUE(gate.wait_paused());
  Request second = token_request(2, 4, 4);
  second.session_id = "s";
  RejectReason why = rejected_for(*fake.engine, std::move(second));
  gate.open();
  EXPECT_EQ(why, RejectReason::kSessionBusy);
}

TEST(EngineRejection, OnlyRejectionsHaveAKind) {
  FakeEngine fake = make_fake_engine(small_config());
  Finish f = finish_of(*fake.engine, token_request(1, 4, 3));
  EXPECT_EQ(f.reason, FinishReason::kLength);
  EXPECT_FALSE(f.reject_reason);
}

TEST(EngineRejection, TheHandleKnowsThePromptAsTheEngineTokenizedIt) {
  FakeEngine fake = make_fake_engine(small_config());
  Request text;
  text.prompt = TextPrompt{"abc"};
  text.max_tokens = 2;
  RequestHandle handle = fake.engine->submit(std::move(text));
  EXPECT_EQ(handle.prompt_tokens(), 4) << "BOS + 3 bytes, known when submit returns";
  auto done = handle.wait();
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->finish.usage.prompt_tokens, 4);
}

TEST(EngineRejection, TokenizeAndDetokenizeUseTheEnginesCodec) {
  FakeEngine fake = make_fake_engine(small_config());
  auto ids = fake.engine->tokenize(TextPrompt{"ab"});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<TokenId>{kBos, 2 + 'a', 2 + 'b'}));
  auto chat = fake.engine->tokenize(ChatPrompt{{{"user", "x"}}});
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->front(), kBos);
  EXPECT_FALSE(fake.engine->tokenize(ChatPrompt{{{"", "x"}}}).ok());
  auto text = fake.engine->detokenize(std::vector<TokenId>{kBos, 10}, /*render_special=*/true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<s>" + fake_piece(10));
  EXPECT_FALSE(fake.engine->detokenize(std::vector<TokenId>{kVocab}).ok());
  EXPECT_FALSE(fake.engine->token_text(-1).ok());
  EXPECT_EQ(*fake.engine->token_text(10), fake_piece(10));
}

}  // namespace
}  // namespace drift::testing

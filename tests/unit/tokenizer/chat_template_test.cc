// Chat templates of real models (SmolLM2's from its GGUF, ChatML, Gemma 2 and 3, Llama 3.1 and
// 3.2, Mistral Nemo and Small 3.2, Qwen 2.5 and 3, Hermes 3) rendered through ChatTemplate and
// compared byte for byte with transformers-style jinja2 renders of the same conversations
// (tests/data/templates/fixtures.json): plain turns, tools and tool calls, unicode, special-token
// text, and conversations the templates reject with raise_exception.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace drift {
namespace {

using jinja::Json;

const std::string kTemplateDir = std::string(DRIFT_TEST_DATA_DIR) + "/templates/";

Json load_fixture() {
  std::ifstream in(kTemplateDir + "fixtures.json");
  return Json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::tm frozen_now() {  // the fixture's "frozen_now", 2024-07-26T14:05:09 (a Friday)
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 14;
  tm.tm_min = 5;
  tm.tm_sec = 9;
  tm.tm_wday = 5;
  tm.tm_yday = 207;
  return tm;
}

struct ChatCase {
  std::string id;
  std::string template_file;
  ChatTemplateInputs inputs;
  Json expectation;
};

std::string test_name(const std::string& text) {
  std::string name;
  for (char c : text) name.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return name;
}

std::vector<ChatCase> chat_cases() {
  std::vector<ChatCase> cases;
  const Json fixture = load_fixture();
  if (fixture.is_discarded()) return cases;
  for (const Json& c : fixture["chat_cases"]) {
    const std::string template_name = c["template"];
    const Json* info = nullptr;
    for (const Json& t : fixture["templates"]) {
      if (t["name"] == template_name) info = &t;
    }
    const Json& conversation = fixture["conversations"][c["conversation"].get<std::string>()];
    ChatCase chat;
    chat.template_file = (*info)["file"];
    chat.inputs.messages = conversation["messages"];
    if (conversation.contains("tools")) chat.inputs.tools = conversation["tools"];
    chat.inputs.add_generation_prompt = c["add_generation_prompt"];
    if (!(*info)["bos_token"].is_null()) chat.inputs.bos_token = (*info)["bos_token"];
    if (!(*info)["eos_token"].is_null()) chat.inputs.eos_token = (*info)["eos_token"];
    chat.inputs.extra_context = c["extra_context"];
    chat.inputs.clock = frozen_now;
    chat.expectation = c;
    std::string id = template_name + "__" + c["conversation"].get<std::string>() +
                     (chat.inputs.add_generation_prompt ? "__prompt" : "");
    if (!c["extra_context"].empty()) id += "__extra" + std::to_string(cases.size());
    chat.id = test_name(id);
    cases.push_back(std::move(chat));
  }
  return cases;
}

// gtest prints parameters of failing cases: the case id says which one.
void PrintTo(const ChatCase& c, std::ostream* os) { *os << c.id; }

class ChatTemplateFixture : public ::testing::TestWithParam<ChatCase> {};

TEST_P(ChatTemplateFixture, RendersLikeTransformers) {
  const ChatCase& c = GetParam();
  auto chat_template = ChatTemplate::parse(read_text(kTemplateDir + c.template_file));
  ASSERT_TRUE(chat_template.ok()) << chat_template.error().message;
  auto rendered = chat_template->render(c.inputs);
  if (c.expectation.contains("expected")) {
    ASSERT_TRUE(rendered.ok()) << rendered.error().message;
    EXPECT_EQ(*rendered, c.expectation["expected"].get<std::string>());
    return;
  }
  const std::string jinja2_error = c.expectation["error"];
  ASSERT_FALSE(rendered.ok()) << "jinja2 failed with: " << jinja2_error
                              << "\ndrift rendered: " << *rendered;
  // raise_exception's message (or an undefined value's) is what the user is shown.
  EXPECT_NE(rendered.error().message.find(jinja2_error), std::string::npos)
      << "drift: " << rendered.error().message << "\njinja2: " << jinja2_error;
}

INSTANTIATE_TEST_SUITE_P(Fixture, ChatTemplateFixture, ::testing::ValuesIn(chat_cases()),
                         [](const ::testing::TestParamInfo<ChatCase>& info) {
                           return info.param.id;
                         });

TEST(ChatTemplate, FixtureCoversEveryTemplateWithToolsAndRejections) {
  const Json fixture = load_fixture();
  ASSERT_FALSE(fixture.is_discarded());
  EXPECT_EQ(fixture["jinja2_version"], "3.1.6");
  size_t tool_renders = 0, raised = 0;
  for (const Json& c : fixture["chat_cases"]) {
    const std::string conversation = c["conversation"];
    if (conversation.find("tool") != std::string::npos && c.contains("expected")) ++tool_renders;
    if (c.value("error_type", "") == "TemplateError") ++raised;
  }
  EXPECT_GE(fixture["templates"].size(), 10u);
  EXPECT_GE(tool_renders, 20u);
  EXPECT_GE(raised, 10u);
}

TEST(ChatTemplate, RaiseExceptionMessageReachesTheCaller) {
  auto gemma = ChatTemplate::parse(read_text(kTemplateDir + "google-gemma-2-2b-it.jinja"));
  ASSERT_TRUE(gemma.ok());
  ChatTemplateInputs inputs;
  inputs.messages = Json::parse(R"([{"role": "user", "content": "a"},
                                     {"role": "user", "content": "b"}])");
  auto rendered = gemma->render(inputs);
  ASSERT_FALSE(rendered.ok());
  EXPECT_EQ(rendered.error().message,
            "chat template: line 1, column 211: Conversation roles must alternate "
            "user/assistant/user/assistant/...");
}

TEST(ChatTemplate, SyntaxErrorNamesLineAndColumn) {
  auto broken = ChatTemplate::parse("{% for m in messages %}\n{{ m.content + }}\n{% endfor %}");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(
      broken.error().message,
      "chat template: syntax error at line 2, column 16: unexpected 'end of print statement'");
}

TEST(ChatTemplate, ClockFeedsStrftimeNow) {
  auto llama =
      ChatTemplate::parse(read_text(kTemplateDir + "meta-llama-Llama-3.2-3B-Instruct.jinja"));
  ASSERT_TRUE(llama.ok());
  ChatTemplateInputs inputs;
  inputs.messages = Json::parse(R"([{"role": "user", "content": "hi"}])");
  inputs.clock = [] {
    std::tm tm{};
    tm.tm_year = 2025 - 1900;
    tm.tm_mon = 0;
    tm.tm_mday = 3;
    return tm;
  };
  auto rendered = llama->render(inputs);
  ASSERT_TRUE(rendered.ok()) << rendered.error().message;
  EXPECT_NE(rendered->find("Today Date: 03 Jan 2025\n"), std::string::npos) << *rendered;
}

TEST(ChatTemplate, UnsetSpecialTokensAreUndefined) {
  auto probe =
      ChatTemplate::parse("{{ bos_token is defined }} {{ eos_token }} {{ tools is none }}");
  ASSERT_TRUE(probe.ok());
  ChatTemplateInputs inputs;
  inputs.eos_token = "</s>";
  auto rendered = probe->render(inputs);
  ASSERT_TRUE(rendered.ok()) << rendered.error().message;
  EXPECT_EQ(*rendered, "False </s> True");
}

TEST(ChatTemplate, ExtraContextIsVisibleButCannotReplaceTheConversation) {
  auto probe = ChatTemplate::parse("{{ enable_thinking }} {{ bos_token }}");
  ASSERT_TRUE(probe.ok());
  ChatTemplateInputs inputs;
  inputs.bos_token = "<s>";
  inputs.extra_context = Json::parse(R"({"enable_thinking": false, "bos_token": "<B>"})");
  auto rendered = probe->render(inputs);
  ASSERT_TRUE(rendered.ok()) << rendered.error().message;
  EXPECT_EQ(*rendered, "False <B>");

  inputs.extra_context = Json::parse(R"({"messages": []})");
  auto refused = probe->render(inputs);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "chat template: extra context may not set 'messages'");
}

// A kwarg named like a built-in function would make the template fail where it calls it, which
// reads as the template's fault (a 500); refused up front, it is the caller's (a 400).
TEST(ChatTemplate, ExtraContextCannotHideTheBuiltinFunctions) {
  auto probe = ChatTemplate::parse("{{ raise_exception('no') if false }}{{ range(2) | list }}");
  ASSERT_TRUE(probe.ok());
  for (const char* name : {"raise_exception", "namespace", "strftime_now", "range", "dict"}) {
    ChatTemplateInputs inputs;
    inputs.extra_context = Json::object({{name, 1}});
    auto refused = probe->render(inputs);
    ASSERT_FALSE(refused.ok()) << name;
    EXPECT_NE(refused.error().message.find(fmt::format("may not set '{}'", name)),
              std::string::npos)
        << refused.error().message;
    EXPECT_FALSE(refused.error().code) << "a kind would make it the template's fault";
  }
}

TEST(ChatTemplate, MessagesMustBeObjects) {
  auto chatml = ChatTemplate::parse(read_text(kTemplateDir + "chatml.jinja"));
  ASSERT_TRUE(chatml.ok());
  ChatTemplateInputs inputs;
  inputs.messages = Json::parse(R"(["just a string"])");
  auto rendered = chatml->render(inputs);
  ASSERT_FALSE(rendered.ok());
  EXPECT_EQ(rendered.error().message,
            "chat template: each message must be a JSON object, not string");
}

TEST(ChatTemplate, KeyOrderOfToolSchemasIsKept) {
  // tojson follows the order the client sent, as Python's json.dumps does.
  auto probe = ChatTemplate::parse("{{ tools | tojson }}");
  ASSERT_TRUE(probe.ok());
  ChatTemplateInputs inputs;
  inputs.tools = Json::parse(R"([{"type": "function", "function": {"name": "f", "a": 1}}])");
  auto rendered = probe->render(inputs);
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(*rendered, R"([{"type": "function", "function": {"name": "f", "a": 1}}])");
}

TEST(ChatTemplate, LongConversationsFitTheDefaultBudget) {
  // 4,000 turns (far beyond any context window) with the costliest templates of the set stay
  // well inside the default step budget; the sandbox only stops runaway templates.
  ChatTemplateInputs inputs;
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  for (int i = 0; i < 4000; ++i) {
    inputs.messages.push_back(
        {{"role", i % 2 ? "assistant" : "user"}, {"content", "turn " + std::to_string(i)}});
  }
  for (const char* file :
       {"Qwen-Qwen3-0.6B.jinja", "mistralai-Mistral-Small-3.2-24B-Instruct-2506.jinja",
        "google-gemma-3-it.jinja"}) {
    auto chat_template = ChatTemplate::parse(read_text(kTemplateDir + file));
    ASSERT_TRUE(chat_template.ok()) << file;
    auto rendered = chat_template->render(inputs);
    ASSERT_TRUE(rendered.ok()) << file << ": " << rendered.error().message;
    EXPECT_NE(rendered->find("turn 3999"), std::string::npos) << file;
  }
}

TEST(ChatTemplate, DeeplyNestedMessageIsRefusedNotFollowed) {
  auto chatml = ChatTemplate::parse(read_text(kTemplateDir + "chatml.jinja"));
  ASSERT_TRUE(chatml.ok());
  ChatTemplateInputs inputs;
  // Parsed in place (nlohmann parses iteratively); the message nests 100k arrays deep.
  inputs.messages = Json::parse("[{\"role\": \"user\", \"content\": " + std::string(100000, '[') +
                                std::string(100000, ']') + "}]");
  auto rendered = chatml->render(inputs);
  ASSERT_FALSE(rendered.ok());
  EXPECT_EQ(rendered.error().message, "chat template: messages: JSON input is nested too deeply");
}

TEST(ChatTemplate, GgufWithoutTemplateIsReported) {
  auto file = GgufFile::open(std::string(DRIFT_TEST_DATA_DIR) + "/gguf/valid/small.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto chat_template = ChatTemplate::from_gguf(*file);
  ASSERT_FALSE(chat_template.ok());
  EXPECT_NE(chat_template.error().message.find("the model has no chat template"),
            std::string::npos);
}

TEST(ChatTemplate, OneTemplateRendersOnSeveralThreadsAtOnce) {
  auto qwen = ChatTemplate::parse(read_text(kTemplateDir + "Qwen-Qwen2.5-7B-Instruct.jinja"));
  ASSERT_TRUE(qwen.ok());
  ChatTemplateInputs inputs;
  inputs.messages = Json::parse(R"([{"role": "user", "content": "hello"}])");
  const std::string expected = *qwen->render(inputs);
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) results[t] = *qwen->render(inputs);
    });
  }
  for (auto& thread : threads) thread.join();
  for (const std::string& r : results) EXPECT_EQ(r, expected);
}

}  // namespace
}  // namespace drift

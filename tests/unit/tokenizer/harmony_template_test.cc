// gpt-oss's chat template rendered by drift, with the request's reasoning_effort and tools as the
// template takes them, against Python's jinja2 on the same template and against OpenAI's own
// harmony renderer (openai-harmony) on the same conversation
// (tests/data/tokenizer/harmony_reference.json, scripts/fixtures/make_harmony_fixtures.py).
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "jinja/json.h"
#include "tokenizer/chat_template.h"

namespace drift {
namespace {

const std::filesystem::path kData = DRIFT_TEST_DATA_DIR;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::tm fixture_date() {  // the fixture's frozen date, 2024-07-26
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_wday = 5;
  tm.tm_yday = 207;
  return tm;
}

TEST(HarmonyTemplate, RendersAsJinja2AndAsOpenaiHarmony) {
  const jinja::Json reference =
      jinja::Json::parse(read_file(kData / "tokenizer" / "harmony_reference.json"));
  auto parsed = ChatTemplate::parse(read_file(kData / "templates" / "openai-gpt-oss-120b.jinja"));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const ChatTemplate& chat_template = *parsed;
  ASSERT_GE(reference["conversations"].size(), 5u);
  for (const jinja::Json& c : reference["conversations"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    ChatTemplateInputs inputs;
    inputs.messages = c["messages"];
    if (c.contains("tools")) inputs.tools = c["tools"];
    // As the server passes the request's reasoning_effort: a template variable.
    if (c.contains("reasoning_effort"))
      inputs.extra_context["reasoning_effort"] = c["reasoning_effort"];
    inputs.bos_token = "<|startoftext|>";
    inputs.eos_token = "<|return|>";
    inputs.clock = fixture_date;
    auto rendered = chat_template.render(inputs);
    ASSERT_TRUE(rendered.ok()) << rendered.error().message;
    EXPECT_EQ(*rendered, c["rendered"].get<std::string>()) << "jinja2 renders it otherwise";
    std::string as_harmony = *rendered;
    if (c.contains("difference")) {
      // The one difference the fixture records: the template's blank line after the developer
      // instructions.
      const size_t at = as_harmony.find("\n\n<|end|>");
      ASSERT_NE(at, std::string::npos);
      as_harmony.erase(at, 2);
    }
    EXPECT_EQ(as_harmony, c["harmony_rendered"].get<std::string>())
        << "openai-harmony renders it otherwise";
    if (c.contains("reasoning_effort"))
      EXPECT_NE(rendered->find("Reasoning: " + c["reasoning_effort"].get<std::string>() + "\n"),
                std::string::npos);
  }
}

}  // namespace
}  // namespace drift

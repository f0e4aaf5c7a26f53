// Damaged templates: thousands of deterministic random mutations of the real chat templates
// (bytes deleted, duplicated, replaced by template syntax) each either render or fail with a
// message — never crash, hang or read out of bounds (the ASan+UBSan build runs this too).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "jinja/template.h"

namespace drift::jinja {
namespace {

std::vector<std::string> real_templates() {
  std::vector<std::string> sources;
  const std::filesystem::path dir = std::filesystem::path(DRIFT_TEST_DATA_DIR) / "templates";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    sources.push_back(text.str());
  }
  return sources;
}

const Json& conversation() {
  static const Json variables = Json::parse(R"({
    "messages": [
      {"role": "system", "content": "sys"},
      {"role": "user", "content": "hi é"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "abcdefghi", "type": "function",
        "function": {"name": "f", "arguments": {"a": 1}}}]},
      {"role": "tool", "tool_call_id": "abcdefghi", "content": "ok"},
      {"role": "user", "content": [{"type": "text", "text": "part"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
      "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"
  })");
  return variables;
}

// Pieces of syntax that make mutants reach deep into the parser and interpreter.
const char* const kSnippets[] = {"{{",    "}}",   "{%",   "%}",   "{#",   "#}",    "-",
                                 "(",     ")",    "[",    "]",    "'",    "\"",    "|",
                                 ".",     ",",    "~",    "**",   "loop", "ns",    "endfor",
                                 "endif", "else", "not ", " in ", " is ", "*9999", "[::-1]"};

std::string mutate(const std::string& source, std::mt19937& rng) {
  std::string out = source;
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !out.empty(); ++e) {
    const size_t at = rng() % out.size();
    switch (rng() % 4) {
      case 0:  // delete a run
        out.erase(at, 1 + rng() % 8);
        break;
      case 1:  // duplicate a run
        out.insert(at, out.substr(at, 1 + rng() % 16));
        break;
      case 2:  // insert syntax
        out.insert(at, kSnippets[rng() % std::size(kSnippets)]);
        break;
      default:  // replace a byte
        out[at] = static_cast<char>(rng() % 256);
        break;
    }
  }
  return out;
}

TEST(JinjaRobustness, MutatedTemplatesRenderOrFailCleanly) {
  const std::vector<std::string> sources = real_templates();
  ASSERT_GE(sources.size(), 10u);
  std::mt19937 rng(20240726);
  RenderOptions options;
  options.limits.max_steps = 200'000;  // mutants may loop; keep each one short
  size_t rendered = 0, failed = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string mutant = mutate(sources[static_cast<size_t>(i) % sources.size()], rng);
    auto compiled = Template::parse(mutant);
    if (!compiled.ok()) {
      EXPECT_FALSE(compiled.error().message.empty());
      ++failed;
      continue;
    }
    auto result = compiled->render(conversation(), options);
    if (result.ok()) {
      ++rendered;
    } else {
      EXPECT_FALSE(result.error().message.empty());
      ++failed;
    }
  }
  // Both paths are exercised.
  EXPECT_GT(rendered, 100u);
  EXPECT_GT(failed, 100u);
}

}  // namespace
}  // namespace drift::jinja

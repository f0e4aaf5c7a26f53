// /v1/embeddings bodies -> values, and the response's encodings: every input shape OpenAI
// defines, each refusal naming its field, and base64 as RFC 4648 encodes little-endian float32.
#include "server/embedding_schema.h"

#include <gtest/gtest.h>

#include "server/embedding_run.h"

namespace drift::server {
namespace {

using nlohmann::json;

EmbeddingRequest parse_ok(const json& body) {
  auto r = parse_embedding_request(body);
  EXPECT_TRUE(std::holds_alternative<EmbeddingRequest>(r))
      << body.dump() << ": " << std::get<ApiError>(r).message;
  return std::holds_alternative<EmbeddingRequest>(r) ? std::get<EmbeddingRequest>(r)
                                                     : EmbeddingRequest{};
}

ApiError parse_error(const json& body) {
  auto r = parse_embedding_request(body);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body.dump();
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(EmbeddingSchema, EveryInputShape) {
  EmbeddingRequest text = parse_ok({{"input", "hi"}, {"model", "m"}});
  ASSERT_EQ(text.inputs.size(), 1u);
  EXPECT_EQ(std::get<std::string>(text.inputs[0]), "hi");
  EXPECT_EQ(text.model, "m");
  EXPECT_EQ(text.encoding, EmbeddingEncoding::kFloat);

  EmbeddingRequest texts = parse_ok({{"input", {"a", "b", "c"}}});
  ASSERT_EQ(texts.inputs.size(), 3u);
  EXPECT_EQ(std::get<std::string>(texts.inputs[2]), "c");

  EmbeddingRequest ids = parse_ok({{"input", {5, 6, 7}}});
  ASSERT_EQ(ids.inputs.size(), 1u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(ids.inputs[0]), (std::vector<int32_t>{5, 6, 7}));

  EmbeddingRequest lists = parse_ok({{"input", {{1, 2}, {3}}}, {"encoding_format", "base64"}});
  ASSERT_EQ(lists.inputs.size(), 2u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(lists.inputs[1]), (std::vector<int32_t>{3}));
  EXPECT_EQ(lists.encoding, EmbeddingEncoding::kBase64);

  EmbeddingRequest extras =
      parse_ok({{"input", "x"}, {"dimensions", 576}, {"user", "u"}, {"unknown", 1}});
  EXPECT_EQ(extras.dimensions, 576);
}

TEST(EmbeddingSchema, RefusalsNameTheirField) {
  const std::pair<json, std::string> cases[] = {
      {json::object(), "input"},
      {{{"input", ""}}, "input"},
      {{{"input", json::array()}}, "input"},
      {{{"input", json::array({"a", ""})}}, "input"},
      {{{"input", json::array({json::array({1}), json::array()})}}, "input"},
      {{{"input", 3}}, "input"},
      {{{"input", json::array({"a", 3})}}, "input"},
      {{{"input", json::array({1, -2})}}, "input"},
      {{{"input", json::array({1.5})}}, "input"},
      {{{"input", json::array({uint64_t{1} << 40})}}, "input"},
      {{{"input", "a"}, {"encoding_format", "hex"}}, "encoding_format"},
      {{{"input", "a"}, {"dimensions", 0}}, "dimensions"},
      {{{"input", "a"}, {"dimensions", -4}}, "dimensions"},
      {{{"input", "a"}, {"dimensions", 1.0}}, "dimensions"},
      {{{"input", "a"}, {"user", 1}}, "user"},
      {{{"input", "a"}, {"model", 1}}, "model"},
  };
  for (const auto& [body, param] : cases) {
    ApiError e = parse_error(body);
    EXPECT_EQ(e.status, 400) << body.dump();
    EXPECT_EQ(e.param, param) << body.dump() << ": " << e.message;
  }
}

TEST(EmbeddingSchema, AtMost2048Inputs) {
  json inputs = json::array();
  for (size_t i = 0; i < kMaxEmbeddingInputs; ++i) inputs.push_back("x");
  EXPECT_EQ(parse_ok({{"input", inputs}}).inputs.size(), kMaxEmbeddingInputs);
  inputs.push_back("x");
  EXPECT_NE(parse_error({{"input", inputs}}).message.find("2048"), std::string::npos);
}

TEST(EmbeddingResponse, Base64IsTheLittleEndianFloat32Bytes) {
  EXPECT_EQ(base64_float32(std::vector<float>{1.0f}), "AACAPw==");  // 00 00 80 3F
  EXPECT_EQ(base64_float32(std::vector<float>{1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(base64_float32(std::vector<float>{0.0f, 0.0f, 0.0f}), "AAAAAAAAAAAAAAAA");
  EXPECT_EQ(base64_float32({}), "");
}

TEST(EmbeddingResponse, OpenAIsShape) {
  json j = embeddings_json("m", {{1.0f, 0.0f}, {0.0f, 1.0f}}, EmbeddingEncoding::kFloat, 7);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "m");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][1]["object"], "embedding");
  EXPECT_EQ(j["data"][1]["index"], 1);
  EXPECT_EQ(j["data"][1]["embedding"], json({0.0, 1.0}));
  EXPECT_EQ(j["usage"], json({{"prompt_tokens", 7}, {"total_tokens", 7}}));
  json b = embeddings_json("m", {{1.0f}}, EmbeddingEncoding::kBase64, 1);
  EXPECT_EQ(b["data"][0]["embedding"], "AACAPw==");
}

}  // namespace
}  // namespace drift::server

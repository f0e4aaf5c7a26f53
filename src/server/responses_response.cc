#include "server/responses_response.h"

#include <fmt/format.h>

#include "server/sse.h"

namespace drift::server {
namespace {

using Json = jinja::Json;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json output_text_part(std::string text) {
  return Json{{"type", "output_text"},
              {"text", std::move(text)},
              {"annotations", Json::array()},
              {"logprobs", Json::array()}};
}

Json usage_object(int64_t prompt_tokens, int64_t cached_tokens, int64_t completion_tokens) {
  return Json{{"input_tokens", prompt_tokens},
              {"input_tokens_details", {{"cached_tokens", cached_tokens}}},
              {"output_tokens", completion_tokens},
              // The engine does not count a reply's reasoning tokens apart from its others.
              {"output_tokens_details", {{"reasoning_tokens", 0}}},
              {"total_tokens", prompt_tokens + completion_tokens}};
}

}  // namespace

std::string ResponsesReplyCodec::item_id(std::string_view prefix, size_t index) const {
  // "resp_<hex>" -> "<prefix>_<hex>_<index>": unique per response and item.
  const std::string_view digits = std::string_view(meta_.id).substr(meta_.id.find('_') + 1);
  return fmt::format("{}_{}_{}", prefix, digits, index);
}

Json ResponsesReplyCodec::message_item(std::string text, std::string_view status,
                                       size_t index) const {
  Json content = Json::array();
  if (status == "completed") content.push_back(output_text_part(std::move(text)));
  return Json{{"id", item_id("msg", index)},
              {"type", "message"},
              {"status", status},
              {"role", "assistant"},
              {"content", std::move(content)}};
}

Json ResponsesReplyCodec::reasoning_item(std::string text, std::string_view status,
                                         size_t index) const {
  Json content = Json::array();
  if (status == "completed") content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return Json{{"id", item_id("rs", index)},
              {"type", "reasoning"},
              {"status", status},
              {"summary", Json::array()},
              {"content", std::move(content)}};
}

Json ResponsesReplyCodec::call_item(const ToolCall& call, size_t index) const {
  return Json{{"id", item_id("fc", index)}, {"type", "function_call"},
              {"status", "completed"},      {"call_id", call.id},
              {"name", call.name},          {"arguments", call.arguments}};
}

std::string ResponsesReplyCodec::event(std::string_view type, Json fields) {
  fields["type"] = type;
  fields["sequence_number"] = sequence_++;
  return sse_named_event(type, dump(fields));
}

Json ResponsesReplyCodec::response_object(std::string_view status, const Json* usage) const {
  Json body{{"id", meta_.id},
            {"object", "response"},
            {"created_at", meta_.created},
            {"status", status},
            {"model", meta_.model},
            {"output", output_},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"usage", usage ? *usage : Json(nullptr)}};
  if (status == "incomplete") body["incomplete_details"] = Json{{"reason", "max_output_tokens"}};
  for (const auto& [name, value] : context_.echo.items()) body[name] = value;
  return body;
}

Json ResponsesReplyCodec::finish(int64_t prompt_tokens, int64_t completion_tokens) {
  const Json usage = usage_object(prompt_tokens, cached_prompt_tokens_, completion_tokens);
  Json body = response_object(finish_reason_ == "length" ? "incomplete" : "completed", &usage);
  if (context_.store) {
    Json conversation = context_.input_items;
    for (const Json& item : output_) conversation.push_back(item);
    context_.store->put(meta_.id,
                        StoredResponse{dump(body), dump(conversation), context_.instructions});
  }
  return body;
}

std::string ResponsesReplyCodec::stream_start(std::span<const std::string> /*echoes*/,
                                              int64_t /*prompt_tokens*/) {
  const Json created = response_object("in_progress", nullptr);
  // Two statements: the operands of + may be evaluated in either order, the numbers may not.
  std::string out = event("response.created", {{"response", created}});
  return out + event("response.in_progress", {{"response", created}});
}

std::string ResponsesReplyCodec::close_item() {
  if (open_ == Item::kNone) return {};
  const size_t index = output_.size();
  std::string out;
  Json item;
  if (open_ == Item::kMessage) {
    const std::string id = item_id("msg", index);
    const Json part = output_text_part(open_text_);
    out += event("response.output_text.done", {{"item_id", id},
                                               {"output_index", index},
                                               {"content_index", 0},
                                               {"text", open_text_},
                                               {"logprobs", Json::array()}});
    out += event("response.content_part.done",
                 {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    item = message_item(std::move(open_text_), "completed", index);
  } else {
    const std::string id = item_id("rs", index);
    out += event(
        "response.reasoning_text.done",
        {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", open_text_}});
    item = reasoning_item(std::move(open_text_), "completed", index);
  }
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  open_ = Item::kNone;
  open_text_.clear();
  return out;
}

std::string ResponsesReplyCodec::open_item(Item kind) {
  if (open_ == kind) return {};
  std::string out = close_item();
  open_ = kind;
  const size_t index = output_.size();
  if (kind == Item::kMessage) {
    out += event("response.output_item.added",
                 {{"output_index", index}, {"item", message_item("", "in_progress", index)}});
    return out + event("response.content_part.added", {{"item_id", item_id("msg", index)},
                                                       {"output_index", index},
                                                       {"content_index", 0},
                                                       {"part", output_text_part("")}});
  }
  return out + event("response.output_item.added",
                     {{"output_index", index}, {"item", reasoning_item("", "in_progress", index)}});
}

std::string ResponsesReplyCodec::reasoning_delta(int32_t /*index*/, std::string_view text,
                                                 nlohmann::json /*logprobs*/) {
  std::string out = open_item(Item::kReasoning);
  open_text_ += text;
  return out + event("response.reasoning_text.delta", {{"item_id", item_id("rs", output_.size())},
                                                       {"output_index", output_.size()},
                                                       {"content_index", 0},
                                                       {"delta", std::string(text)}});
}

std::string ResponsesReplyCodec::content_delta(int32_t /*index*/, std::string_view text,
                                               nlohmann::json /*logprobs*/) {
  std::string out = open_item(Item::kMessage);
  open_text_ += text;
  return out + event("response.output_text.delta", {{"item_id", item_id("msg", output_.size())},
                                                    {"output_index", output_.size()},
                                                    {"content_index", 0},
                                                    {"delta", std::string(text)},
                                                    {"logprobs", Json::array()}});
}

std::string ResponsesReplyCodec::tool_calls(int32_t /*index*/, std::span<const ToolCall> calls) {
  std::string out = close_item();
  for (const ToolCall& call : calls) {
    const size_t index = output_.size();
    Json item = call_item(call, index);
    Json added = item;
    added["status"] = "in_progress";
    added["arguments"] = "";
    const std::string id = item_id("fc", index);
    out += event("response.output_item.added", {{"output_index", index}, {"item", added}});
    out += event("response.function_call_arguments.delta",
                 {{"item_id", id}, {"output_index", index}, {"delta", call.arguments}});
    out += event("response.function_call_arguments.done", {{"item_id", id},
                                                           {"output_index", index},
                                                           {"name", call.name},
                                                           {"arguments", call.arguments}});
    out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
    output_.push_back(std::move(item));
  }
  return out;
}

std::string ResponsesReplyCodec::choice_end(int32_t /*index*/, const ChoiceEnd& end,
                                            nlohmann::json /*logprobs*/) {
  finish_reason_ = end.reason;
  cached_prompt_tokens_ = end.cached_prompt_tokens;
  // A reply with no text and no call still answers with a (empty) message, as a whole one does.
  std::string out = output_.empty() && open_ != Item::kMessage ? open_item(Item::kMessage) : "";
  return out + close_item();
}

std::string ResponsesReplyCodec::stream_end(int64_t prompt_tokens, int64_t completion_tokens) {
  Json body = finish(prompt_tokens, completion_tokens);
  const bool complete = body["status"] == "completed";
  return event(complete ? "response.completed" : "response.incomplete",
               {{"response", std::move(body)}});
}

std::string ResponsesReplyCodec::stream_error(const ApiError& error) {
  Json failed = response_object("failed", nullptr);
  failed["error"] = Json{{"code", error.code.value_or(error.type)}, {"message", error.message}};
  std::string out = event("error", {{"code", error.code ? Json(*error.code) : Json(nullptr)},
                                    {"message", error.message},
                                    {"param", error.param ? Json(*error.param) : Json(nullptr)}});
  return out + event("response.failed", {{"response", std::move(failed)}});
}

std::string ResponsesReplyCodec::response(const std::vector<ChoiceResult>& choices,
                                          int64_t prompt_tokens, int64_t completion_tokens) {
  // One choice: the Responses API has no n.
  const ChoiceResult& c = choices.at(0);
  if (c.reasoning_content && !c.reasoning_content->empty())
    output_.push_back(reasoning_item(*c.reasoning_content, "completed", output_.size()));
  if (!c.text.empty() || c.tool_calls.empty())
    output_.push_back(message_item(c.text, "completed", output_.size()));
  for (const ToolCall& call : c.tool_calls) output_.push_back(call_item(call, output_.size()));
  finish_reason_ = c.finish_reason;
  cached_prompt_tokens_ = c.cached_prompt_tokens;
  return dump(finish(prompt_tokens, completion_tokens));
}

std::string ResponsesReplyCodec::error_body(const ApiError& error) const {
  return error_json(error);
}

}  // namespace drift::server

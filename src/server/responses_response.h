// The OpenAI Responses API's shapes for what a generation produced (reply_codec.h): the response
// object ({"id": "resp_...", "object": "response", "created_at", "status": "completed" or
// "incomplete" (incomplete_details.reason "max_output_tokens"), "output": [reasoning?, message?,
// function_call...], "usage": {input_tokens, input_tokens_details.cached_tokens, output_tokens,
// total_tokens}, and the request's fields repeated}), and the typed SSE events a stream sends,
// each with its `event:` line and a sequence_number: response.created, response.in_progress, then
// per output item response.output_item.added, its parts' events (content_part.added,
// output_text.delta/.done, content_part.done for a message; reasoning_text.delta/.done for a
// reasoning item; function_call_arguments.delta/.done for a call), response.output_item.done, and
// last response.completed (or response.incomplete). Errors are OpenAI's shape.
//
// The engine's reply parts map to items: reasoning (a harmony model's analysis channel) to a
// reasoning item, content to a message item with one output_text part, each tool call to a
// function_call item (calls are read whole at the reply's end, so each call's arguments stream
// as one delta). An item opens at its first delta and closes when another kind starts.
//
// When the request asked to store it, the finished response is put in the ResponseStore with its
// conversation (the chain's input items and this response's output items), for GET and for a
// later request's previous_response_id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jinja/json.h"
#include "server/reply_codec.h"
#include "server/response_store.h"

namespace drift::server {

// What the codec needs of the request beyond the response's id and model.
struct ResponsesReplyContext {
  jinja::Json echo = jinja::Json::object();  // ResponsesRequest::echo
  // Null when the response is not stored (`store: false`).
  std::shared_ptr<ResponseStore> store;
  // The input items of the whole chain (a continued response's history, then its own input).
  jinja::Json input_items = jinja::Json::array();
  std::string instructions;
};

class ResponsesReplyCodec final : public ReplyCodec {
 public:
  ResponsesReplyCodec(ResponseMeta meta, ResponsesReplyContext context)
      : meta_(std::move(meta)), context_(std::move(context)) {}

  std::string_view tool_call_id_prefix() const override { return "call_"; }
  std::string stream_start(std::span<const std::string> echoes, int64_t prompt_tokens) override;
  std::string reasoning_delta(int32_t index, std::string_view text,
                              nlohmann::json logprobs) override;
  std::string content_delta(int32_t index, std::string_view text, nlohmann::json logprobs) override;
  std::string tool_calls(int32_t index, std::span<const ToolCall> calls) override;
  std::string choice_end(int32_t index, const ChoiceEnd& end, nlohmann::json logprobs) override;
  std::string stream_end(int64_t prompt_tokens, int64_t completion_tokens) override;
  std::string stream_error(const ApiError& error) override;
  std::string response(const std::vector<ChoiceResult>& choices, int64_t prompt_tokens,
                       int64_t completion_tokens) override;
  std::string error_body(const ApiError& error) const override;

 private:
  enum class Item { kNone, kReasoning, kMessage };
  // An SSE frame of event `type`, its data `fields` with "type" and the next sequence_number.
  std::string event(std::string_view type, jinja::Json fields);
  // Closes the open item unless it is of `kind`, then opens one of `kind` if none is open.
  std::string open_item(Item kind);
  std::string close_item();
  // The response object: `status`, the items so far, and usage when the generation has ended.
  jinja::Json response_object(std::string_view status, const jinja::Json* usage) const;
  // The finished response (status from how the reply ended), stored if the request asked.
  jinja::Json finish(int64_t prompt_tokens, int64_t completion_tokens);
  // Output items' ids: the response's own id's digits after the item kind's prefix, and the
  // item's index.
  std::string item_id(std::string_view prefix, size_t index) const;
  jinja::Json message_item(std::string text, std::string_view status, size_t index) const;
  jinja::Json reasoning_item(std::string text, std::string_view status, size_t index) const;
  jinja::Json call_item(const ToolCall& call, size_t index) const;

  ResponseMeta meta_;
  ResponsesReplyContext context_;
  int64_t sequence_ = 0;
  Item open_ = Item::kNone;
  std::string open_text_;                      // the open item's text so far
  jinja::Json output_ = jinja::Json::array();  // the closed items, in order
  std::string finish_reason_ = "stop";
  int64_t cached_prompt_tokens_ = 0;
};

}  // namespace drift::server

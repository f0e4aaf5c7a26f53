// One completion or chat request in flight: its n engine requests (choices), the text each has
// produced, and the response — whole JSON, or an SSE stream. The engine's output processor has
// cut the text at stop strings, read a harmony reply's channels and read the reply's tool calls
// (Request::tool_call_syntax); this only serializes (and gives each call its id). It lives
// on the I/O thread: engine events arrive on the engine's worker thread and are posted here, so no
// socket is ever touched by the engine.
//
// Ownership: the exchange's disconnect callback holds the generation until the response ends
// (then it lets go); a client that leaves drops every RequestHandle, which cancels the engine
// requests and frees their KV pages, whether they were queued or generating.
//
// n > 1 runs n engine requests over the same prompt, with seeds seed, seed+1, ... (each derived
// from its request id when no seed is given). The prompt is prefilled once per choice for now;
// sharing one prefill arrives with the prefix cache, which will match the common prompt pages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/openai_response.h"
#include "server/reply_codec.h"

namespace boost::asio {
class io_context;
}

namespace drift::server {

// What a finished generation reports, for the access log and the server's counters.
struct GenerationOutcome {
  int status = 200;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<double> ttft_seconds;  // first text sent (or first token, non-streaming)
  bool client_gone = false;
  bool cut = false;             // cancelled by the server (drain, abort, a killed session)
  int stop_string_matches = 0;  // choices the engine ended at a stop string
};

struct GenerationSpec {
  ResponseMeta meta;
  bool stream = false;
  bool include_usage = false;
  // One per choice, in index order: the engine request, and text to put first (echo). Usage
  // counts the prompt tokens once per distinct prompt, as OpenAI does: of the first choice of each
  // (the engine's count, known when submit returns).
  struct Choice {
    Request request;
    std::string echo;
    bool counts_prompt_tokens = true;
  };
  std::vector<Choice> choices;
  // The body fields of the choices' grammar and stop strings, named if the engine refuses them.
  std::string grammar_param = "response_format";
  std::string stop_param = "stop";
  // Set when the request asked for logprobs: the text of a token id, for the response.
  TokenTextFn token_text;
  // Chat with a harmony model: the engine reads each reply (Request::reply_format kHarmony) into
  // reasoning_content, content and tool calls; stop strings apply to the content.
  bool harmony = false;
  // The API shape the output is written in (reply_codec.h); OpenAI's, from `meta` and
  // `include_usage`, when none is given.
  std::shared_ptr<ReplyCodec> codec;
};

class Generation : public std::enable_shared_from_this<Generation> {
 public:
  using Done = std::function<void(const GenerationOutcome&)>;

  Generation(boost::asio::io_context& io, Engine& engine, std::shared_ptr<HttpExchange> exchange,
             GenerationSpec spec, Done done);
  // Submits every choice and watches for the client leaving.
  void start();

 private:
  struct ChoiceState {
    RequestHandle handle;
    std::string text;  // non-streaming: the whole text
    int64_t tokens = 0;
    std::optional<std::string> finish_reason;
    std::vector<TokenLogprobEntry> logprobs;  // every token's, in order
    size_t logprobs_sent = 0;                 // streaming: entries already in a chunk
    int64_t text_sent = 0;                    // streaming: bytes of text already sent
    std::vector<ToolCall> tool_calls;         // the engine's, from the finish event, with ids
    std::string reasoning;                    // non-streaming, harmony: the reasoning_content
    std::optional<std::string> stop_string;   // the stop string that ended the choice
    int64_t cached_prompt_tokens = 0;         // the engine's count, from the finish event
  };
  // The calls the engine read from the reply, each given an id in the codec's shape.
  void take_tool_calls(ChoiceState& c, std::vector<ParsedToolCall> calls);
  // Streaming: the logprobs not yet sent, as JSON (null when none are pending or wanted).
  nlohmann::json take_pending_logprobs(ChoiceState& c);

  void on_event(size_t index, TokenEvent event);
  void emit_text(size_t index, std::string text);
  void send_content(size_t index, std::string_view text);
  void emit_reasoning(size_t index, std::string_view text);
  void finish_choice(size_t index, ChoiceEnd end);
  void fail(const ApiError& error);
  void complete();
  void client_gone();
  void ensure_stream_started();
  // Sends a codec's frames (nothing when it gave none).
  void send(std::string frames);
  void end(int status);

  boost::asio::io_context& io_;
  Engine& engine_;
  std::shared_ptr<HttpExchange> exchange_;
  GenerationSpec spec_;
  Done done_;
  std::vector<ChoiceState> choices_;
  size_t finished_ = 0;
  bool stream_started_ = false;
  bool ended_ = false;
  int64_t prompt_tokens_ = 0;  // usage's prompt_tokens
  GenerationOutcome outcome_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace drift::server

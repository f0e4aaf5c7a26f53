#include "server/generation.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cmath>
#include <random>

#include "server/openai_reply_codec.h"
#include "server/rejection_error.h"

namespace drift::server {
namespace {

// The codec's prefix ("call_", "toolu_") and 24 random letters and digits, as OpenAI's and
// Anthropic's ids look; unique enough that a client can match its tool results to calls.
std::string new_tool_call_id(std::string_view prefix) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id += kAlphabet[random() % kAlphabet.size()];
  return id;
}

}  // namespace

Generation::Generation(boost::asio::io_context& io, Engine& engine,
                       std::shared_ptr<HttpExchange> exchange, GenerationSpec spec, Done done)
    : io_(io),
      engine_(engine),
      exchange_(std::move(exchange)),
      spec_(std::move(spec)),
      done_(std::move(done)),
      started_(std::chrono::steady_clock::now()) {
  if (!spec_.codec)
    spec_.codec = std::make_shared<OpenAIReplyCodec>(spec_.meta, spec_.include_usage);
}

void Generation::start() {
  auto self = shared_from_this();
  exchange_->on_disconnect([self] { self->client_gone(); });
  choices_.resize(spec_.choices.size());
  for (size_t i = 0; i < spec_.choices.size() && !ended_; ++i) {
    // Runs on the engine's worker thread (or here, for an immediate rejection): only hands the
    // event over to the I/O thread.
    auto on_event = [&io = io_, weak = weak_from_this(), i](TokenEvent event) {
      boost::asio::post(io, [weak, i, event = std::move(event)]() mutable {
        if (auto g = weak.lock()) g->on_event(i, std::move(event));
      });
    };
    choices_[i].handle = engine_.submit(std::move(spec_.choices[i].request), on_event);
    if (spec_.choices[i].counts_prompt_tokens) prompt_tokens_ += choices_[i].handle.prompt_tokens();
  }
  outcome_.prompt_tokens = prompt_tokens_;
}

void Generation::ensure_stream_started() {
  if (!spec_.stream || stream_started_) return;
  stream_started_ = true;
  exchange_->start_stream(200, spec_.codec->stream_content_type());
  std::vector<std::string> echoes;
  for (const GenerationSpec::Choice& c : spec_.choices) echoes.push_back(c.echo);
  send(spec_.codec->stream_start(echoes, prompt_tokens_));
}

void Generation::send(std::string frames) {
  if (!frames.empty()) exchange_->send_chunk(std::move(frames));
}

void Generation::on_event(size_t index, TokenEvent event) {
  if (ended_) return;
  ChoiceState& c = choices_[index];
  if (event.finish && (event.finish->reason == FinishReason::kRejected ||
                       event.finish->reason == FinishReason::kError ||
                       event.finish->reason == FinishReason::kCancelled)) {
    const Finish& f = *event.finish;
    if (f.reason == FinishReason::kRejected)
      return fail(error_for_rejection(
          f, {spec_.meta.chat ? "messages" : "prompt", spec_.grammar_param, spec_.stop_param}));
    if (f.reason == FinishReason::kCancelled) {
      // Cut by the server (shutdown, a killed session): the log counts what was generated.
      for (const ChoiceState& other : choices_)
        if (!other.finish_reason) outcome_.completion_tokens += other.tokens;
      outcome_.cut = true;
      return fail(
          unavailable(f.message.empty() ? "the request was cancelled by the server" : f.message));
    }
    return fail(internal_error("generation failed: " + f.message));
  }
  ensure_stream_started();
  if (event.token) ++c.tokens;
  if (event.token && event.logprobs && spec_.token_text)
    c.logprobs.push_back({*event.token, *event.logprobs});
  if (!outcome_.ttft_seconds && event.token) {
    outcome_.ttft_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    spec_.codec->first_token();
  }
  emit_reasoning(index, event.reasoning);
  emit_text(index, std::move(event.text));
  if (!event.finish) return;
  const Finish& f = *event.finish;
  if (f.stop_string) ++outcome_.stop_string_matches;
  take_tool_calls(c, std::move(event.tool_calls));
  finish_choice(index, {f.reason == FinishReason::kLength ? "length" : "stop", f.stop_string,
                        f.usage.completion_tokens, f.usage.cached_prompt_tokens});
}

void Generation::emit_reasoning(size_t index, std::string_view text) {
  if (text.empty()) return;
  ChoiceState& c = choices_[index];
  if (!spec_.stream) {
    c.reasoning += text;
    return;
  }
  send(spec_.codec->reasoning_delta(int32_t(index), text, take_pending_logprobs(c)));
}

nlohmann::json Generation::take_pending_logprobs(ChoiceState& c) {
  if (!spec_.token_text || c.logprobs_sent == c.logprobs.size()) return nullptr;
  auto pending = std::span<const TokenLogprobEntry>(c.logprobs).subspan(c.logprobs_sent);
  c.logprobs_sent = c.logprobs.size();
  return logprobs_json(spec_.meta.chat, pending, spec_.token_text, c.text_sent);
}

void Generation::emit_text(size_t index, std::string text) {
  // Logprobs of tokens whose text is still held back ride on a later chunk.
  if (text.empty()) return;
  ChoiceState& c = choices_[index];
  if (!spec_.stream) {
    c.text += text;
    return;
  }
  send_content(index, text);
}

void Generation::send_content(size_t index, std::string_view text) {
  if (text.empty()) return;
  ChoiceState& c = choices_[index];
  nlohmann::json logprobs = take_pending_logprobs(c);
  c.text_sent += int64_t(text.size());
  send(spec_.codec->content_delta(int32_t(index), text, std::move(logprobs)));
}

void Generation::take_tool_calls(ChoiceState& c, std::vector<ParsedToolCall> calls) {
  for (ParsedToolCall& call : calls)
    c.tool_calls.push_back({new_tool_call_id(spec_.codec->tool_call_id_prefix()),
                            std::move(call.name), std::move(call.arguments)});
}

void Generation::finish_choice(size_t index, ChoiceEnd end) {
  ChoiceState& c = choices_[index];
  std::string& reason = end.reason;
  // The engine's finish event carried the reply's calls, after the content it held back.
  if (!c.tool_calls.empty()) {
    if (spec_.stream) send(spec_.codec->tool_calls(int32_t(index), c.tool_calls));
    if (reason == "stop") reason = "tool_calls";
  }
  c.finish_reason = reason;
  c.stop_string = end.stop_string;
  c.tokens = end.completion_tokens;
  c.cached_prompt_tokens = end.cached_prompt_tokens;
  outcome_.completion_tokens += end.completion_tokens;
  if (spec_.stream) send(spec_.codec->choice_end(int32_t(index), end, take_pending_logprobs(c)));
  if (++finished_ == choices_.size()) complete();
}

void Generation::complete() {
  if (spec_.stream) {
    send(spec_.codec->stream_end(prompt_tokens_, outcome_.completion_tokens));
    exchange_->end_stream();
    return end(200);
  }
  std::vector<ChoiceResult> results;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const std::string& echo = spec_.choices[i].echo;
    nlohmann::json logprobs = nullptr;
    if (spec_.token_text)
      logprobs = logprobs_json(spec_.meta.chat, choices_[i].logprobs, spec_.token_text,
                               int64_t(echo.size()));
    ChoiceResult& r = results.emplace_back();
    r.index = int32_t(i);
    r.text = echo + choices_[i].text;
    r.finish_reason = *choices_[i].finish_reason;
    r.logprobs = std::move(logprobs);
    r.tool_calls = std::move(choices_[i].tool_calls);
    if (spec_.harmony) r.reasoning_content = std::move(choices_[i].reasoning);
    r.stop_string = std::move(choices_[i].stop_string);
    r.cached_prompt_tokens = choices_[i].cached_prompt_tokens;
  }
  exchange_->respond(200, "application/json",
                     spec_.codec->response(results, prompt_tokens_, outcome_.completion_tokens));
  end(200);
}

// Before the stream started: an HTTP error. After: the codec's error event(s) end the stream.
void Generation::fail(const ApiError& error) {
  if (stream_started_) {
    send(spec_.codec->stream_error(error));
    exchange_->end_stream();
  } else {
    HttpExchange::Headers headers;
    if (error.retry_after_seconds)
      headers.emplace_back("Retry-After", std::to_string(*error.retry_after_seconds));
    exchange_->respond(error.status, "application/json", spec_.codec->error_body(error), headers);
  }
  end(stream_started_ ? 200 : error.status);
}

void Generation::client_gone() {
  if (ended_) return;
  outcome_.client_gone = true;
  end(499);  // nginx's "client closed request", for the log only
}

void Generation::end(int status) {
  if (ended_) return;
  ended_ = true;
  outcome_.status = status;
  // Dropping the handles cancels whatever still runs (no-op for finished ones).
  for (ChoiceState& c : choices_) c.handle = RequestHandle();
  auto keep = shared_from_this();  // the disconnect callback may hold the last reference
  exchange_->on_disconnect(nullptr);
  if (done_) done_(outcome_);
}

}  // namespace drift::server

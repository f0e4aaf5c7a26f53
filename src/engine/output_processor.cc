#include "engine/output_processor.h"

#include <algorithm>

#include "util/utf8.h"

namespace drift {

Status validate_stop_strings(const std::vector<std::string>& stop) {
  // The messages name no field: each API calls it its own (stop, stop_sequences, options.stop),
  // and a server's error names that field beside them.
  if (stop.size() > kMaxStopStrings)
    return make_error("at most {} stop strings may be given, got {}", kMaxStopStrings, stop.size());
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty() || stop[i].size() > kMaxStopStringBytes)
      return make_error("each stop string must have 1 to {} bytes, stop string {} has {}",
                        kMaxStopStringBytes, i, stop[i].size());
    if (!is_valid_utf8(stop[i])) return make_error("stop string {} is not valid UTF-8", i);
  }
  return Status::Ok();
}

OutputProcessor::OutputProcessor(std::unique_ptr<TokenTextStream> text,
                                 std::vector<std::string> stop, ReplyReading reading)
    : text_(std::move(text)), parallel_tool_calls_(reading.parallel_tool_calls) {
  if (!stop.empty()) stop_.emplace(std::move(stop));
  if (reading.harmony) {
    harmony_.emplace(*reading.harmony);
    harmony_calls_ = reading.tool_call_syntax.has_value();
  } else if (reading.tool_call_syntax && *reading.tool_call_syntax != ToolCallSyntax::kHarmony) {
    tool_calls_.emplace(*reading.tool_call_syntax);
  }
}

Expected<bool> OutputProcessor::push(TokenId token, const std::optional<TokenLogprobs>& logprobs,
                                     bool stop_token, std::vector<TokenEvent>& ready) {
  // Rule: a token's event goes out with its text once no stop string can take that text back.
  ++pushed_tokens_;
  TokenEvent event;
  event.token = token;
  event.logprobs = logprobs;
  std::string text;
  if (!stop_token) {  // a stop token shows no text
    Expected<std::string> piece = text_->push(token);
    if (!piece.ok()) {  // the request ends with the error; its token still goes out, in order
      pending_.push_back({std::move(event), content_bytes_});
      return piece.error();
    }
    text = repair_utf8(*piece);
  }
  if (harmony_) {  // the markers, stop tokens among them, tell the reply's messages apart
    HarmonyReply::Delta delta = harmony_->push(token, text);
    event.reasoning = std::move(delta.reasoning);
    text = std::move(delta.content);
  }
  pending_.push_back({std::move(event), content_bytes_});
  add_content(std::move(text), ready);
  return stopped_;
}

void OutputProcessor::add_content(std::string content, std::vector<TokenEvent>& ready) {
  content_bytes_ += content.size();
  if (!stop_) {
    pending_.back().event.text = std::move(content);
    return release(std::nullopt, ready);
  }
  StopStringMatcher::Output out = stop_->push(content);
  pending_.back().event.text = std::move(content);
  if (out.stopped) {
    matched_stop_ = std::move(out.matched);
    return cut_at(released_bytes_ + out.text.size(), ready);
  }
  released_bytes_ += out.text.size();
  release(released_bytes_, ready);
}

void OutputProcessor::release(std::optional<size_t> released, std::vector<TokenEvent>& ready) {
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    if (released && p.start + p.event.text.size() > *released) return;
    emit(std::move(p.event), ready);
    pending_.pop_front();
  }
}

void OutputProcessor::cut_at(size_t at, std::vector<TokenEvent>& ready) {
  // Rule: what a token wrote before the stop string stays (cut there); a token that wrote
  // nothing before it shows nothing, not even its logprobs, and leaves the session's history.
  stopped_ = true;
  size_t dropped = 0;
  for (Pending& p : pending_) {
    if (p.start < at) {
      p.event.text.resize(std::min(p.event.text.size(), at - p.start));
    } else {
      p.event.text.clear();
      p.event.reasoning.clear();
      p.event.logprobs.reset();
      if (p.event.token) ++dropped;
    }
    emit(std::move(p.event), ready);
  }
  pending_.clear();
  kept_tokens_ = pushed_tokens_ - dropped;
}

void OutputProcessor::finish(std::vector<TokenEvent>& ready) {
  // Rule: the end releases everything held back; bytes that never became a character are
  // U+FFFD; the last event is the one that carries the finish.
  if (!stopped_) {
    std::string tail = repair_utf8(text_->finish());
    std::string reasoning;
    if (harmony_) {
      HarmonyReply::Delta delta = harmony_->finish();
      reasoning = std::move(delta.reasoning);
      tail += delta.content;
    }
    if (!tail.empty() || !reasoning.empty()) {
      pending_.push_back({TokenEvent{}, content_bytes_});
      pending_.back().event.reasoning = std::move(reasoning);
      add_content(std::move(tail), ready);
    }
    release(std::nullopt, ready);  // what a stop string could still have started
  }
  if (ready.empty()) ready.emplace_back();
  finish_tool_calls(ready);
}

void OutputProcessor::emit(TokenEvent event, std::vector<TokenEvent>& ready) {
  if (tool_calls_ && !event.text.empty()) event.text = tool_calls_->push(event.text);
  ready.push_back(std::move(event));
}

void OutputProcessor::finish_tool_calls(std::vector<TokenEvent>& ready) {
  // Rule: the calls go on the last event, after any content the reader held back; without
  // parallel tool calls, only the first (for every reply format, here only).
  TokenEvent& last = ready.back();
  if (tool_calls_) {
    last.text += tool_calls_->finish();
    last.tool_calls = tool_calls_->tool_calls();
  } else if (harmony_calls_) {
    last.tool_calls = harmony_->tool_calls();
  }
  if (!parallel_tool_calls_ && last.tool_calls.size() > 1) last.tool_calls.resize(1);
}

}  // namespace drift

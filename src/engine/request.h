// What a caller submits to the engine (Request) and what it gets back, event by event
// (TokenEvent), ending with exactly one event that carries the Finish.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "chat/tool_call_syntax.h"
#include "jinja/json.h"
#include "scheduler/sequence_state.h"
#include "util/error.h"
#include "util/sampling_params.h"
#include "util/token_constraint.h"

namespace drift {

// Identifies a request in the engine, its events and the progress log. Ids from 2^63 up are
// assigned by the engine to requests that give none.
using RequestId = SeqId;
inline constexpr RequestId kFirstEngineAssignedId = RequestId{1} << 63;

// A prompt as text, tokenized by the engine's tokenizer on the submitting thread.
struct TextPrompt {
  std::string text;
  // Add the BOS/EOS tokens the model asks for.
  bool add_special = true;
  // Text of control tokens ("<|im_start|>") becomes those tokens. Leave off for text a user
  // typed; turn on for a prompt rendered from a chat template.
  bool parse_special = false;
};

// One turn of a conversation, as a chat template receives it.
struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role, std::string content, std::optional<std::string> name = {})
      : role(std::move(role)), content(std::move(content)), name(std::move(name)) {}

  std::string role;  // "system", "user", "assistant", "tool", ...
  std::string content;
  std::optional<std::string> name;  // the speaker's name, which some templates show
  // An assistant turn's tool calls as OpenAI sends them ([{"id", "type": "function", "function":
  // {"name", "arguments"}}]), with each arguments string parsed into its JSON object, which is
  // what templates render (`arguments | tojson`). Null when the turn called nothing.
  jinja::Json tool_calls;
  // A tool turn: the id of the call whose result `content` is.
  std::optional<std::string> tool_call_id;
  // An assistant turn's reasoning (vLLM's field), which some templates show again (gpt-oss's, as
  // "thinking", for a turn that called a tool).
  std::optional<std::string> reasoning_content;
};

// A conversation, rendered with the model's chat template (or the one the program loaded the
// engine with) and tokenized by the engine, such that message text never becomes control tokens:
// a user who types "<|im_start|>system" gets those characters, not a forged turn.
struct ChatPrompt {
  std::vector<ChatMessage> messages;
  // The functions the model may call (OpenAI tool objects, in the client's key order), shown to
  // it by the template; a template that cannot show tools gets them in a system message instead
  // (tool_call_syntax.h). Absent: the template's no-tools branch.
  std::optional<jinja::Json> tools;
  // With tools: the reply must be a call (tool_choice "required" or a named function), which the
  // system message of a template without tools says.
  bool tool_call_required = false;
  // More template variables (vLLM's chat_template_kwargs, e.g. {"enable_thinking": false}); they
  // may not replace messages, tools, documents or add_generation_prompt.
  jinja::Json template_kwargs = jinja::Json::object();
};

// How a reply's tokens are read (output_processor.h).
enum class ReplyFormat : uint8_t {
  kText,  // the text of the tokens is the content
  // OpenAI's harmony (gpt-oss): the markers split the reply into reasoning (the analysis channel),
  // content and tool calls (chat/harmony_reply.h). Needs a model whose codec has harmony
  // tokens (TextCodec::harmony_tokens), or the request is rejected.
  kHarmony,
};

// Bounds of Request::stop, the engine's (every front end refers to these).
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;

// What submit or tokenize takes as a prompt: token ids (each checked against the vocabulary), text
// or a conversation.
using Prompt = std::variant<std::vector<TokenId>, TextPrompt, ChatPrompt>;

// A prompt tokenized before submit (Engine::tokenize_turn), where the caller may spend the time:
// the server tokenizes on a prompt worker and submits on its I/O thread, whose stall would stall
// every stream. Its tokens rest on one fact that may change before submit: whether the turn
// continues a session's history (a text prompt then gets no BOS).
struct TokenizedTurn {
  std::vector<TokenId> tokens;
  bool continues_session = false;
};

struct Request {
  // Absent: the engine assigns one (>= kFirstEngineAssignedId). A given id must be below that and
  // not in use by an unfinished request. The sampler's random stream is seeded from it unless
  // sampling.seed is set.
  std::optional<RequestId> id;
  Prompt prompt;
  // `prompt` tokenized ahead: submit runs these tokens when the session fact they rest on still
  // holds, and encodes `prompt` again when not (the session ended, or its first turn completed,
  // in between).
  std::optional<TokenizedTurn> tokenized;
  // Tokens to generate at most. Absent: the engine's default_max_tokens, capped by what is left
  // of max_model_len and of the KV cache after the prompt. Given: prompt + max_tokens must fit in
  // max_model_len, or the request is rejected.
  std::optional<int32_t> max_tokens;
  // Temperature, top-k/p, penalties, seed, stop_token_ids, ignore_eos. Each field left unset
  // takes the engine's default (EngineSetup::sampling, sampling_defaults.h).
  SamplingSettings sampling;
  // Constrained decoding: every generated token keeps the output a prefix of the grammar's
  // language, and the request stops (finish "stop") once the output is complete. Compiled when
  // submitted; a grammar that does not compile is rejected (kInvalidGrammar) with the reason.
  std::optional<GrammarSpec> grammar;
  // `grammar` compiled ahead (TextCodec::compile_grammar), by a caller that must not spend a
  // compile's time where it submits: the server submits on its I/O thread, and a hostile
  // grammar's compile-time checks take up to GrammarLimits' budget, which there would stall every
  // stream. Each sequence submitted with it starts from its own clone (copies of a request, such
  // as its n choices, share it; it is never advanced), and `grammar` is not compiled again.
  std::shared_ptr<const TokenConstraint> compiled_grammar;
  // Larger is admitted first under the priority policy, and preempted last.
  int32_t priority = 0;
  // Continue (or open) this conversation session (session_store.h): the prompt becomes the
  // session's history — every earlier completed turn's prompt and generated tokens, a final
  // stop token included — followed by this request's prompt, and the history's KV is reused
  // through the prefix cache. A text prompt that continues a session is tokenized without BOS/EOS
  // (add_special is ignored). One turn at a time per session; a turn that does not complete
  // (cancelled, error, rejected) leaves the history unchanged. Over HTTP, the body field
  // "session_id".
  std::optional<std::string> session_id;
  // Not kNone: an embedding request. The prompt (which may fill max_model_len) is prefilled, as
  // generation is, in the same steps; nothing is sampled, and its one event carries the pooled,
  // L2-normalised final hidden state (TokenEvent::embedding) with finish reason kStop.
  // max_tokens and session_id must be unset; sampling is not read.
  PoolingMode pooling = PoolingMode::kNone;
  // KV-Compress: each KV head keeps at most this fraction (0, 1] of the positions once the
  // sequence is long (design-notes "KV-Compress"). Absent: the engine's default (--kv-keep).
  // Over HTTP, the body field "kv_keep".
  std::optional<double> kv_keep;
  // Stop strings: the reply's text (its content, for kHarmony) ends before the first one that
  // appears, and the request finishes "stop" (Finish::stop_string says which). At most
  // kMaxStopStrings, each non-empty valid UTF-8 of at most kMaxStopStringBytes. The events never
  // carry the stop string, nor the logprobs of tokens that wrote only it (output_processor.h).
  std::vector<std::string> stop;
  ReplyFormat reply_format = ReplyFormat::kText;
  // Set (a chat with tools): the reply is read for tool calls, which go on its finish event
  // (TokenEvent::tool_calls) and never into its text. A kText reply is read in this syntax
  // (chat/tool_call_reply.h: content streams while text that may be a call waits for the end); a
  // kHarmony reply's calls are its messages to functions.NAME, whatever the syntax says (and the
  // syntax kHarmony on a kText reply reads none: a model without harmony's marker tokens is read
  // as text, as parse_tool_calls reads it). Stop strings apply first: a call is read from the
  // text they left. Absent: no calls are reported.
  std::optional<ToolCallSyntax> tool_call_syntax;
  bool parallel_tool_calls = true;  // false: only a reply's first call is kept
};

// Most choices (OpenAI's and vLLM's n) one request may ask for, in every front end.
inline constexpr int32_t kMaxChoices = 16;

// The engine requests of `n` choices of `request`: copies that differ only by seed — seed,
// seed + 1, ... when the request gives one (so each choice is reproducible alone), else each
// derives its own from its request id. The one fan-out of every front end (the server, Python).
// An error naming "n" when n is outside [1, kMaxChoices]; a request with an id or a session
// cannot be copied (ids must differ; a session takes one turn at a time) unless n is 1.
Expected<std::vector<Request>> fan_out_choices(const Request& request, int32_t n);

struct TokenUsage {
  int32_t prompt_tokens = 0;      // of an embedding request: the tokens it pooled
  int32_t completion_tokens = 0;  // generated tokens, a final stop token included
  // Of prompt_tokens, those whose KV the prefix cache already held when the request was first
  // admitted (not computed again): a continued conversation's earlier turns.
  int32_t cached_prompt_tokens = 0;
};

// Seconds since submit. Absent when the request never got that far.
struct RequestTimings {
  std::optional<double> queue_seconds;  // until its first step was scheduled
  std::optional<double> time_to_first_token_seconds;
  double end_to_end_seconds = 0;  // until the finish event
};

// Why the engine refused a request (finish reason kRejected), so that a caller can act on the kind
// (a server maps it to an HTTP status) without reading the message.
enum class RejectReason : uint8_t {
  kInvalidRequest,          // a field other than the prompt: id, sampling, max_tokens
  kPriorityNotScheduled,    // a priority was given, but the engine does not schedule by priority
  kInvalidPrompt,           // the prompt cannot be tokenized (e.g. not a conversation)
  kChatTemplateRefused,     // the chat template refused the conversation (its raise_exception)
  kChatTemplateFailed,      // the server's chat template is broken: the operator's error, not
                            // the request's (a type error, an undefined method, ... in it)
  kInvalidGrammar,          // the grammar (Request::grammar) does not compile
  kInvalidLogitBias,        // a logit_bias token id is outside the vocabulary
  kInvalidStop,             // stop strings beyond kMaxStopStrings / kMaxStopStringBytes, or empty
  kEmptyPrompt,             // the prompt has no tokens
  kTokenOutsideVocabulary,  // a prompt token id is negative or >= the vocabulary size
  kPromptTooLong,           // the prompt alone fills max_model_len
  kMaxTokensTooLong,        // prompt + max_tokens exceed max_model_len
  kExceedsKvCache,          // prompt + max new tokens can never fit in the KV cache
  kSessionBusy,             // a turn of the session is still running
  kSessionLimit,            // a session cap (sessions open, tokens held) is reached: retry later
  kOverloaded,              // too many requests wait, or the predicted wait is too long: retry
  kShuttingDown,            // the engine takes no more requests
  kUnhealthy,               // the executor failed for good
};
std::string_view reject_reason_name(RejectReason reason);
// The refusal for a prompt that could not be encoded: the chat template's error kind
// (jinja/error_kind.h) tells a conversation the template refuses or outgrows from a template
// that is broken; anything else is kInvalidPrompt.
RejectReason reject_reason_for_prompt(const Error& error);

struct Finish {
  FinishReason reason = FinishReason::kStop;
  // Set exactly when reason is kRejected.
  std::optional<RejectReason> reject_reason;
  // Why, for kError and kRejected (a message a user can act on); empty otherwise, or for
  // kCancelled the cause when the engine cancelled it (shutdown).
  std::string message;
  TokenUsage usage;
  RequestTimings timings;
  // kStop because a stop string (Request::stop) appeared: that string.
  std::optional<std::string> stop_string;
  // kRejected because the engine is overloaded: seconds after which a retry is predicted to be
  // admitted in time (from the predicted time to first token, or 1 for a full queue). A server
  // sends it as Retry-After.
  std::optional<double> retry_after_seconds;
};

struct TokenEvent {
  // A newly generated token. A stop token (EOS/EOG or one of stop_token_ids) is reported here
  // with the finish, but contributes no text.
  std::optional<TokenId> token;
  // Text that became final with this event: always valid UTF-8, never half a character (bytes
  // of an incomplete character are held back; at the end, ones that never completed become
  // U+FFFD). The deltas of a request concatenate to the decode of its generated tokens, up to
  // its first stop string (less its tool calls' text, when it is read for them). A token's text
  // goes out with its own event, once no stop string can take it back; the finish event may carry
  // text of no token (bytes completed at the end).
  std::string text;
  // A kHarmony reply's reasoning (its analysis channel) that became final; `text` is its content.
  std::string reasoning;
  // The token's log-probabilities, when the request's sampling.logprobs asked for them (absent
  // for a token that wrote only a stop string).
  std::optional<TokenLogprobs> logprobs;
  // An embedding request's vector (one float per hidden unit of the model, unit L2 norm), on its
  // finish event.
  std::vector<float> embedding;
  // The reply's complete tool calls (Request::tool_call_syntax), on its finish event.
  std::vector<ParsedToolCall> tool_calls;
  // Set on the request's last event, exactly once.
  std::optional<Finish> finish;
};

}  // namespace drift

// Conversation sessions: a named token history that each turn continues. A turn's prompt is the
// session's history followed by the turn's input; when the turn completes, its generated tokens
// are appended, so the next turn's prompt starts with everything the model saw and said. The
// KV of that history is reused through the prefix cache (TurboMind's "cache of KV caches"): if
// its pages were evicted meanwhile, only the token ids remain here and they are prefilled again
// — the caller sees a slower first token, never a different answer.
//
// One turn at a time per session. A turn that does not complete (cancelled, error, rejected)
// leaves the history as it was before it. A session idle for longer than idle_ttl_seconds is
// gone: exactly so for the session a turn names; all of them are swept at most every quarter of
// the TTL (at most 1 s) when turns start or sessions are counted, and at once before a cap
// refuses a turn. Caps on the number of
// sessions and on the tokens they hold reject a new turn with a clear error; they never drop
// another session's history to make room.
//
// Thread-safe: turns start on submitting threads and end on the engine's worker thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "engine/request_stream.h"
#include "util/error.h"
#include "util/function_ref.h"

namespace drift {

struct SessionConfig {
  // Sessions open at once; a turn that would open one more is rejected.
  int32_t max_sessions = 256;
  // Token ids held by all sessions together: histories, plus for each running turn its input
  // and max_tokens (its worst case), so a completing turn always has room. 4 Mi tokens = 16 MiB.
  int64_t max_total_tokens = int64_t{1} << 22;
  // A session with no turn for this long is dropped with its history.
  double idle_ttl_seconds = 600;

  // The error names the field ("sessions.max_sessions ...").
  Status validate() const;
};

// Longest session id accepted (bytes).
inline constexpr size_t kMaxSessionIdBytes = 256;

// Session id and history, for keeping sessions across a restart (session_file.h).
using SessionHistories = std::vector<std::pair<std::string, std::vector<TokenId>>>;

struct SessionStats {
  int32_t open = 0;             // sessions now
  int64_t tokens = 0;           // held now, running turns' worst case included
  uint64_t expired = 0;         // dropped after idle_ttl_seconds
  uint64_t rejected_turns = 0;  // turns refused: a cap, or a turn already running
};

class SessionStore {
 public:
  using Clock = std::chrono::steady_clock;

  explicit SessionStore(const SessionConfig& config) : config_(config) {}

  // Sizes a turn: given its prompt (history + input), returns the max_new_tokens it may
  // generate, or why it cannot run. Called with the store locked.
  using SizeTurn = FunctionRef<Expected<int32_t>(std::span<const TokenId> prompt)>;

  // Why a turn was refused, for callers that answer differently (a busy session is a conflict
  // with its state; a cap is capacity that frees up).
  enum class Refusal { kInvalidId, kBusy, kCap, kSizing };

  // Starts a turn of session `id` (opening the session if it does not exist) by request
  // `request`, whose events go to `stream`: returns the prompt, history followed by `input`.
  // Errors: an invalid id, a turn of the session still running, `size_turn`'s error, or a cap
  // (with the sizes and what to do); `why`, when given, is set to which.
  Expected<std::vector<TokenId>> begin_turn(const std::string& id, RequestId request,
                                            std::weak_ptr<RequestStream> stream,
                                            std::span<const TokenId> input, SizeTurn size_turn,
                                            Clock::time_point now, Refusal* why = nullptr);
  // Whether session `id` exists with a non-empty history (so a turn continues it).
  bool has_history(const std::string& id, Clock::time_point now);
  // Ends the turn of `request`: if it `completed`, `generated` is appended to the history;
  // otherwise the history is as before the turn. Ignored if the session was ended meanwhile
  // (or its id reused by a new session).
  void end_turn(const std::string& id, RequestId request, std::span<const TokenId> generated,
                bool completed, Clock::time_point now);
  // Drops session `id` and its history. Returns the stream of its running turn, if any (to
  // cancel it, for a kill). Error if there is no such session.
  Expected<std::shared_ptr<RequestStream>> end(const std::string& id);

  // The history of session `id` (a copy; for tests and tools). nullopt if there is none (or it
  // has expired).
  std::optional<std::vector<TokenId>> history(const std::string& id, Clock::time_point now) const;
  SessionStats stats(Clock::time_point now);

  // Every live session's history (a running turn's input excluded), to save at shutdown.
  SessionHistories histories(Clock::time_point now) const;
  // Opens idle sessions with these histories, last used `now`, as far as the caps allow (an id
  // already open, empty or too long is skipped). Returns how many were opened.
  int32_t restore(const SessionHistories& histories, Clock::time_point now);

 private:
  struct Session {
    std::vector<TokenId> tokens;  // history, then the running turn's input
    size_t history_len = 0;       // tokens before the running turn's input
    std::optional<RequestId> running;
    std::weak_ptr<RequestStream> stream;
    int64_t reserved = 0;  // the running turn's max_new_tokens, counted in total_tokens_
    Clock::time_point last_used;
  };

  int64_t held(const Session& s) const { return int64_t(s.tokens.size()) + s.reserved; }
  bool expired(const Session& s, Clock::time_point now) const;
  // mutex_ held. Drops every expired session: always with `force`, else at most once per sweep
  // interval (a quarter of the TTL, at most 1 s), so that frequent calls stay O(1).
  void expire_idle(Clock::time_point now, bool force);
  // mutex_ held. The session `id` unless it has expired (then it is dropped): exact TTL for the
  // session a caller names, whatever the sweep interval.
  Session* find_live(const std::string& id, Clock::time_point now);

  const SessionConfig config_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Session> sessions_;
  int64_t total_tokens_ = 0;  // sum of held() over sessions
  Clock::time_point next_sweep_{};
  uint64_t expired_ = 0;
  uint64_t rejected_turns_ = 0;
};

}  // namespace drift

#include "engine/session_store.h"

#include <algorithm>
#include <cmath>

namespace drift {

Status SessionConfig::validate() const {
  if (max_sessions < 1 || max_sessions > (1 << 20))
    return make_error("sessions.max_sessions must be in [1, 1048576], got {}", max_sessions);
  if (max_total_tokens < 1 || max_total_tokens > (int64_t{1} << 32))
    return make_error("sessions.max_total_tokens must be in [1, 2^32], got {}", max_total_tokens);
  if (!std::isfinite(idle_ttl_seconds) || idle_ttl_seconds <= 0)
    return make_error("sessions.idle_ttl_seconds must be a finite number > 0, got {}",
                      idle_ttl_seconds);
  return Status::Ok();
}

bool SessionStore::expired(const Session& s, Clock::time_point now) const {
  // Rule: a session without a running turn, unused for longer than the TTL, is dropped.
  return !s.running && now - s.last_used > std::chrono::duration<double>(config_.idle_ttl_seconds);
}

SessionStore::Session* SessionStore::find_live(const std::string& id, Clock::time_point now) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  if (!expired(it->second, now)) return &it->second;
  total_tokens_ -= held(it->second);
  ++expired_;
  sessions_.erase(it);
  return nullptr;
}

void SessionStore::expire_idle(Clock::time_point now, bool force) {
  if (!force && now < next_sweep_) return;
  next_sweep_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                          std::min(1.0, config_.idle_ttl_seconds / 4)));
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const Session& s = it->second;
    if (expired(s, now)) {
      total_tokens_ -= held(s);
      ++expired_;
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

Expected<std::vector<TokenId>> SessionStore::begin_turn(const std::string& id, RequestId request,
                                                        std::weak_ptr<RequestStream> stream,
                                                        std::span<const TokenId> input,
                                                        SizeTurn size_turn, Clock::time_point now,
                                                        Refusal* why) {
  // Rule: a turn starts only if the session is idle, the prompt can run and the caps hold after
  // idle sessions expire; nothing changes otherwise.
  auto refuse = [why](Refusal kind) {
    if (why) *why = kind;
  };
  if (id.empty() || id.size() > kMaxSessionIdBytes) {
    refuse(Refusal::kInvalidId);
    return make_error("session_id must have 1 to {} bytes, got {}", kMaxSessionIdBytes, id.size());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  expire_idle(now, /*force=*/false);
  Session* existing = find_live(id, now);
  const bool is_new = existing == nullptr;
  if (!is_new && existing->running) {
    ++rejected_turns_;
    refuse(Refusal::kBusy);
    return make_error(
        "session {} has a turn running (request {}): wait for it to finish, or kill the session",
        id, *existing->running);
  }
  if (is_new && int32_t(sessions_.size()) >= config_.max_sessions)
    expire_idle(now, /*force=*/true);  // a cap counts only live sessions
  if (is_new && int32_t(sessions_.size()) >= config_.max_sessions) {
    ++rejected_turns_;
    refuse(Refusal::kCap);
    return make_error(
        "too many sessions: all {} (sessions.max_sessions) are open; end one, or wait for an idle "
        "one to expire after {} s",
        config_.max_sessions, config_.idle_ttl_seconds);
  }
  std::vector<TokenId> prompt;
  if (!is_new) prompt = existing->tokens;
  prompt.insert(prompt.end(), input.begin(), input.end());
  Expected<int32_t> max_new = size_turn(prompt);
  if (!max_new.ok()) {
    refuse(Refusal::kSizing);
    return max_new.error();
  }

  const int64_t before = is_new ? 0 : held(*existing);
  const int64_t after = int64_t(prompt.size()) + *max_new;
  if (total_tokens_ - before + after > config_.max_total_tokens)
    expire_idle(now, /*force=*/true);  // a cap counts only live sessions
  if (total_tokens_ - before + after > config_.max_total_tokens) {
    ++rejected_turns_;
    refuse(Refusal::kCap);
    return make_error(
        "session token cap: this turn needs up to {} tokens ({} prompt + {} max_tokens), but "
        "sessions hold {} of {} (sessions.max_total_tokens); end a session or lower max_tokens",
        after, prompt.size(), *max_new, total_tokens_ - before, config_.max_total_tokens);
  }
  Session& s = is_new ? sessions_[id] : *existing;
  s.history_len = s.tokens.size();
  s.tokens.insert(s.tokens.end(), input.begin(), input.end());
  s.running = request;
  s.stream = std::move(stream);
  s.reserved = *max_new;
  s.last_used = now;
  total_tokens_ += after - before;
  return prompt;
}

bool SessionStore::has_history(const std::string& id, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Session* s = find_live(id, now);
  return s != nullptr && !s->tokens.empty();
}

void SessionStore::end_turn(const std::string& id, RequestId request,
                            std::span<const TokenId> generated, bool completed,
                            Clock::time_point now) {
  // Rule: a completed turn appends what it generated; any other end restores the history.
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.running != request) return;
  Session& s = it->second;
  total_tokens_ -= held(s);
  if (completed) {
    // At most max_new_tokens were generated, within the reserved worst case.
    s.tokens.insert(s.tokens.end(), generated.begin(), generated.end());
  } else if (s.history_len == 0) {
    sessions_.erase(it);  // its first turn failed: nothing to continue
    return;
  } else {
    s.tokens.resize(s.history_len);
  }
  s.history_len = s.tokens.size();
  s.running.reset();
  s.stream.reset();
  s.reserved = 0;
  s.last_used = now;
  total_tokens_ += held(s);
}

Expected<std::shared_ptr<RequestStream>> SessionStore::end(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return make_error("no session {}", id);
  std::shared_ptr<RequestStream> running = it->second.stream.lock();
  total_tokens_ -= held(it->second);
  sessions_.erase(it);
  return running;
}

std::optional<std::vector<TokenId>> SessionStore::history(const std::string& id,
                                                          Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || expired(it->second, now)) return std::nullopt;
  const Session& s = it->second;
  return std::vector<TokenId>(s.tokens.begin(), s.tokens.begin() + std::ptrdiff_t(s.history_len));
}

SessionHistories SessionStore::histories(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  SessionHistories out;
  for (const auto& [id, s] : sessions_) {
    if (expired(s, now) || s.history_len == 0) continue;
    out.emplace_back(id, std::vector<TokenId>(s.tokens.begin(),
                                              s.tokens.begin() + std::ptrdiff_t(s.history_len)));
  }
  return out;
}

int32_t SessionStore::restore(const SessionHistories& histories, Clock::time_point now) {
  // Rule: restored sessions obey the caps like new ones; they never displace an open session.
  std::lock_guard<std::mutex> lock(mutex_);
  int32_t opened = 0;
  for (const auto& [id, tokens] : histories) {
    if (id.empty() || id.size() > kMaxSessionIdBytes || tokens.empty() || sessions_.contains(id))
      continue;
    if (int32_t(sessions_.size()) >= config_.max_sessions ||
        total_tokens_ + int64_t(tokens.size()) > config_.max_total_tokens)
      break;
    Session& s = sessions_[id];
    s.tokens = tokens;
    s.history_len = tokens.size();
    s.last_used = now;
    total_tokens_ += held(s);
    ++opened;
  }
  return opened;
}

SessionStats SessionStore::stats(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  expire_idle(now, /*force=*/false);
  return SessionStats{int32_t(sessions_.size()), total_tokens_, expired_, rejected_turns_};
}

}  // namespace drift

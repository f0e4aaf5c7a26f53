#include "engine/session_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "kv/kv_digest.h"

namespace drift {
namespace {

// "DRIFTSES", version, count, then per session: id length, id, token count, tokens; then the
// XXH3-64 of every byte before it.
constexpr char kMagic[8] = {'D', 'R', 'I', 'F', 'T', 'S', 'E', 'S'};
constexpr uint32_t kVersion = 1;

template <typename T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Reads sizeof(T) bytes at `at`; false past the end.
template <typename T>
bool take(const std::string& in, size_t& at, T& value) {
  if (in.size() - at < sizeof(T)) return false;
  std::memcpy(&value, in.data() + at, sizeof(T));
  at += sizeof(T);
  return true;
}

}  // namespace

Status save_session_histories(const std::string& path, const SessionHistories& histories) {
  std::string bytes(kMagic, sizeof(kMagic));
  put(bytes, kVersion);
  put(bytes, uint32_t(histories.size()));
  for (const auto& [id, tokens] : histories) {
    put(bytes, uint32_t(id.size()));
    bytes += id;
    put(bytes, uint64_t(tokens.size()));
    bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(TokenId));
  }
  put(bytes, kv_checksum({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}));
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out.good()) return make_error("sessions: cannot write '{}'", temp);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0)
    return make_error("sessions: cannot rename '{}': {}", temp, std::strerror(errno));
  return Status::Ok();
}

Expected<SessionHistories> load_session_histories(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return SessionHistories{};
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto damaged = [&] { return make_error("sessions: '{}' is damaged; starting without it", path); };
  if (bytes.size() < sizeof(kMagic) + 16 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return damaged();
  const size_t body = bytes.size() - sizeof(uint64_t);
  uint64_t checksum = 0;
  std::memcpy(&checksum, bytes.data() + body, sizeof(checksum));
  if (checksum != kv_checksum({reinterpret_cast<const uint8_t*>(bytes.data()), body}))
    return damaged();
  const std::string content = bytes.substr(0, body);
  size_t at = sizeof(kMagic);
  uint32_t version = 0, count = 0;
  if (!take(content, at, version) || version != kVersion || !take(content, at, count))
    return damaged();
  SessionHistories out;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t id_len = 0;
    uint64_t n = 0;
    if (!take(content, at, id_len) || content.size() - at < id_len) return damaged();
    std::string id = content.substr(at, id_len);
    at += id_len;
    if (!take(content, at, n) || (content.size() - at) / sizeof(TokenId) < n) return damaged();
    std::vector<TokenId> tokens(n);
    std::memcpy(tokens.data(), content.data() + at, n * sizeof(TokenId));
    at += n * sizeof(TokenId);
    out.emplace_back(std::move(id), std::move(tokens));
  }
  if (at != content.size()) return damaged();
  return out;
}

}  // namespace drift

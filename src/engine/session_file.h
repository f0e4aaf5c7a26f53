// Sessions across restarts: the histories of SessionStore in one file beside the KV disk tier's
// pages (DIR/<fingerprint>/sessions: token ids belong to one model), so that a conversation
// continues after a restart and its prefix comes back warm through the tier. The file is written
// whole or not at all (temp file + rename) and carries an XXH3 checksum; a damaged one is
// refused, never half read.
#pragma once

#include <string>

#include "engine/session_store.h"
#include "util/error.h"

namespace drift {

Status save_session_histories(const std::string& path, const SessionHistories& histories);
// The histories in `path`; none if it does not exist. Error: a damaged or foreign file.
Expected<SessionHistories> load_session_histories(const std::string& path);

}  // namespace drift

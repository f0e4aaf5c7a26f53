// Server-Sent Events framing as OpenAI streams it: each event is one `data: <json>` line and a
// blank line; the stream ends with `data: [DONE]`. Anthropic's streams name each event's type in
// an `event:` line before its data, and end with their own message_stop event. JSON dumped on one
// line never contains a raw newline (nlohmann escapes them in strings), so one data line always
// holds a whole event.
#pragma once

#include <string>
#include <string_view>

namespace drift::server {

std::string sse_event(std::string_view json);
std::string sse_done();
// "event: <name>\ndata: <json>\n\n".
std::string sse_named_event(std::string_view name, std::string_view json);

}  // namespace drift::server

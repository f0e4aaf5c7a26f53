// The web page's files: which path serves which file, with what headers, and revalidation.
#include "server/web_ui.h"

#include <gtest/gtest.h>

#include "fake_exchange.h"

namespace drift::server {
namespace {

TEST(WebUi, PathsMapToTheEmbeddedFiles) {
  const EmbeddedFile* chat = find_web_file("/");
  ASSERT_NE(chat, nullptr);
  EXPECT_EQ(chat->name, "chat.html");
  EXPECT_NE(chat->bytes.find("/web/chat.js"), std::string_view::npos);
  ASSERT_NE(find_web_file("/engine"), nullptr);
  EXPECT_EQ(find_web_file("/engine")->name, "engine.html");
  for (std::string_view name : {"chat.js", "engine.js", "markdown.js", "common.js", "style.css"}) {
    const EmbeddedFile* file = find_web_file(std::string("/web/") + std::string(name));
    ASSERT_NE(file, nullptr) << name;
    EXPECT_FALSE(file->bytes.empty());
    EXPECT_EQ(file->etag.size(), 16u);
  }
  // Pages only by their own paths; nothing else under /web/ or elsewhere.
  EXPECT_EQ(find_web_file("/web/chat.html"), nullptr);
  EXPECT_EQ(find_web_file("/web/"), nullptr);
  EXPECT_EQ(find_web_file("/web/../chat.js"), nullptr);
  EXPECT_EQ(find_web_file("/chat.js"), nullptr);
  EXPECT_EQ(find_web_file("/engine/"), nullptr);
}

TEST(WebUi, EmbeddedBytesAreTheFiles) {
  // The build embeds each file whole: a page ends with its closing tag, a module with code.
  EXPECT_TRUE(find_web_file("/")->bytes.ends_with("</html>\n"));
  EXPECT_TRUE(find_web_file("/engine")->bytes.ends_with("</html>\n"));
  EXPECT_NE(find_web_file("/")->etag, find_web_file("/engine")->etag);
}

TEST(WebUi, ContentTypes) {
  EXPECT_EQ(web_content_type("chat.html"), "text/html; charset=utf-8");
  EXPECT_EQ(web_content_type("style.css"), "text/css; charset=utf-8");
  EXPECT_EQ(web_content_type("chat.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(web_content_type("x.bin"), "application/octet-stream");
}

TEST(WebUi, EtagMatching) {
  EXPECT_TRUE(etag_matches("\"0123456789abcdef\"", "0123456789abcdef"));
  EXPECT_TRUE(etag_matches("W/\"0123456789abcdef\"", "0123456789abcdef"));
  EXPECT_TRUE(etag_matches("\"aaaa\", \"0123456789abcdef\"", "0123456789abcdef"));
  EXPECT_TRUE(etag_matches("*", "0123456789abcdef"));
  EXPECT_FALSE(etag_matches("", "0123456789abcdef"));
  EXPECT_FALSE(etag_matches("0123456789abcdef", "0123456789abcdef")) << "unquoted";
  EXPECT_FALSE(etag_matches("\"0123456789abcde\"", "0123456789abcdef"));
  EXPECT_FALSE(etag_matches("\"aaaa\",", "0123456789abcdef"));
}

TEST(WebUi, ServesWithPolicyAndRevalidates) {
  const EmbeddedFile& file = *find_web_file("/web/chat.js");
  FakeExchange first;
  EXPECT_EQ(serve_web_file(file, "", first), 200);
  EXPECT_EQ(first.body, file.bytes);
  EXPECT_EQ(first.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(first.header("Content-Security-Policy"), kContentSecurityPolicy);
  EXPECT_EQ(first.header("Cache-Control"), "no-cache");
  EXPECT_EQ(first.header("X-Content-Type-Options"), "nosniff");
  const std::string etag = first.header("ETag");
  EXPECT_EQ(etag, "\"" + std::string(file.etag) + "\"");
  FakeExchange again;
  EXPECT_EQ(serve_web_file(file, etag, again), 304);
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(again.header("ETag"), etag);
  FakeExchange stale;
  EXPECT_EQ(serve_web_file(file, "\"ffffffffffffffff\"", stale), 200);
}

TEST(WebUi, PolicyAllowsNoInlineScriptOrOtherOrigin) {
  const std::string_view csp = kContentSecurityPolicy;
  EXPECT_NE(csp.find("default-src 'none'"), std::string_view::npos);
  EXPECT_NE(csp.find("script-src 'self';"), std::string_view::npos);
  EXPECT_EQ(csp.find("unsafe-inline"), std::string_view::npos);
  EXPECT_EQ(csp.find("unsafe-eval"), std::string_view::npos);
  EXPECT_EQ(csp.find("http"), std::string_view::npos);
}

}  // namespace
}  // namespace drift::server

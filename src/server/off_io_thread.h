// OpenAIService::off_io_thread's definition, for the files that run a request's work on a prompt
// worker (openai_service.cc, anthropic_endpoints.cc): a body's parsing, template rendering and
// tokenization take seconds that /health and the running streams must not wait for.
#pragma once

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <optional>

#include "server/openai_service.h"
#include "util/signal_stack.h"

namespace drift::server {

template <typename Work, typename Then>
void OpenAIService::off_io_thread(const HttpRequest& request,
                                  const std::shared_ptr<HttpExchange>& exchange, Work work,
                                  Then then) {
  boost::asio::post(*prompt_workers_, [this, request = HttpRequest(request), exchange,
                                       work = std::move(work), then = std::move(then)]() mutable {
    ensure_alternate_signal_stack();  // asio's pool starts its threads itself
    using Result = decltype(work(request.body));
    std::optional<Result> result;
    try {
      result.emplace(work(request.body));
    } catch (const std::exception& e) {
      spdlog::error("request {} {}: internal error: {}", request.id, request.target, e.what());
      result.emplace(internal_error(fmt::format("internal error: {}", e.what())));
    }
    request.body = std::string();  // read; the access log needs the rest
    boost::asio::post(io_, [this, request = std::move(request), exchange = std::move(exchange),
                            result = std::move(*result), then = std::move(then)]() mutable {
      try {
        if (auto* e = std::get_if<ApiError>(&result)) return reply_error(request, exchange, *e);
        then(request, exchange, std::move(std::get<1>(result)));
      } catch (const std::exception& e) {
        spdlog::error("request {} {}: internal error: {}", request.id, request.target, e.what());
        reply_error(request, exchange, internal_error(fmt::format("internal error: {}", e.what())));
      }
    });
  });
}

}  // namespace drift::server

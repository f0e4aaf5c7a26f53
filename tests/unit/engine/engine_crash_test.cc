// A process that aborts inside the engine prints the engine's recent progress events: a child
// process runs an engine whose executor calls abort() in the middle of a request; the parent
// reads the child's stderr and finds the dump.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "engine/engine.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;

// The child: an engine that aborts in its fourth decode step of request 42.
[[noreturn]] void crash_inside_engine(int stderr_fd) {
  dup2(stderr_fd, STDERR_FILENO);
  FakeHooks hooks;
  hooks.before_step = [](const StepPlan& plan) {
    if (plan_has(plan, 42, StepItemKind::kDecode, 12 + 3)) std::abort();
  };
  FakeEngine fake = make_fake_engine(small_config(), {}, hooks);
  if (!fake.engine) _exit(3);
  RequestHandle h = fake.engine->submit(token_request(42, 12, 20));
  h.next_for(std::chrono::seconds(30));
  while (h.next_for(std::chrono::seconds(30))) {
  }
  _exit(4);  // reached only if the engine did not abort
}

TEST(EngineCrash, AbortInsideTheEnginePrintsTheRecentProgressEvents) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    crash_inside_engine(pipe_fds[1]);
  }
  close(pipe_fds[1]);
  std::string output;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0;)
    output.append(buffer, size_t(n));
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);

  ASSERT_TRUE(WIFSIGNALED(status))
      << "child exited normally with " << WEXITSTATUS(status) << "; stderr:\n"
      << output;
  EXPECT_EQ(WTERMSIG(status), SIGABRT);
  EXPECT_NE(output.find("fatal signal SIGABRT"), std::string::npos) << output;
  // The life of request 42 up to the crash, in order: the last decode recorded is the one of the
  // step that aborted (position 15: prompt 12, then decodes at 12, 13, 14, 15).
  size_t at = 0;
  for (const char* line : {"enqueue seq=42 prompt_tokens=12 max_new_tokens=20", "admit seq=42",
                           "prefill_chunk seq=42 start=0 tokens=12", "decode seq=42 position=12",
                           "decode seq=42 position=15", "step step="}) {
    at = output.find(line, at);
    EXPECT_NE(at, std::string::npos) << "missing \"" << line << "\" in:\n" << output;
    if (at == std::string::npos) break;
  }
  EXPECT_EQ(output.find("position=16"), std::string::npos) << output;
}

}  // namespace
}  // namespace drift

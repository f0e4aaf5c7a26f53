#include "util/signal_stack.h"

#include <signal.h>
#include <sys/mman.h>

#include <cstddef>

namespace drift {
namespace {

// Room for the crash dump's handler (a line buffer and a few frames of write(2) calls) and for a
// sanitizer's handler that runs after it; SIGSTKSZ alone (8 KiB) is too small for the latter.
constexpr size_t kAlternateStackBytes = 64 * 1024;

class AlternateSignalStack {
 public:
  AlternateSignalStack() {
    stack_t current{};
    if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;
    void* memory = mmap(nullptr, kAlternateStackBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (memory == MAP_FAILED) return;  // no alternate stack: a crash is reported as before
    stack_t stack{};
    stack.ss_sp = memory;
    stack.ss_size = kAlternateStackBytes;
    if (sigaltstack(&stack, nullptr) != 0) {
      munmap(memory, kAlternateStackBytes);
      return;
    }
    memory_ = memory;
  }
  ~AlternateSignalStack() {
    if (!memory_) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
    munmap(memory_, kAlternateStackBytes);
  }
  AlternateSignalStack(const AlternateSignalStack&) = delete;
  AlternateSignalStack& operator=(const AlternateSignalStack&) = delete;

 private:
  void* memory_ =
      nullptr;  // [kAlternateStackBytes], owned; null when another owner's stack is used
};

}  // namespace

void ensure_alternate_signal_stack() { thread_local AlternateSignalStack stack; }

}  // namespace drift

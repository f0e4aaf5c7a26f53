// An alternate signal stack for the calling thread. A crash handler runs on the stack of the
// thread that crashed; when the crash is a stack overflow that stack is exactly what ran out, so
// without a stack of its own the handler faults again and the process dies silently, with no
// dump of what the engine was doing. Every thread that runs drift's code (the engine worker, the
// compute pool, the server's I/O thread and prompt workers, the main thread) calls this once at
// its start; the crash handlers are installed with SA_ONSTACK, so they use it.
#pragma once

namespace drift {

// Gives the calling thread an alternate signal stack unless it already has one (a sanitizer's
// runtime may have set its own). Idempotent per thread; the stack is released when the thread
// exits. Cheap after the first call (one thread-local check), so it may run at the start of
// every job a pooled thread takes.
void ensure_alternate_signal_stack();

}  // namespace drift

#include "engine_flags.h"

namespace drift::cli {

namespace {

// Speculative decoding: the mode, the draft model, the shared pool, the longest draft.
void register_spec_options(CLI::App& cmd, EngineOptions& o) {
  cmd.add_option("--spec", o.spec,
                 "speculative decoding: auto (ngram's drafts in the steps where they are "
                 "measured to pay; the draft model's too when one is given), ngram (drafts from "
                 "the request's own prompt and output and the shared pool, verified in the same "
                 "step: greedy output unchanged), draft (a draft model's, --spec-draft-model) or "
                 "none")
      ->capture_default_str();
  cmd.add_option("--spec-draft-model", o.spec_draft_model,
                 "draft model of speculative decoding: a smaller GGUF with the model's vocabulary "
                 "(for --spec draft or auto)");
  cmd.add_option("--spec-draft-kv-mib", o.spec_draft_kv_mib,
                 "KV memory of the draft model (default: its pages for the context length)")
      ->check(CLI::Range(1.0, 1048576.0));
  cmd.add_option("--spec-pool-mib", o.spec_pool_mib,
                 "memory of the n-gram pool shared across requests, whose prompts and outputs "
                 "draft for later ones (0: drafts from each request's own text only)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 16384.0));
  cmd.add_option("--spec-max-draft", o.spec_max_draft,
                 "the most draft tokens a request carries in one step (its adaptive draft length "
                 "stays under it)")
      ->capture_default_str()
      ->check(CLI::Range(1, int(kMaxSpecDraftTokens)));
}

// Latency targets and conversation sessions.
void register_latency_and_session_options(CLI::App& cmd, EngineOptions& o) {
  cmd.add_option("--target-itl-ms", o.target_itl_ms,
                 "inter-token latency target: while sequences decode, each step's prefill is cut "
                 "so that the step's predicted time stays under it (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  cmd.add_option("--idle-step-ms", o.idle_step_ms,
                 "while nothing decodes, a long prompt is prefilled in steps predicted to take "
                 "about this long, so that requests arriving meanwhile start within one step and "
                 "share its prefix as it is written (0: the whole token budget in one step)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  cmd.add_option("--target-ttft-ms", o.target_ttft_ms,
                 "time-to-first-token target: steps take more prefill than --target-itl-ms allows "
                 "when the oldest waiting request would miss it (default: off)")
      ->check(CLI::Range(0.001, 1e9));
  cmd.add_option("--max-ttft-s", o.max_ttft_s,
                 "refuse a request at once (429 with Retry-After) when its predicted time to "
                 "first token exceeds this (default: off)")
      ->check(CLI::Range(0.001, 1e7));
  cmd.add_option("--max-sessions", o.sessions.max_sessions, "conversation sessions open at once")
      ->capture_default_str();
  cmd.add_option("--session-max-tokens", o.sessions.max_total_tokens,
                 "token ids all sessions may hold together")
      ->capture_default_str();
  cmd.add_option("--session-ttl", o.sessions.idle_ttl_seconds,
                 "seconds after which an idle session is dropped")
      ->capture_default_str();
}

}  // namespace

void register_engine_options(CLI::App& cmd, EngineOptions& o) {
  cmd.add_option("-t,--threads", o.threads, "compute threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd.add_option("--parallel", o.parallel, "sequences run at once (continuous batching)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd.add_option("-c,--ctx-size", o.ctx_size,
                 "longest sequence, prompt + output (default: the model's trained context, "
                 "capped by what the KV cache holds)")
      ->check(CLI::Range(16, 1 << 24));
  cmd.add_option("--batch-tokens", o.batch_tokens, "tokens one step may process")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--kv-mib", o.kv_mib, "KV cache size in MiB (default: --kv-ram-fraction)")
      ->check(CLI::Range(1.0, 1e9));
  cmd.add_option("--kv-ram-fraction", o.kv_ram_fraction, "KV cache size as a share of RAM")
      ->capture_default_str();
  cmd.add_option("--page-size", o.page_size, "tokens per KV page")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd.add_option("--kv-cache-dtype", o.kv_cache_dtype,
                 "element type of the KV cache: f16, bf16, f32, int8 (~1.9x the tokens of f16 in "
                 "the same memory) or int4 (~3.6x)")
      ->capture_default_str();
  cmd.add_option("--kv-keep", o.kv_keep,
                 "KV-Compress: each KV head keeps at most this fraction (0, 1] of a long "
                 "sequence's positions, for requests that give no kv_keep (1: off)")
      ->capture_default_str();
  cmd.add_option("--kv-evict", o.kv_evict,
                 "which entries a compressed head keeps: attention (most attended) or window "
                 "(first and most recent)")
      ->capture_default_str();
  register_spec_options(cmd, o);
  cmd.add_option("--admission", o.admission,
                 "guaranteed (reserve prompt + max tokens) or optimistic (preempt a running "
                 "request when KV runs out)")
      ->capture_default_str();
  cmd.add_option("--preemption", o.preemption,
                 "what an optimistic preemption does with the request's KV pages: swap them to "
                 "--kv-cache-dir, recompute them, or auto (swap when the step cost model and the "
                 "disk's measured bandwidth say it is faster)")
      ->capture_default_str();
  cmd.add_option("--policy", o.policy, "waiting order: fcfs, small_first or priority")
      ->capture_default_str();
  cmd.add_option("--max-queued", o.max_queued, "queued requests beyond which submits are refused")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_flag("--no-chunked-prefill", o.no_chunked_prefill,
               "prefill each prompt in one step (needs --batch-tokens >= --ctx-size)");
  cmd.add_flag("--no-prefix-cache", o.no_prefix_cache,
               "do not keep finished requests' KV pages for reuse by later prompts");
  cmd.add_flag("--no-hybrid-kv", o.no_hybrid_kv,
               "keep every layer's K/V in one page (no KV groups): sliding-window layers then "
               "free nothing and a sequence's capacity counts all its tokens in every layer");
  cmd.add_option("--kv-cache-dir", o.kv_cache_dir,
                 "a disk tier under the prefix cache: cached KV pages that leave RAM are written "
                 "here and read back by later prompts that start with them, also after a restart "
                 "(one server per directory)");
  cmd.add_option("--kv-cache-dir-gib", o.kv_cache_dir_gib,
                 "the most this model's pages take in --kv-cache-dir, in GiB (least recently used "
                 "pages are deleted first)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  register_latency_and_session_options(cmd, o);
}

}  // namespace drift::cli

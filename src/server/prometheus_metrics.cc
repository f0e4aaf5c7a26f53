#include "server/prometheus_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace drift::server {
namespace {

// Label values escape backslash, double quote and newline.
std::string escape_label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

class Writer {
 public:
  explicit Writer(std::string_view model)
      : labels_(fmt::format("model_name=\"{}\"", escape_label(model))) {}

  void gauge(std::string_view name, std::string_view help, double value) {
    header(name, help, "gauge");
    sample(name, "", value);
  }
  void counter(std::string_view name, std::string_view help, double value) {
    header(name, help, "counter");
    sample(name, "", value);
  }
  // Engine histograms count per bucket; Prometheus buckets are cumulative (le = upper bound).
  void histogram(std::string_view name, std::string_view help, const Histogram& h) {
    header(name, help, "histogram");
    uint64_t running = 0;
    const std::string bucket = fmt::format("{}_bucket", name);
    for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
      running += i < h.counts.size() ? h.counts[i] : 0;
      sample(bucket, fmt::format(",le=\"{}\"", h.upper_bounds[i]), double(running));
    }
    sample(bucket, ",le=\"+Inf\"", double(h.count));
    sample(fmt::format("{}_sum", name), "", h.sum);
    sample(fmt::format("{}_count", name), "", double(h.count));
  }
  void labelled_counter_header(std::string_view name, std::string_view help) {
    header(name, help, "counter");
  }
  void labelled_gauge_header(std::string_view name, std::string_view help) {
    header(name, help, "gauge");
  }
  void sample(std::string_view name, std::string_view extra_labels, double value) {
    fmt::format_to(std::back_inserter(out_), "{}{{{}{}}} {}\n", name, labels_, extra_labels, value);
  }
  std::string take() { return std::move(out_); }

 private:
  void header(std::string_view name, std::string_view help, std::string_view type) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name,
                   type);
  }
  std::string labels_;
  std::string out_;
};

// The KV tiers: RAM (the pool's cached pages) and, with --kv-cache-dir, the disk under it.
void write_kv_tiers(Writer& w, const EngineMetrics& m) {
  const KVDiskMetrics* disk = m.kv_disk ? &*m.kv_disk : nullptr;
  const auto page_bytes = double(m.kv_page_bytes);
  // Pages read from disk are registered and then hit in RAM: count them once, for the disk.
  const double hit_pages =
      m.kv_page_size > 0 ? double(m.prefix_cache.hit_tokens) / double(m.kv_page_size) : 0.0;
  const double disk_hits = disk ? double(disk->tier.pages_loaded) : 0.0;
  w.labelled_gauge_header("drift:kv_tier_pages", "Cached KV pages held per tier.");
  w.sample("drift:kv_tier_pages", ",medium=\"CPU\"", double(m.kv_pages_cached));
  if (disk) w.sample("drift:kv_tier_pages", ",medium=\"DISK\"", double(disk->store.pages));
  w.labelled_gauge_header("drift:kv_tier_bytes", "Bytes of cached KV pages per tier.");
  w.sample("drift:kv_tier_bytes", ",medium=\"CPU\"", double(m.kv_pages_cached) * page_bytes);
  if (disk) w.sample("drift:kv_tier_bytes", ",medium=\"DISK\"", double(disk->store.bytes));
  w.labelled_counter_header("drift:kv_tier_hit_pages_total",
                            "Prefix pages a request found cached, by the tier that held them.");
  w.sample("drift:kv_tier_hit_pages_total", ",medium=\"CPU\"",
           std::max(0.0, hit_pages - disk_hits));
  if (!disk) return;
  w.sample("drift:kv_tier_hit_pages_total", ",medium=\"DISK\"", disk_hits);
  w.gauge("drift:kv_disk_budget_bytes", "The disk tier's budget (--kv-cache-dir-gib).",
          double(disk->store.budget_bytes));
  w.counter("drift:kv_disk_read_bytes_total", "K/V bytes read back from the disk tier.",
            double(disk->store.bytes_read));
  w.counter("drift:kv_disk_read_seconds_total", "Seconds the disk tier spent reading pages.",
            disk->store.read_seconds);
  w.counter("drift:kv_disk_write_bytes_total", "Bytes written to the disk tier.",
            double(disk->store.bytes_written));
  w.counter("drift:kv_disk_write_seconds_total", "Seconds the disk tier spent writing pages.",
            disk->store.write_seconds);
  w.counter("drift:kv_disk_read_failures_total",
            "Pages on disk that failed their checks when read (dropped and recomputed).",
            double(disk->store.read_failures));
  w.counter("drift:kv_disk_writes_dropped_total",
            "Evicted pages not written because every staging slot was busy.",
            double(disk->store.writes_dropped));
  w.counter("drift:kv_disk_writes_ahead_total",
            "Cached pages written before the pool reclaimed them (the next step could have).",
            double(disk->tier.pages_written_ahead));
  w.counter("drift:kv_disk_evictions_total", "Pages deleted to keep the disk tier in budget.",
            double(disk->store.pages_evicted));
  w.counter("drift:kv_disk_admission_waits_total",
            "Admission attempts that waited for prefix pages being read from disk.",
            double(disk->admission_waits));
  w.counter("drift:kv_disk_room_holds_total",
            "Requests held for room in the pool to read their whole prefix from disk.",
            double(disk->room_holds));
  w.counter("drift:kv_disk_room_holds_expired_total",
            "Holds for room that lasted as long as computing the prefix would have, and computed "
            "what did not fit.",
            double(disk->room_holds_expired));
  const PreemptionMetrics& p = disk->preemption;
  w.labelled_counter_header("drift:kv_preemptions_total",
                            "Preempted sequences by what became of their KV pages (with a disk "
                            "tier; vllm:num_preemptions_total counts them all).");
  w.sample("drift:kv_preemptions_total", ",mode=\"swap\"", double(p.swapped));
  w.sample("drift:kv_preemptions_total", ",mode=\"recompute\"", double(p.recomputed));
  w.labelled_counter_header(
      "drift:kv_preemption_predicted_seconds_total",
      "Seconds the cost model predicted for each way, summed over every preemption it judged.");
  w.sample("drift:kv_preemption_predicted_seconds_total", ",mode=\"swap\"",
           p.predicted_swap_seconds);
  w.sample("drift:kv_preemption_predicted_seconds_total", ",mode=\"recompute\"",
           p.predicted_recompute_seconds);
  w.counter("drift:kv_preemption_tails_restored_total",
            "Swapped sequences re-admitted with their partial last page read back.",
            double(p.tails_restored));
}

// vLLM's names for requests, the KV and prefix caches and tokens, which routers and dashboards
// written for vLLM read.
void write_vllm_requests(Writer& w, const EngineMetrics& m) {
  w.gauge("vllm:num_requests_running", "Requests admitted: prefilling or decoding.", m.num_running);
  w.gauge("vllm:num_requests_waiting", "Requests submitted and not yet admitted.", m.num_waiting);
  const double kv_usage = m.kv_pages_total > 0 ? double(m.kv_pages_used) / m.kv_pages_total : 0.0;
  w.gauge("vllm:kv_cache_usage_perc", "Fraction of KV cache pages in use (1 = full).", kv_usage);
  // In tokens, as vLLM counts them (0 when the prefix cache is off).
  w.counter("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
            double(m.prefix_cache.queried_tokens));
  w.counter("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
            double(m.prefix_cache.hit_tokens));
  w.counter("vllm:num_preemptions_total", "Sequences preempted (recomputed later).",
            double(m.preemptions));
  // The same values under the names of vLLM releases before 0.27 (gpu_ prefixed), which routers
  // and dashboards written for them still read (llm-d's and the production stack's scrapers
  // accept both spellings, older ones only these).
  w.gauge("vllm:gpu_cache_usage_perc", "Fraction of KV cache pages in use (older name).", kv_usage);
  w.counter("vllm:gpu_prefix_cache_queries_total",
            "Prompt tokens looked up in the prefix cache (older name).",
            double(m.prefix_cache.queried_tokens));
  w.counter("vllm:gpu_prefix_cache_hits_total",
            "Prompt tokens found in the prefix cache (older name).",
            double(m.prefix_cache.hit_tokens));
  // vLLM's cache configuration, as labels of a constant 1: the page size a KV-aware router needs
  // to cut prompts into the blocks of the KV events, and the number of pages.
  w.labelled_gauge_header("vllm:cache_config_info", "KV cache configuration (labels).");
  w.sample("vllm:cache_config_info",
           fmt::format(",block_size=\"{}\",num_gpu_blocks=\"{}\",enable_prefix_caching=\"{}\"",
                       m.kv_page_size, m.kv_pages_total, m.prefix_cache_enabled ? "True" : "False"),
           1);
  w.counter("vllm:prompt_tokens_total", "Prompt tokens of finished requests.",
            double(m.prompt_tokens_total));
  w.counter("vllm:generation_tokens_total", "Generated tokens delivered.",
            double(m.generation_tokens_total));
  w.labelled_counter_header("vllm:request_success_total", "Finished requests by finish reason.");
  for (FinishReason r : {FinishReason::kStop, FinishReason::kLength, FinishReason::kCancelled,
                         FinishReason::kError, FinishReason::kRejected}) {
    w.sample("vllm:request_success_total",
             fmt::format(",finished_reason=\"{}\"", finish_reason_name(r)), double(m.finished(r)));
  }
}

// Speculative decoding: vLLM's counts, then drift's by draft source.
void write_spec_decode(Writer& w, const EngineMetrics& m) {
  // Speculative decoding, as vLLM counts it: drafts (decodes that carried one), draft tokens,
  // accepted draft tokens, and those by position in the draft (up to the last position used).
  w.counter("vllm:spec_decode_num_drafts_total", "Decodes that carried a draft to verify.",
            double(m.spec_drafts));
  w.counter("vllm:spec_decode_num_draft_tokens_total", "Draft tokens verified.",
            double(m.spec_draft_tokens));
  w.counter("vllm:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.",
            double(m.spec_accepted_tokens));
  w.labelled_counter_header("vllm:spec_decode_num_accepted_tokens_per_pos",
                            "Draft tokens accepted, by position in their draft.");
  for (size_t i = 0; i < m.spec_accepted_by_position.size() && m.spec_accepted_by_position[i] > 0;
       ++i)
    w.sample("vllm:spec_decode_num_accepted_tokens_per_pos", fmt::format(",position=\"{}\"", i),
             double(m.spec_accepted_by_position[i]));
  w.counter("drift:spec_decode_pool_draft_tokens_total",
            "Draft tokens from the n-gram pool shared across requests.",
            double(m.spec_pool_draft_tokens));
  w.counter("drift:spec_decode_pool_accepted_tokens_total",
            "Draft tokens from the shared n-gram pool that were accepted.",
            double(m.spec_pool_accepted_tokens));
  w.counter("drift:spec_decode_forced_draft_tokens_total",
            "Draft tokens a grammar forced (structured output).",
            double(m.spec_forced_draft_tokens));
  w.counter("drift:spec_decode_forced_accepted_tokens_total",
            "Draft tokens a grammar forced that were accepted.",
            double(m.spec_forced_accepted_tokens));
  w.counter("drift:spec_decode_draft_model_draft_tokens_total",
            "Draft tokens the draft model proposed (--spec-draft-model).",
            double(m.spec_draft_model_draft_tokens));
  w.counter("drift:spec_decode_draft_model_accepted_tokens_total",
            "Draft tokens from the draft model that were accepted.",
            double(m.spec_draft_model_accepted_tokens));
  w.counter("drift:spec_decode_draft_model_steps_total", "Steps that asked the draft model.",
            double(m.spec_draft_model_steps));
  w.counter("drift:spec_decode_draft_model_seconds_total",
            "Time the draft model spent drafting (catch-up and draft passes).",
            m.spec_draft_model_seconds);
  w.counter("drift:spec_decode_draft_model_passes_total", "Forward passes of the draft model.",
            double(m.spec_draft_model_passes));
  w.gauge("drift:spec_decode_draft_model_kv_bytes", "KV memory of the draft model (0: none).",
          double(m.spec_draft_model_kv_bytes));
  w.labelled_counter_header("drift:spec_decode_auto_steps_total",
                            "Decode steps --spec auto measured, by whether drafts were allowed.");
  w.sample("drift:spec_decode_auto_steps_total", ",drafts=\"allowed\"",
           double(m.spec_auto_steps_with_drafts));
  w.sample("drift:spec_decode_auto_steps_total", ",drafts=\"withheld\"",
           double(m.spec_auto_steps_without_drafts));
  w.gauge("drift:spec_decode_pool_bytes", "Memory of the shared n-gram pool (fixed at start).",
          double(m.spec_pool_bytes));
}

void write_latency_histograms(Writer& w, const EngineMetrics& m) {
  w.histogram("vllm:time_to_first_token_seconds", "Time to first token, from submit.",
              m.time_to_first_token);
  w.histogram("vllm:inter_token_latency_seconds", "Gaps between consecutive tokens.",
              m.inter_token_latency);
  w.histogram("vllm:e2e_request_latency_seconds", "End-to-end latency of accepted requests.",
              m.end_to_end);
  w.histogram("vllm:request_queue_time_seconds", "Time from submit to the first scheduled step.",
              m.queue_time);
}

// The engine's own gauges and counts: health, KV pages, steps, embeddings, the prefix cache, the
// KV tiers and the KV events.
void write_engine(Writer& w, const EngineMetrics& m) {
  w.gauge("drift:healthy", "1 while the engine can serve, 0 after a fatal executor failure.",
          m.healthy ? 1 : 0);
  w.gauge("drift:kv_pages_total", "KV cache pages.", m.kv_pages_total);
  w.gauge("drift:kv_pages_used", "KV cache pages held by sequences.", m.kv_pages_used);
  w.gauge("drift:kv_pages_free", "KV cache pages free.", m.kv_pages_free);
  w.gauge("drift:kv_pages_cached", "KV cache pages kept for prefix reuse.", m.kv_pages_cached);
  w.counter("drift:steps_total", "Non-empty engine steps.", double(m.steps));
  w.counter("drift:prefill_tokens_total", "Tokens prefilled.", double(m.prefill_tokens_total));
  w.counter("drift:decode_tokens_total", "Tokens decoded.", double(m.decode_tokens_total));
  w.counter("drift:preemptions_total", "Sequences preempted (recomputed later).",
            double(m.preemptions));
  w.counter("drift:embeddings_total", "Embedding inputs pooled into a vector (one per input).",
            double(m.embeddings_total));
  w.counter("drift:embedding_prompt_tokens_total", "Tokens of the embedding inputs pooled.",
            double(m.embedding_prompt_tokens_total));
  w.gauge("drift:prefix_cache_enabled", "1 when the prefix cache is on.",
          m.prefix_cache_enabled ? 1 : 0);
  w.counter("drift:prefix_cache_lookups_total", "Prefix cache lookups at admission.",
            double(m.prefix_cache.queries));
  w.counter("drift:prefix_cache_lookup_hits_total", "Lookups that matched at least one page.",
            double(m.prefix_cache.hits));
  w.counter("drift:prefix_cache_pages_inserted_total", "Full pages registered for reuse.",
            double(m.prefix_cache.pages_inserted));
  w.counter("drift:prefix_cache_evictions_total", "Cached pages evicted for reuse.",
            double(m.prefix_cache.evictions));
  w.counter("drift:prefix_cache_evicted_bytes_total", "Bytes of KV evicted from the cache.",
            double(m.prefix_cache.evicted_bytes));
  write_kv_tiers(w, m);
  if (m.kv_events) {
    // --kv-events-endpoint: what reached the publisher, what it had to drop (its queue was full:
    // a subscriber too slow, or no CPU for the publisher) and the messages sent.
    w.counter("drift:kv_events_total", "KV cache events (stored, removed, cleared) emitted.",
              double(m.kv_events->events));
    w.counter("drift:kv_events_dropped_total",
              "KV cache events dropped because the publisher's queue was full.",
              double(m.kv_events->dropped));
    w.counter("drift:kv_event_batches_total", "KV event messages published.",
              double(m.kv_events->batches));
  }
}

void write_step_costs(Writer& w, const EngineMetrics& m) {
  // The step cost model, per model (model_name) and thread count: what the latency targets are
  // computed from.
  w.gauge("drift:step_cost_calibrated",
          "1 once the step cost model has measured prefill and decode steps.",
          m.step_costs_calibrated ? 1 : 0);
  w.labelled_gauge_header("drift:step_cost_seconds",
                          "Learned seconds per step, prefill token, decode sequence and attended "
                          "context position.");
  const std::pair<const char*, double> costs[] = {
      {"step", m.step_costs.per_step},
      {"prefill_token", m.step_costs.per_prefill_token},
      {"decode_sequence", m.step_costs.per_decode_sequence},
      {"attended_position", m.step_costs.per_attended_position}};
  for (const auto& [component, seconds] : costs)
    w.sample("drift:step_cost_seconds",
             fmt::format(",threads=\"{}\",component=\"{}\"", m.threads, component), seconds);
  w.gauge("drift:prefill_token_budget",
          "Prefill tokens the last step could carry under the latency targets.",
          m.prefill_token_budget);
  w.gauge("drift:last_step_seconds", "Executor time of the last step.", m.last_step_seconds);
  w.gauge("drift:last_step_predicted_seconds",
          "The step cost model's prediction of the last step's time, made before it ran.",
          m.last_step_predicted_seconds);
}

// Sessions, HTTP and the Responses API's store.
void write_sessions_and_http(Writer& w, const EngineMetrics& m, const ServerStats& s) {
  w.gauge("drift:sessions_open", "Conversation sessions open.", m.sessions.open);
  w.gauge("drift:session_tokens", "Tokens held by sessions (running turns at their worst case).",
          double(m.sessions.tokens));
  w.counter("drift:sessions_expired_total", "Sessions dropped after their idle time-to-live.",
            double(m.sessions.expired));
  w.counter("drift:session_turns_rejected_total",
            "Session turns refused (a cap, or a turn already running).",
            double(m.sessions.rejected_turns));
  w.gauge("drift:http_open_connections", "Open HTTP connections.", double(s.open_connections));
  w.counter("drift:http_requests_total", "HTTP requests answered.", double(s.http_requests_total));
  w.counter("drift:http_requests_4xx_total", "HTTP requests answered with a 4xx status.",
            double(s.http_requests_4xx));
  w.counter("drift:http_requests_5xx_total", "HTTP requests answered with a 5xx status.",
            double(s.http_requests_5xx));
  w.counter("drift:client_disconnects_total",
            "Generations cancelled because their client went away.", double(s.client_disconnects));
  w.counter("drift:stop_string_matches_total", "Generations ended by a stop string.",
            double(s.stop_string_matches));
  w.gauge("drift:stored_responses", "Responses the Responses API keeps for previous_response_id.",
          double(s.stored_responses));
  w.gauge("drift:stored_response_bytes", "Bytes of the responses the Responses API keeps.",
          double(s.stored_response_bytes));
  w.counter("drift:stored_response_evictions_total",
            "Stored responses dropped for the count or byte cap, or their TTL.",
            double(s.stored_response_evictions));
}

}  // namespace

std::string render_prometheus(const EngineMetrics& m, const ServerStats& s,
                              std::string_view model_name) {
  Writer w(model_name);
  // ---- vLLM's names ----
  write_vllm_requests(w, m);
  write_spec_decode(w, m);
  write_latency_histograms(w, m);
  // ---- drift's own ----
  write_engine(w, m);
  write_step_costs(w, m);
  write_sessions_and_http(w, m, s);
  return w.take();
}

}  // namespace drift::server

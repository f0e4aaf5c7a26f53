#include "server/engine_view_json.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "server/openai_response.h"

namespace drift::server {

namespace {

using nlohmann::json;

json histogram_json(const Histogram& h) {
  return json{{"bounds", h.upper_bounds}, {"counts", h.counts}, {"count", h.count}, {"sum", h.sum}};
}

json sequence_json(const SequenceView& s) {
  return json{{"id", std::to_string(s.id)},
              {"phase", sequence_phase_name(s.phase)},
              {"preempted", s.preempted()},
              {"prompt_tokens", s.prompt_tokens},
              {"prefilled_tokens", s.prefilled_tokens},
              {"generated_tokens", s.generated_tokens},
              {"max_new_tokens", s.max_new_tokens},
              {"pages", s.pages}};
}

// --kv-cache-dir: the disk tier under the prefix cache.
json disk_tier_json(const KVDiskMetrics& d) {
  json tier = {{"pages", d.store.pages},
               {"bytes", d.store.bytes},
               {"budget_bytes", d.store.budget_bytes},
               {"pages_loaded", d.tier.pages_loaded},
               {"pages_load_failed", d.tier.pages_load_failed},
               {"pages_spilled", d.tier.pages_spilled},
               {"pages_written_ahead", d.tier.pages_written_ahead},
               {"writes_dropped", d.store.writes_dropped},
               {"loads_in_flight", d.loads_in_flight},
               {"room_holds", d.room_holds},
               {"room_holds_expired", d.room_holds_expired},
               {"read_bytes", d.store.bytes_read},
               {"read_seconds", d.store.read_seconds},
               {"write_bytes", d.store.bytes_written},
               {"write_seconds", d.store.write_seconds},
               {"read_failures", d.store.read_failures}};
  const PreemptionMetrics& p = d.preemption;
  json preemption{{"swapped", p.swapped},
                  {"recomputed", p.recomputed},
                  {"tails_restored", p.tails_restored},
                  {"predicted_swap_seconds", p.predicted_swap_seconds},
                  {"predicted_recompute_seconds", p.predicted_recompute_seconds},
                  {"last", nullptr}};
  if (p.last)
    preemption["last"] = {{"mode", preemption_mode_name(p.last->mode)},
                          {"swap_seconds", p.last->swap_seconds},
                          {"recompute_seconds", p.last->recompute_seconds}};
  tier["preemption"] = std::move(preemption);
  return tier;
}

}  // namespace

std::string engine_view_json(const EngineSnapshot& snapshot, const EngineMetrics& metrics,
                             int32_t page_size) {
  // Counts come from the snapshot's sequences, so that they agree with the list drawn beside
  // them; "queued" adds the requests the worker has not taken yet (from the metrics).
  int64_t running = 0, waiting = 0, preempted = 0;
  json sequences = json::array();
  for (const SequenceView& s : snapshot.sequences) {
    if (s.phase == SequencePhase::kWaiting) {
      ++waiting;
      if (s.preempted()) ++preempted;
    } else {
      ++running;
    }
    sequences.push_back(sequence_json(s));
  }

  json steps = json::array();
  for (const StepRecord& r : snapshot.recent_steps)
    steps.push_back(json::array({r.step, r.prefill_tokens, r.decode_tokens, r.sequences,
                                 std::round(r.seconds * 1e5) / 1e2}));

  const auto count_of = [&](PageMark mark) {
    return std::count(snapshot.page_map.begin(), snapshot.page_map.end(), char(mark));
  };
  const int64_t shared = count_of(PageMark::kShared);
  json out{
      {"version", snapshot.version},
      {"steps", snapshot.steps},
      {"healthy", metrics.healthy},
      {"page_size", page_size},
      {"counts",
       {{"running", running},
        {"waiting", waiting},
        {"preempted", preempted},
        {"queued", std::max<int64_t>(waiting, metrics.num_waiting)}}},
      {"sequences", std::move(sequences)},
      {"recent_steps", std::move(steps)},
      {"kv",
       {{"total", snapshot.page_map.size()},
        {"free", count_of(PageMark::kFree)},
        {"used", count_of(PageMark::kUsed) + shared},
        {"cached", count_of(PageMark::kCached)},
        {"shared", shared},
        {"map", snapshot.page_map}}},
      {"prefix_cache",
       {{"enabled", metrics.prefix_cache_enabled},
        {"queried_tokens", metrics.prefix_cache.queried_tokens},
        {"hit_tokens", metrics.prefix_cache.hit_tokens},
        {"evictions", metrics.prefix_cache.evictions}}},
      {"sessions", {{"open", metrics.sessions.open}, {"tokens", metrics.sessions.tokens}}},
      // Speculative decoding: drafts verified and accepted, by source, and --spec auto's choice.
      {"spec",
       {{"drafts", metrics.spec_drafts},
        {"draft_tokens", metrics.spec_draft_tokens},
        {"accepted_tokens", metrics.spec_accepted_tokens},
        {"pool_draft_tokens", metrics.spec_pool_draft_tokens},
        {"pool_accepted_tokens", metrics.spec_pool_accepted_tokens},
        {"forced_draft_tokens", metrics.spec_forced_draft_tokens},
        {"forced_accepted_tokens", metrics.spec_forced_accepted_tokens},
        {"auto_steps_with_drafts", metrics.spec_auto_steps_with_drafts},
        {"auto_steps_without_drafts", metrics.spec_auto_steps_without_drafts}}},
      {"totals",
       {{"prefill_tokens", metrics.prefill_tokens_total},
        {"decode_tokens", metrics.decode_tokens_total},
        {"generated_tokens", metrics.generation_tokens_total},
        {"finished", metrics.finished_total()}}},
      {"ttft", histogram_json(metrics.time_to_first_token)},
      {"itl", histogram_json(metrics.inter_token_latency)},
  };
  if (metrics.kv_disk) out["disk_tier"] = disk_tier_json(*metrics.kv_disk);
  return dump_json(out);
}

}  // namespace drift::server

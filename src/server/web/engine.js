// The live engine view: reads GET /v1/engine/events (engine snapshots taken at step boundaries,
// a few per second while anything runs; see server/engine_view_json.h for the fields) and draws
// the requests, the recent steps, the KV page map and the latency histograms. Reconnects after
// a dropped stream.
import { apiFetch, setUpKeyControls, sseData } from "/web/common.js";

const $ = (id) => document.getElementById(id);
const COLORS = {
  prefill: "#4c78a8",
  decode: "#54a24b",
  time: "#e45756",
  f: "#e6e9ef",
  u: "#4c78a8",
  s: "#b279a2",
  c: "#f2b447",
  bar: "#72b7b2",
  axis: "#8a8f98",
};

function fitCanvas(canvas) {
  // Draw at the device's pixel density, at the canvas's laid-out width.
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || canvas.width;
  const height = canvas.clientHeight || canvas.height;
  if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  return { ctx, width, height };
}

function percent(part, whole) {
  return whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : "–";
}

function drawSteps(steps) {
  const { ctx, width, height } = fitCanvas($("steps-chart"));
  const pad = { left: 40, right: 44, top: 8, bottom: 18 };
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const maxTokens = Math.max(1, ...steps.map((s) => s[1] + s[2]));
  const maxMs = Math.max(1, ...steps.map((s) => s[4]));
  const slot = plotW / 120;
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = COLORS.axis;
  ctx.fillText(`${maxTokens} tok`, 2, pad.top + 10);
  ctx.fillText("0", 2, pad.top + plotH);
  ctx.textAlign = "right";
  ctx.fillText(`${maxMs.toFixed(0)} ms`, width - 2, pad.top + 10);
  ctx.textAlign = "left";
  // The newest step at the right edge; older ones scroll left.
  const x0 = pad.left + plotW - steps.length * slot;
  steps.forEach(([, prefill, decode], i) => {
    const x = x0 + i * slot;
    const hPrefill = (prefill / maxTokens) * plotH;
    const hDecode = (decode / maxTokens) * plotH;
    ctx.fillStyle = COLORS.decode;
    ctx.fillRect(x, pad.top + plotH - hDecode, Math.max(1, slot - 1), hDecode);
    ctx.fillStyle = COLORS.prefill;
    ctx.fillRect(x, pad.top + plotH - hDecode - hPrefill, Math.max(1, slot - 1), hPrefill);
  });
  ctx.strokeStyle = COLORS.time;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  steps.forEach((s, i) => {
    const x = x0 + i * slot + slot / 2;
    const y = pad.top + plotH - (s[4] / maxMs) * plotH;
    if (i === 0) ctx.moveTo(x, y);
    else ctx.lineTo(x, y);
  });
  ctx.stroke();
  ctx.strokeStyle = COLORS.axis;
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(pad.left, pad.top + plotH + 0.5);
  ctx.lineTo(pad.left + plotW, pad.top + plotH + 0.5);
  ctx.stroke();
  if (steps.length > 0) {
    const last = steps[steps.length - 1];
    const mean = steps.reduce((sum, s) => sum + s[4], 0) / steps.length;
    $("steps-summary").textContent =
      `step ${last[0]}: ${last[1]} prefill + ${last[2]} decode tokens over ${last[3]} sequences in ${last[4].toFixed(1)} ms; ` +
      `mean step time of the last ${steps.length}: ${mean.toFixed(1)} ms`;
  } else {
    $("steps-summary").textContent = "No step has run yet.";
  }
}

function drawPageMap(kv) {
  const canvas = $("page-map");
  const map = kv.map;
  const width = canvas.clientWidth || canvas.width;
  // Squares as large as fit the pages into the canvas width on at most ~8 rows of 10 px or more.
  const cell = Math.max(3, Math.min(14, Math.floor(Math.sqrt((width * 110) / Math.max(1, map.length)))));
  const perRow = Math.max(1, Math.floor(width / cell));
  const rows = Math.ceil(map.length / perRow);
  canvas.style.height = `${Math.max(cell, rows * cell)}px`;
  const { ctx } = fitCanvas(canvas);
  for (let i = 0; i < map.length; i++) {
    ctx.fillStyle = COLORS[map[i]] || COLORS.f;
    ctx.fillRect((i % perRow) * cell, Math.floor(i / perRow) * cell, cell - 1, cell - 1);
  }
  canvas.dataset.used = String(kv.used);
  canvas.dataset.total = String(kv.total);
  $("kv-summary").textContent =
    `${kv.total} pages: ${kv.used} used (${kv.shared} shared by several requests), ` +
    `${kv.cached} cached for prefix reuse, ${kv.free} free`;
}

function drawHistogram(canvasId, summaryId, h) {
  const { ctx, width, height } = fitCanvas($(canvasId));
  const labels = h.bounds.map((b) => (b < 1 ? `${+(b * 1000).toFixed(1)}ms` : `${b}s`)).concat(["+∞"]);
  // Only the buckets up to the last non-empty one (and at least a few), so the bars stay wide.
  let last = h.counts.length - 1;
  while (last > 4 && h.counts[last] === 0) last--;
  const counts = h.counts.slice(0, last + 1);
  const max = Math.max(1, ...counts);
  const pad = { bottom: 28, top: 6 };
  const slot = width / counts.length;
  ctx.font = "10px system-ui, sans-serif";
  counts.forEach((count, i) => {
    const barH = (count / max) * (height - pad.bottom - pad.top);
    ctx.fillStyle = COLORS.bar;
    ctx.fillRect(i * slot + 1, height - pad.bottom - barH, slot - 2, barH);
    ctx.save();
    ctx.translate(i * slot + slot / 2, height - pad.bottom + 4);
    ctx.rotate(Math.PI / 5);
    ctx.fillStyle = COLORS.axis;
    ctx.fillText(`≤${labels[i]}`, 0, 6);
    ctx.restore();
  });
  $(summaryId).textContent = h.count > 0 ? `${h.count} observations, mean ${((1000 * h.sum) / h.count).toFixed(1)} ms` : "No observation yet.";
}

function progressCell(done, total, label) {
  const td = document.createElement("td");
  const bar = document.createElement("progress");
  bar.max = Math.max(1, total);
  bar.value = Math.min(done, total);
  const text = document.createElement("span");
  text.textContent = label;
  td.append(bar, text);
  return td;
}

function renderRequests(sequences) {
  const body = $("requests").tBodies[0];
  body.replaceChildren(
    ...sequences.map((s) => {
      const tr = document.createElement("tr");
      tr.className = s.preempted ? "preempted" : s.phase;
      const id = document.createElement("td");
      id.textContent = s.id.length > 8 ? `…${s.id.slice(-6)}` : s.id;
      id.title = s.id;
      const state = document.createElement("td");
      state.textContent = s.preempted ? "preempted" : s.phase === "waiting" ? "waiting" : s.phase === "prefill" ? "prefilling" : "decoding";
      const pages = document.createElement("td");
      pages.textContent = String(s.pages);
      tr.append(
        id,
        state,
        progressCell(s.prefilled_tokens, s.prompt_tokens, `${s.prefilled_tokens} / ${s.prompt_tokens}`),
        progressCell(s.generated_tokens, s.max_new_tokens, `${s.generated_tokens} / ${s.max_new_tokens}`),
        pages,
      );
      return tr;
    }),
  );
  $("requests-empty").hidden = sequences.length > 0;
}

// With a disk tier: how preemptions went (swap or recompute) and the cost model's last choice.
function preemptionTitle(p) {
  if (!p) return "";
  let text = `${p.swapped} swapped to disk, ${p.recomputed} recomputed`;
  if (p.last) {
    text += `; last: ${p.last.mode} (predicted swap ${p.last.swap_seconds.toFixed(3)} s, ` +
      `recompute ${p.last.recompute_seconds.toFixed(3)} s)`;
  }
  return text;
}

function render(view) {
  $("count-running").textContent = String(view.counts.running);
  $("count-waiting").textContent = String(view.counts.queued);
  $("count-preempted").textContent = String(view.counts.preempted);
  $("count-preempted").title = preemptionTitle(view.disk_tier && view.disk_tier.preemption);
  $("count-steps").textContent = String(view.steps);
  const p = view.prefix_cache;
  $("prefix-hit-rate").textContent = p.enabled ? percent(p.hit_tokens, p.queried_tokens) : "off";
  $("prefix-hit-rate").title = p.enabled ? `${p.hit_tokens} of ${p.queried_tokens} prompt tokens found cached; ${p.evictions} pages evicted` : "";
  $("sessions").textContent = `${view.sessions.open}`;
  $("sessions").title = `${view.sessions.tokens} tokens held`;
  const spec = view.spec;
  $("spec-acceptance").textContent = spec.draft_tokens > 0 ? percent(spec.accepted_tokens, spec.draft_tokens) : "none yet";
  $("spec-acceptance").title =
    `${spec.accepted_tokens} of ${spec.draft_tokens} draft tokens accepted in ${spec.drafts} drafts ` +
    `(shared pool ${spec.pool_accepted_tokens} of ${spec.pool_draft_tokens}, ` +
    `grammar-forced ${spec.forced_accepted_tokens} of ${spec.forced_draft_tokens}); ` +
    `--spec auto: ${spec.auto_steps_with_drafts} decode steps with drafts, ${spec.auto_steps_without_drafts} without`;
  renderRequests(view.sequences);
  drawSteps(view.recent_steps);
  drawPageMap(view.kv);
  drawHistogram("ttft-chart", "ttft-summary", view.ttft);
  drawHistogram("itl-chart", "itl-summary", view.itl);
  document.body.dataset.version = String(view.version);
}

async function follow() {
  for (;;) {
    try {
      const response = await apiFetch("/v1/engine/events");
      $("connection").textContent = "live";
      $("connection").className = "connection live";
      for await (const data of sseData(response)) render(JSON.parse(data));
      $("connection").textContent = "stream ended; reconnecting…";
    } catch (error) {
      $("connection").textContent = `${error.message}; retrying…`;
    }
    $("connection").className = "connection muted";
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

setUpKeyControls();
follow();

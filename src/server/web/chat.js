// The chat playground: conversations kept in this browser (localStorage), replies streamed from
// /v1/chat/completions and rendered as Markdown (markdown.js builds DOM, never HTML), a stop
// button that aborts the request (the server cancels the generation when the client goes away),
// regenerate, per-reply time to first token and tokens/s. Keyboard: Enter sends, Shift+Enter is
// a new line, Escape stops, Alt+N starts a new conversation; every control is a focusable button.
import { apiFetch, setUpKeyControls, sseData } from "/web/common.js";
import { renderMarkdown } from "/web/markdown.js";

const STORE = "drift.conversations";
const SETTINGS = "drift.chatSettings";

const $ = (id) => document.getElementById(id);
const ui = {
  conversations: $("conversations"),
  messages: $("messages"),
  input: $("input"),
  send: $("send"),
  stop: $("stop"),
  regenerate: $("regenerate"),
  error: $("error"),
  system: $("system-prompt"),
  temperature: $("temperature"),
  topP: $("top-p"),
  maxTokens: $("max-tokens"),
};

let conversations = loadConversations();
let current = conversations[0] || newConversation();
let running = null;  // { controller, message } while a reply streams

function loadConversations() {
  try {
    const list = JSON.parse(localStorage.getItem(STORE) || "[]");
    return Array.isArray(list) ? list.filter((c) => c && Array.isArray(c.messages)) : [];
  } catch (_) {
    return [];
  }
}

function save() {
  localStorage.setItem(STORE, JSON.stringify(conversations.filter((c) => c.messages.length > 0)));
}

function newConversation() {
  const conversation = { id: `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`, title: "", messages: [] };
  conversations.unshift(conversation);
  return conversation;
}

function loadSettings() {
  let s = {};
  try {
    s = JSON.parse(localStorage.getItem(SETTINGS) || "{}") || {};
  } catch (_) {}
  if (typeof s.system === "string") ui.system.value = s.system;
  if (s.temperature !== undefined) ui.temperature.value = s.temperature;
  if (s.topP !== undefined) ui.topP.value = s.topP;
  if (s.maxTokens !== undefined) ui.maxTokens.value = s.maxTokens;
}

function saveSettings() {
  localStorage.setItem(
    SETTINGS,
    JSON.stringify({ system: ui.system.value, temperature: ui.temperature.value, topP: ui.topP.value, maxTokens: ui.maxTokens.value }),
  );
}

// ---- rendering ----

function renderConversationList() {
  ui.conversations.replaceChildren();
  for (const conversation of conversations) {
    if (conversation.messages.length === 0 && conversation !== current) continue;
    const li = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "conversation" + (conversation === current ? " current" : "");
    button.textContent = conversation.title || "New conversation";
    button.setAttribute("aria-current", conversation === current ? "true" : "false");
    button.addEventListener("click", () => select(conversation));
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "delete";
    remove.textContent = "×";
    remove.title = "Delete this conversation";
    remove.setAttribute("aria-label", `Delete conversation ${button.textContent}`);
    remove.addEventListener("click", () => removeConversation(conversation));
    li.append(button, remove);
    ui.conversations.append(li);
  }
}

function statsText(stats) {
  if (!stats) return "";
  const parts = [];
  if (stats.ttft !== undefined) parts.push(`TTFT ${(stats.ttft * 1000).toFixed(0)} ms`);
  if (stats.tokens !== undefined) parts.push(`${stats.tokens} tokens`);
  if (stats.tokensPerSecond !== undefined) parts.push(`${stats.tokensPerSecond.toFixed(1)} tokens/s`);
  if (stats.finish) parts.push(stats.finish);
  return parts.join(" · ");
}

function messageElement(message) {
  const article = document.createElement("article");
  article.className = `message ${message.role}`;
  const role = document.createElement("div");
  role.className = "role";
  role.textContent = message.role === "user" ? "You" : "Assistant";
  const body = document.createElement("div");
  body.className = "body";
  // The user's text as typed; the model's as Markdown (built from text nodes only).
  if (message.role === "user") {
    body.textContent = message.content;
  } else {
    body.append(renderMarkdown(message.content));
  }
  const stats = document.createElement("div");
  stats.className = "stats";
  stats.textContent = statsText(message.stats);
  article.append(role, body, stats);
  message.element = { body, stats };
  return article;
}

function renderMessages() {
  ui.messages.replaceChildren(...current.messages.map(messageElement));
  ui.messages.scrollTop = ui.messages.scrollHeight;
  updateButtons();
}

function updateReply(message) {
  if (!message.element) return;
  message.element.body.replaceChildren(renderMarkdown(message.content));
  message.element.stats.textContent = statsText(message.stats);
  const nearBottom = ui.messages.scrollHeight - ui.messages.scrollTop - ui.messages.clientHeight < 80;
  if (nearBottom) ui.messages.scrollTop = ui.messages.scrollHeight;
}

function updateButtons() {
  const busy = running !== null;
  ui.send.disabled = busy;
  ui.stop.disabled = !busy;
  const last = current.messages[current.messages.length - 1];
  ui.regenerate.disabled = busy || !last || last.role !== "assistant";
}

function showError(text) {
  ui.error.hidden = !text;
  ui.error.textContent = text || "";
}

// ---- actions ----

function select(conversation) {
  if (running) stop();
  current = conversation;
  renderConversationList();
  renderMessages();
  ui.input.focus();
}

function removeConversation(conversation) {
  if (conversation === current && running) stop();
  conversations = conversations.filter((c) => c !== conversation);
  if (conversation === current) current = conversations[0] || newConversation();
  save();
  renderConversationList();
  renderMessages();
}

function requestBody() {
  const messages = [];
  const system = ui.system.value.trim();
  if (system) messages.push({ role: "system", content: system });
  for (const m of current.messages) if (m.content || m.role === "user") messages.push({ role: m.role, content: m.content });
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  const number = (input) => (input.value.trim() === "" ? undefined : Number(input.value));
  const temperature = number(ui.temperature);
  const topP = number(ui.topP);
  const maxTokens = number(ui.maxTokens);
  if (temperature !== undefined) body.temperature = temperature;
  if (topP !== undefined) body.top_p = topP;
  if (maxTokens !== undefined) body.max_tokens = Math.max(1, Math.round(maxTokens));
  return body;
}

async function generateReply() {
  showError("");
  const body = requestBody();
  const reply = { role: "assistant", content: "", stats: {} };
  current.messages.push(reply);
  ui.messages.append(messageElement(reply));
  ui.messages.scrollTop = ui.messages.scrollHeight;
  const controller = new AbortController();
  running = { controller, reply };
  updateButtons();
  const started = performance.now();
  let firstToken = null;
  let pending = false;
  const redraw = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      updateReply(reply);
    });
  };
  try {
    const response = await apiFetch("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    for await (const data of sseData(response)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message || "the server ended the stream with an error");
      const choice = chunk.choices && chunk.choices[0];
      if (choice && choice.delta && choice.delta.content) {
        if (firstToken === null) {
          firstToken = performance.now();
          reply.stats.ttft = (firstToken - started) / 1000;
        }
        reply.content += choice.delta.content;
        redraw();
      }
      if (choice && choice.finish_reason) reply.stats.finish = choice.finish_reason;
      if (chunk.usage) reply.stats.tokens = chunk.usage.completion_tokens;
    }
  } catch (error) {
    if (error.name === "AbortError") {
      reply.stats.finish = "stopped";
    } else {
      reply.stats.finish = "error";
      showError(error.message);
    }
  } finally {
    const ended = performance.now();
    if (firstToken !== null) {
      const tokens = reply.stats.tokens;
      // Tokens after the first, over the time after it: the decode rate the user saw.
      if (tokens !== undefined && tokens > 1 && ended > firstToken)
        reply.stats.tokensPerSecond = (tokens - 1) / ((ended - firstToken) / 1000);
    }
    running = null;
    updateReply(reply);
    updateButtons();
    save();
    renderConversationList();
  }
}

function send() {
  const text = ui.input.value;
  if (running || text.trim() === "") return;
  ui.input.value = "";
  if (!current.title) current.title = text.trim().slice(0, 60);
  const message = { role: "user", content: text };
  current.messages.push(message);
  ui.messages.append(messageElement(message));
  save();
  renderConversationList();
  generateReply();
}

function stop() {
  if (running) running.controller.abort();
}

function regenerate() {
  if (running) return;
  const last = current.messages[current.messages.length - 1];
  if (!last || last.role !== "assistant") return;
  current.messages.pop();
  renderMessages();
  generateReply();
}

// ---- wiring ----

setUpKeyControls();
loadSettings();
for (const input of [ui.system, ui.temperature, ui.topP, ui.maxTokens]) input.addEventListener("change", saveSettings);
$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
ui.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && running) {
    event.preventDefault();
    stop();
  } else if (event.altKey && (event.key === "n" || event.key === "N")) {
    event.preventDefault();
    $("new-chat").click();
  }
});
ui.stop.addEventListener("click", stop);
ui.regenerate.addEventListener("click", regenerate);
$("new-chat").addEventListener("click", () => {
  if (current.messages.length === 0) return ui.input.focus();
  select(newConversation());
});
renderConversationList();
renderMessages();
ui.input.focus();

apiFetch("/v1/models")
  .then((r) => r.json())
  .then((models) => {
    const model = models.data && models.data[0];
    if (model) $("model-name").textContent = model.id;
  })
  .catch((error) => showError(error.message));

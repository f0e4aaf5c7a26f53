// Shared by both pages: the API key (asked once, kept in this browser's localStorage) and
// Server-Sent Events read from a fetch() response (EventSource cannot send an Authorization
// header).

const KEY_STORAGE = "drift.apiKey";

export function storedKey() {
  return localStorage.getItem(KEY_STORAGE) || "";
}

// Shows the page's key dialog and resolves with what the user typed (stored for next time).
function askForKey(message) {
  const dialog = document.getElementById("key-dialog");
  const input = dialog.querySelector("input");
  dialog.querySelector(".key-message").textContent = message;
  input.value = "";
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        const key = input.value.trim();
        if (dialog.returnValue === "ok" && key) localStorage.setItem(KEY_STORAGE, key);
        resolve(dialog.returnValue === "ok" ? key : null);
      },
      { once: true },
    );
    dialog.showModal();
    input.focus();
  });
}

// fetch() with the stored key; on 401 asks for the key once and retries. Throws an Error with
// the server's message on any other failure.
export async function apiFetch(path, options = {}) {
  for (let attempt = 0; ; attempt++) {
    const headers = new Headers(options.headers || {});
    const key = storedKey();
    if (key) headers.set("Authorization", `Bearer ${key}`);
    const response = await fetch(path, { ...options, headers });
    if (response.status === 401 && attempt < 2) {
      const typed = await askForKey(
        key ? "The server refused this API key. Enter the right one:" : "This server needs an API key:",
      );
      if (typed === null) throw new Error("no API key given");
      continue;
    }
    if (!response.ok) {
      let message = `${response.status} ${response.statusText}`;
      try {
        const body = await response.json();
        if (body && body.error && body.error.message) message = body.error.message;
      } catch (_) {
        // not JSON: keep the status line
      }
      throw new Error(message);
    }
    return response;
  }
}

// Yields the data of each event of a text/event-stream response ("[DONE]" included).
export async function* sseData(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5))
        .join("\n");
      if (data) yield data;
    }
  }
}

// Wires the key dialog's buttons and the "forget key" control of a page.
export function setUpKeyControls() {
  const dialog = document.getElementById("key-dialog");
  dialog.querySelector("form").addEventListener("submit", (event) => {
    event.preventDefault();
    dialog.close(event.submitter && event.submitter.value === "cancel" ? "cancel" : "ok");
  });
  const forget = document.getElementById("forget-key");
  if (forget)
    forget.addEventListener("click", () => {
      localStorage.removeItem(KEY_STORAGE);
      forget.textContent = "Key forgotten";
      setTimeout(() => (forget.textContent = "Forget API key"), 1500);
    });
}

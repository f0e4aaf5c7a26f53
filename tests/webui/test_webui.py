"""The web page in a real browser: chat, stop, the live engine view, safe Markdown."""
import json
import threading
import time

import httpx

from conftest import API_KEY, OUTPUT


def open_with_key(page, server, path):
    """Opens `path`; the first time, the page asks for the API key, which is then kept."""
    page.goto(server.url + path)
    if page.evaluate("localStorage.getItem('drift.apiKey')") == API_KEY:
        assert not page.locator("#key-dialog").is_visible()
        return
    dialog = page.locator("#key-dialog")
    dialog.wait_for(state="visible")
    dialog.locator("input").fill(API_KEY)
    dialog.locator("input").press("Enter")
    dialog.wait_for(state="hidden")


def metric(server, name):
    return server.metrics().get(name, 0.0)


def with_ignore_eos(route):
    """The page's own request, with ignore_eos added so that a reply runs to max_tokens."""
    body = json.loads(route.request.post_data)
    body["ignore_eos"] = True
    route.continue_(post_data=json.dumps(body))


def test_pages_are_served_with_their_headers(server):
    # No key needed for the page itself; the API it calls needs one.
    for path, kind in [("/", "text/html"), ("/engine", "text/html"), ("/web/chat.js", "text/javascript"),
                       ("/web/style.css", "text/css")]:
        r = httpx.get(server.url + path)
        assert r.status_code == 200, path
        assert r.headers["content-type"].startswith(kind)
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert r.headers["cache-control"] == "no-cache"
        assert r.headers["x-content-type-options"] == "nosniff"
        again = httpx.get(server.url + path, headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
    assert httpx.get(server.url + "/web/chat.html").status_code == 404
    assert httpx.get(server.url + "/web/nothing.js").status_code == 404
    assert httpx.get(server.url + "/v1/engine/events").status_code == 401


def test_chat_streams_a_reply_and_keeps_the_key(server, page):
    open_with_key(page, server, "/")
    page.locator("#settings summary").click()
    page.locator("#max-tokens").fill("160")
    page.locator("#temperature").fill("0")
    page.route("**/v1/chat/completions", with_ignore_eos)
    # Record every length the reply's text takes while it streams (160 tokens: on a loaded
    # machine a 40-token reply arrived before the browser drew it once).
    page.evaluate("""() => {
      window.replyLengths = [];
      new MutationObserver(() => {
        const body = document.querySelector('.message.assistant .body');
        if (body) window.replyLengths.push(body.textContent.length);
      }).observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true});
    }""")
    page.locator("#input").fill("Name three colors.")
    page.locator("#input").press("Enter")
    stats = page.locator(".message.assistant .stats")
    stats.filter(has_text="tokens/s").wait_for()
    reply = page.locator(".message.assistant .body").inner_text()
    assert len(reply.split()) >= 5, reply
    assert "160 tokens" in stats.inner_text() and "TTFT" in stats.inner_text()
    lengths = sorted(set(l for l in page.evaluate("window.replyLengths") if l > 0))
    assert len(lengths) >= 3, f"the reply did not appear piece by piece: {lengths}"
    page.screenshot(path=str(OUTPUT / "chat.png"))
    # The conversation and the key are kept: a reload shows both without asking again.
    page.reload()
    page.locator(".message.assistant .body").wait_for()
    assert not page.locator("#key-dialog").is_visible()
    assert page.locator(".conversation.current").inner_text().startswith("Name three colors")
    assert page.evaluate("localStorage.getItem('drift.apiKey')") == API_KEY


def test_stop_cancels_the_request(server, page):
    open_with_key(page, server, "/")
    page.locator("#new-chat").click()
    page.locator("#settings summary").click()
    page.locator("#max-tokens").fill("3000")
    page.route("**/v1/chat/completions", with_ignore_eos)
    cancelled = metric(server, 'vllm:request_success_total{finished_reason="cancelled"}')
    disconnects = metric(server, "drift:client_disconnects_total")
    page.locator("#input").fill("Tell me a long story about a lighthouse keeper.")
    page.locator("#input").press("Enter")
    page.wait_for_function(
        "() => document.querySelector('.message.assistant .body')?.textContent.length > 20")
    page.keyboard.press("Escape")  # the stop button's shortcut
    page.locator(".message.assistant .stats").filter(has_text="stopped").wait_for()
    assert page.locator("#send").is_enabled() and page.locator("#stop").is_disabled()
    # The engine counts the cancel before the server counts the disconnect: wait for both.
    deadline = time.time() + 10
    while time.time() < deadline:
        m = server.metrics()
        if (m['vllm:request_success_total{finished_reason="cancelled"}'] > cancelled and
                m["drift:client_disconnects_total"] > disconnects):
            break
        time.sleep(0.1)
    assert metric(server, 'vllm:request_success_total{finished_reason="cancelled"}') == cancelled + 1
    assert metric(server, "drift:client_disconnects_total") == disconnects + 1
    generated = page.locator(".message.assistant .body").inner_text()
    assert 0 < len(generated.split()) < 3000


def test_engine_view_shows_eight_running_requests(server, page):
    open_with_key(page, server, "/engine")
    page.locator("#connection").filter(has_text="live").wait_for()
    stop = threading.Event()

    def one_request(i):
        body = {"messages": [{"role": "user", "content": f"Count to {100 + i}."}], "max_tokens": 400,
                "ignore_eos": True, "stream": True}
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body,
                          headers=server.headers(), timeout=60) as r:
            for _ in r.iter_lines():
                if stop.is_set():
                    return  # leaving the stream cancels the request

    threads = [threading.Thread(target=one_request, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    try:
        page.wait_for_function("""() =>
            document.getElementById('count-running').textContent === '8' &&
            document.querySelectorAll('#requests tbody tr.decode').length === 8 &&
            Number(document.getElementById('page-map').dataset.used) > 0""")
        # The drafts card is drawn from the view (their acceptance, or none yet).
        acceptance = page.locator("#spec-acceptance").inner_text()
        assert acceptance == "none yet" or acceptance.endswith("%"), acceptance
        used = int(page.locator("#page-map").get_attribute("data-used"))
        # Each sequence holds pages for its prompt and the tokens it has generated so far.
        assert 8 <= used <= int(page.locator("#page-map").get_attribute("data-total"))
        # The step chart moves: a later snapshot has run more steps.
        steps = int(page.locator("#count-steps").inner_text())
        page.wait_for_function(
            "(steps) => Number(document.getElementById('count-steps').textContent) > steps", arg=steps)
        page.wait_for_timeout(600)  # a few more steps in the chart for the picture
        page.screenshot(path=str(OUTPUT / "engine.png"), full_page=True)
    finally:
        stop.set()
        for t in threads:
            t.join()
    # Once they are gone the view says so.
    page.wait_for_function("() => document.getElementById('count-running').textContent === '0'")


def test_markdown_renders_hostile_text_as_text(server, page):
    open_with_key(page, server, "/")
    hostile = ('Look: <script>window.pwned = 1</script> and <img src=x onerror="window.pwned = 2">\n\n'
               '```html\n<img src=x onerror="window.pwned = 3">\n```\n'
               '[click](javascript:window.pwned=4) **bold <b>not html</b>**')
    result = page.evaluate("""async (text) => {
      const { renderMarkdown } = await import('/web/markdown.js');
      const node = renderMarkdown(text);
      document.body.append(node);
      await new Promise((resolve) => setTimeout(resolve, 300));
      return {
        elements: [...node.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()),
        text: node.textContent,
        links: [...node.querySelectorAll('a')].length,
        pwned: window.pwned ?? null,
      };
    }""", hostile)
    assert result["pwned"] is None
    assert not {"script", "img", "b"} & set(result["elements"]), result["elements"]
    assert {"pre", "code", "strong"} <= set(result["elements"])
    assert result["links"] == 0
    assert '<script>window.pwned = 1</script>' in result["text"]
    assert '<img src=x onerror="window.pwned = 3">' in result["text"]
    # And through the real chat: the message (and whatever the model makes of it) stays text.
    page.locator("#new-chat").click()
    page.locator("#settings summary").click()
    page.locator("#max-tokens").fill("24")
    page.locator("#input").fill('Repeat exactly: <img src=x onerror="window.pwned = 5"><script>window.pwned = 6</script>')
    page.locator("#input").press("Enter")
    page.locator(".message.assistant .stats").filter(has_text="tokens").wait_for()
    assert page.evaluate("window.pwned ?? null") is None
    assert page.locator("#messages img, #messages script").count() == 0
    assert "<script>" in page.locator(".message.user .body").inner_text()


def test_no_webui_turns_the_page_off():
    from conftest import Server
    s = Server("--kv-mib", "32", "--no-webui")
    try:
        assert httpx.get(s.url + "/").status_code == 404
        assert httpx.get(s.url + "/web/chat.js").status_code == 404
        assert httpx.get(s.url + "/v1/models").status_code == 200
    finally:
        assert s.stop() == 0

#!/usr/bin/env python3
"""What the live engine view costs decode: a batched workload (--parallel streams at once, each
generating --gen tokens with ignore_eos) against one `drift serve`, in rounds that alternate
between no viewer, curl reading GET /v1/engine/events (what the /engine page reads: the
engine then takes snapshots at step boundaries), and, with --browser, the /engine page itself
open in headless Debian chromium (which also draws on the same cores). Aggregate decode tokens/s
is the generated tokens over the span from the first send to the last token; prints medians
(min-max) over --rounds rounds per mode.

  bench/engine_view_overhead.py [-m MODEL] [--parallel 16] [--gen 128] [--rounds 3] [--browser]
"""
import argparse
import concurrent.futures
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import DRIFT, default_model  # noqa: E402
from http_client import ServerProcess, stream_completion  # noqa: E402

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class EventReader:
    """curl reading /v1/engine/events in a process of its own (a thread here would take the GIL
    from the load's client threads); counts the snapshots it got."""

    def __init__(self, url):
        self.url, self.events = url, 0

    def __enter__(self):
        self.output = tempfile.NamedTemporaryFile(prefix="drift-engine-events-", suffix=".txt")
        self.process = subprocess.Popen(["curl", "-sN", self.url + "/v1/engine/events"],
                                        stdout=self.output, stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait()
        with open(self.output.name, "rb") as f:
            self.events = sum(1 for line in f if line.startswith(b"data:"))
        self.output.close()


class BrowserPage:
    """The /engine page open in headless chromium (Playwright drives Debian's browser)."""

    def __init__(self, url):
        self.url = url

    def __enter__(self):
        from playwright.sync_api import sync_playwright
        self.playwright = sync_playwright().start()
        self.context = self.playwright.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="drift-bench-profile-"), executable_path="/usr/bin/chromium",
            headless=True, args=CHROMIUM_FLAGS, viewport={"width": 1280, "height": 860})
        self.page = self.context.new_page()
        self.page.goto(self.url + "/engine")
        self.page.locator("#connection").filter(has_text="live").wait_for()
        self.first_version = self.version()
        self.events = 0
        return self

    def version(self):
        return int(self.page.evaluate("document.body.dataset.version || '0'"))

    def __exit__(self, *exc):
        self.events = self.version() - self.first_version  # snapshots the page drew
        self.context.close()
        self.playwright.stop()


def batch(url, parallel, gen, seed):
    """`parallel` streams at once; returns aggregate decode tokens/s."""
    bodies = [{"prompt": f"Story {seed}-{i}: once upon a time", "max_tokens": gen, "temperature": 0,
               "ignore_eos": True} for i in range(parallel)]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        results = list(pool.map(lambda b: stream_completion(url, b), bodies))
    errors = [r.error for r in results if r.error]
    if errors:
        raise RuntimeError(f"requests failed: {errors[:3]}")
    tokens = sum(r.usage["completion_tokens"] for r in results)
    last = max(r.token_times[-1] for r in results)
    return tokens / (last - start)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--drift", default=DRIFT)
    p.add_argument("-m", "--model", default=default_model())
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--parallel", type=int, default=16)
    p.add_argument("--gen", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--browser", action="store_true", help="also a round with the /engine page open")
    args = p.parse_args()

    modes = {"no viewer": None, "events stream": EventReader}
    if args.browser:
        modes["engine page"] = BrowserPage
    rates = {mode: [] for mode in modes}
    snapshots = {mode: 0 for mode in modes}
    server_args = ["--parallel", str(args.parallel), "--threads", str(args.threads), "--kv-mib", "256"]
    with ServerProcess.drift(args.model, server_args, drift=args.drift) as server:
        batch(server.url, args.parallel, 16, seed=-1)  # warm-up: pages, step cost model
        for r in range(args.rounds):
            for mode, viewer in modes.items():
                if viewer is None:
                    rates[mode].append(batch(server.url, args.parallel, args.gen, seed=r))
                else:
                    with viewer(server.url) as v:
                        time.sleep(0.5)  # the viewer is reading before the batch starts
                        rates[mode].append(batch(server.url, args.parallel, args.gen, seed=r))
                        snapshots[mode] += v.events
                print(f"round {r + 1}: {mode}: {rates[mode][-1]:.1f} t/s", file=sys.stderr)
    base = statistics.median(rates["no viewer"])
    print(f"{args.parallel} streams x {args.gen} tokens, {args.threads} threads, {args.rounds} rounds")
    print(f"{'mode':<15} {'decode t/s median (min-max)':<30} {'vs no viewer':>12}")
    for mode, values in rates.items():
        m = statistics.median(values)
        extra = f"  ({snapshots[mode]} snapshots read)" if snapshots[mode] else ""
        print(f"{mode:<15} {m:7.1f} ({min(values):.1f}-{max(values):.1f}){'':<12} {m / base:11.3f}x{extra}")


if __name__ == "__main__":
    main()

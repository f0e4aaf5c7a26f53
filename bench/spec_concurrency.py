#!/usr/bin/env python3
"""Speculative decoding under load (issue 31): the aggregate decode t/s of drift serve at 1 to N
concurrent requests of the speculative benchmark's mix (bench/spec_decode.py's workloads), with
each drafting mode against `--spec none`, greedy.

Every round starts a fresh server per mode (its --parallel the largest level), warms it up, then
runs the levels in order; the modes' order alternates between rounds. At level c, c clients each
send --per-client workloads of the mix one after the other (client k starts at workload k), so c
requests run at once for most of the level; aggregate t/s = completion tokens of the level / its
wall time.
Per level and mode it prints the median (min-max) aggregate t/s, the ratio to the first mode, the
draft acceptance, and whether every reply's greedy text equalled the first mode's (it must); with
--plot it writes an SVG of the speed-up against concurrency, one line per mode and model.

  bench/spec_concurrency.py [-m MODEL ...] [--modes none,auto] [--levels 1,2,4,8,16] [--rounds 3]
                            [-n 96] [--per-client 2] [--plot docs/spec_concurrency.svg]
"""
import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import cpu_model, drift_commit, fmt_summary, summary  # noqa: E402
from http_client import ServerProcess, stream_completion  # noqa: E402
from spec_decode import (MODES, WARM_UP, WORKLOADS, add_common_args,  # noqa: E402
                         has_chat_template, parse_common_args, plain_prompt, spec_counters)


def one_request(url, messages, n, chat):
    body = {"max_tokens": n, "temperature": 0}
    if chat:
        r = stream_completion(url, dict(body, messages=messages), path="/v1/chat/completions")
    else:
        r = stream_completion(url, dict(body, prompt=plain_prompt(messages)))
    if r.error or not r.usage:
        raise RuntimeError(f"request failed: {r.error or 'no usage'}")
    return r.text, r.usage["completion_tokens"]


def run_level(url, level, per_client, workloads, n, chat):
    """Aggregate t/s of `level` clients sending `per_client` workloads each; {(client, i): text}."""
    texts, tokens, errors = {}, [0] * level, []

    def client(k):
        try:
            for i in range(per_client):
                w = workloads[(k + i) % len(workloads)]
                text, count = one_request(url, WORKLOADS[w], n, chat)
                texts[(k, i)] = text
                tokens[k] += count
        except Exception as e:  # noqa: BLE001 - reported below, the level is void
            errors.append(e)

    before = spec_counters(url)
    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(level)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - start
    if errors:
        raise errors[0]
    after = spec_counters(url)
    return {"tps": sum(tokens) / seconds, "texts": texts,
            "draft_tokens": after["draft_tokens"] - before["draft_tokens"],
            "accepted_tokens": after["accepted_tokens"] - before["accepted_tokens"]}


def bench_model(model, args):
    """{level: {mode: [result of each round]}} for one model."""
    results = {c: {m: [] for m in args.modes} for c in args.levels}
    chat = has_chat_template(model, args.drift)
    for rnd in range(args.rounds):
        order = args.modes if rnd % 2 == 0 else list(reversed(args.modes))
        for mode in order:
            extra = [*MODES.get(mode, ["--spec", mode]), "--parallel", str(max(args.levels)),
                     "-t", str(args.threads), *args.serve_args]
            with ServerProcess.drift(model, extra, drift=args.drift) as server:
                one_request(server.url, WARM_UP, 16, chat)
                for c in args.levels:
                    res = run_level(server.url, c, args.per_client, args.workloads, args.n, chat)
                    results[c][mode].append(res)
                    print(f"{os.path.basename(model)} round {rnd + 1} {mode:>6} c={c:<3} "
                          f"{res['tps']:7.1f} t/s, {res['accepted_tokens']:.0f}/"
                          f"{res['draft_tokens']:.0f} drafts accepted", file=sys.stderr)
    return results


def report(model, results, args):
    base = args.modes[0]
    print(f"\n{os.path.basename(model)}: aggregate decode t/s, median (min-max) of {args.rounds} "
          f"rounds; ratio to {base}")
    print(f"| concurrency | mode | t/s | ratio | acceptance | same text as {base} |")
    print("| ---: | --- | ---: | ---: | ---: | --- |")
    rows = []
    for c, by_mode in results.items():
        base_tps = summary([r["tps"] for r in by_mode[base]])["median"]
        for mode, runs in by_mode.items():
            tps = summary([r["tps"] for r in runs])
            drafted = sum(r["draft_tokens"] for r in runs)
            accepted = sum(r["accepted_tokens"] for r in runs)
            same = all(r["texts"] == b["texts"] for r, b in zip(runs, by_mode[base]))
            ratio = tps["median"] / base_tps
            rows.append({"concurrency": c, "mode": mode, "tps": tps, "ratio": ratio,
                         "draft_tokens": drafted, "accepted_tokens": accepted, "same_text": same})
            acc = f"{100 * accepted / drafted:.0f}% of {drafted:.0f}" if drafted else "-"
            print(f"| {c} | {mode} | {fmt_summary(tps)} | {ratio:.2f} | {acc} | "
                  f"{'yes' if same else 'NO'} |")
    return rows


def write_plot(path, series, levels):
    """An SVG line chart: speed-up over the baseline (y) against concurrency (x, log2 scale)."""
    width, height, left, bottom, top, right = 640, 360, 60, 50, 20, 170
    ratios = [r for points in series.values() for _, r in points] + [1.0]
    y_max = max(2.0, max(ratios) * 1.1)
    x_of = {c: left + (width - left - right) * i / max(1, len(levels) - 1)
            for i, c in enumerate(levels)}

    def y_of(r):
        return top + (height - top - bottom) * (1 - r / y_max)

    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'font-family="sans-serif" font-size="11">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    for tick in [0.5 * k for k in range(int(y_max / 0.5) + 1)]:
        y = y_of(tick)
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" '
                     f'stroke="{"#888" if tick == 1.0 else "#eee"}"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:.1f}x</text>')
    for c, x in x_of.items():
        parts.append(f'<text x="{x:.1f}" y="{height - bottom + 16}" text-anchor="middle">{c}</text>')
    parts.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 12}" '
                 'text-anchor="middle">concurrent requests</text>')
    parts.append(f'<text x="14" y="{(top + height - bottom) / 2:.0f}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(top + height - bottom) / 2:.0f})">'
                 'aggregate t/s over --spec none</text>')
    for i, (name, points) in enumerate(series.items()):
        color = colors[i % len(colors)]
        path_d = " ".join(f"{'M' if k == 0 else 'L'}{x_of[c]:.1f},{y_of(r):.1f}"
                          for k, (c, r) in enumerate(points))
        parts.append(f'<path d="{path_d}" fill="none" stroke="{color}" stroke-width="2"/>')
        for c, r in points:
            parts.append(f'<circle cx="{x_of[c]:.1f}" cy="{y_of(r):.1f}" r="3" fill="{color}"/>')
        ly = top + 14 + 16 * i
        parts.append(f'<line x1="{width - right + 10}" x2="{width - right + 28}" y1="{ly - 4}" '
                     f'y2="{ly - 4}" stroke="{color}" stroke-width="2"/>')
        parts.append(f'<text x="{width - right + 32}" y="{ly}">{name}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("-n", type=int, default=96, help="max_tokens of each request")
    parser.add_argument("--modes", default="none,auto",
                        help="drafting modes, the first the baseline (default: %(default)s)")
    parser.add_argument("--levels", default="1,2,4,8,16", help="concurrent requests")
    parser.add_argument("--per-client", type=int, default=2,
                        help="requests each client sends one after the other at every level")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="the mix, a comma-separated subset of: " + ", ".join(WORKLOADS))
    parser.add_argument("--serve-args", default="", help="extra options of drift serve")
    parser.add_argument("--plot", help="write the speed-up against concurrency to this SVG")
    args = parser.parse_args()
    models = parse_common_args(args)
    args.levels = [int(x) for x in args.levels.split(",")]

    record = {"benchmark": "spec_concurrency", "drift_commit": drift_commit(), "cpu": cpu_model(),
              "threads": args.threads, "rounds": args.rounds, "max_tokens": args.n,
              "modes": args.modes, "levels": args.levels, "models": {}}
    series, all_same = {}, True
    for model in models:
        rows = report(model, bench_model(model, args), args)
        record["models"][os.path.basename(model)] = rows
        all_same = all_same and all(r["same_text"] for r in rows)
        name = os.path.basename(model).split(".")[0]
        for mode in args.modes[1:]:
            series[f"{name} {mode}"] = [(r["concurrency"], r["ratio"]) for r in rows
                                        if r["mode"] == mode]
    print(json.dumps(record))
    if args.plot:
        write_plot(args.plot, series, args.levels)
    if not all_same:
        print("error: a drafting mode changed drift's greedy text", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

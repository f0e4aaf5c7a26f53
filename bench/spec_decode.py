#!/usr/bin/env python3
"""Speculative decoding's single-stream benchmark (issue 31): decode t/s of drift serve with
`--spec none` against each drafting mode, on workloads where prompt lookup helps (a code edit,
a summary that quotes its text, a JSON rewrite, the same rewrite of other records, an agent's next
turn over a tool's output) and on one where it should not (free chat), greedy, one request at a
time. Modes: none, ngram (own history, then the pool shared across requests), ngram-own (own
history only), auto (ngram's drafts where drift measures that they pay), draft (a draft model's
drafts: --draft-model, default the model itself, which only shows the mechanism: a real pair is a
smaller model with the same vocabulary), auto-draft (auto with that draft model), and with
--llama-bin the
references: llama-server (no drafts) and llama-server-spec (its `--spec-default`, ngram-mod).
llama-server's texts are compared with llama-server's own (its numerics are not drift's).

Every round starts a fresh server per mode (so a pool of drafts shared across requests learns
nothing from an earlier round's identical request), warms it up with an unrelated request, then
runs each workload once; the modes' order alternates between rounds. Per workload and mode it
prints the median (min-max) decode t/s — completion tokens after the first over the time from
the first streamed token to the last — the draft tokens accepted (from /metrics), the ratio to
`none`, and whether the greedy text equalled `none`'s in every round (it must: speculation never
changes greedy output). A model without a chat template (a base model) gets each conversation as
a plain "Role: text" transcript through /v1/completions.

  bench/spec_decode.py [-m MODEL ...] [--modes none,ngram-own,ngram] [--rounds 3] [-n 192]
                       [--modes none,draft --draft-model GGUF]
                       [-t 2] [--workloads code_edit,chat]
                       [--llama-bin DIR --modes none,auto,llama-server,llama-server-spec]
"""
import argparse
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import DRIFT, cpu_model, default_model, drift_commit, fmt_summary, summary  # noqa: E402
from http_client import ServerProcess, stream_completion  # noqa: E402

CODE = '''import json
import os


def parse_config(path, defaults=None):
    """Reads a JSON configuration file and fills in the defaults."""
    if defaults is None:
        defaults = {}
    if not os.path.exists(path):
        return dict(defaults)
    with open(path) as f:
        data = json.load(f)
    config = dict(defaults)
    for key, value in data.items():
        if key in config and isinstance(config[key], dict) and isinstance(value, dict):
            merged = dict(config[key])
            merged.update(value)
            config[key] = merged
        else:
            config[key] = value
    return config


def save_config(path, config):
    """Writes the configuration back, sorted, so that diffs stay small."""
    with open(path, "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
'''

ARTICLE = (
    "The first lighthouses were fires lit on hilltops to guide ships into harbour. The "
    "Pharos of Alexandria, finished around 280 BC, stood more than a hundred metres tall and "
    "was counted among the wonders of the ancient world. For centuries afterwards, lights "
    "burned wood, coal or candles, and their keepers spent every night trimming wicks and "
    "cleaning soot from the glass. In 1822 Augustin Fresnel presented a lens made of "
    "concentric rings of glass prisms, which gathered the light of a single lamp into a beam "
    "that could be seen more than thirty kilometres away. The Fresnel lens spread to almost "
    "every coast within fifty years. Electric lamps replaced oil at the end of the nineteenth "
    "century, and automation in the twentieth century removed the need for keepers: the last "
    "keepers in Britain left their lighthouse in 1998. Today satellite navigation guides most "
    "ships, yet lighthouses still stand as a backup when electronic systems fail.")

RECORDS = json.dumps([
    {"id": 101, "name": "Desk lamp", "price": 24.5, "stock": 12, "tags": ["office", "light"]},
    {"id": 102, "name": "Bookshelf", "price": 89.0, "stock": 3, "tags": ["furniture"]},
    {"id": 103, "name": "Coffee mug", "price": 7.25, "stock": 40, "tags": ["kitchen"]},
    {"id": 104, "name": "Wall clock", "price": 31.0, "stock": 0, "tags": ["decor", "office"]},
    {"id": 105, "name": "Floor rug", "price": 120.0, "stock": 5, "tags": ["decor"]},
], indent=2)

RECORDS_AGAIN = json.dumps([
    {"id": 201, "name": "Tea kettle", "price": 39.0, "stock": 8, "tags": ["kitchen"]},
    {"id": 202, "name": "Armchair", "price": 249.5, "stock": 2, "tags": ["furniture", "decor"]},
    {"id": 203, "name": "Notebook", "price": 4.75, "stock": 120, "tags": ["office"]},
    {"id": 204, "name": "Table lamp", "price": 45.0, "stock": 6, "tags": ["light", "decor"]},
    {"id": 205, "name": "Cushion", "price": 19.0, "stock": 30, "tags": ["decor"]},
], indent=2)

TRACEBACK = '''$ python -m pytest tests/test_config.py
tests/test_config.py::test_nested_defaults FAILED
    def test_nested_defaults(tmp_path):
        path = tmp_path / "config.json"
        path.write_text('{"server": {"port": 8080}}')
        config = parse_config(str(path), {"server": {"host": "localhost", "port": 80}})
>       assert config["server"] == {"host": "localhost", "port": 8080}
E       KeyError: 'server'
'''

# name -> the chat messages of one request.
WORKLOADS = {
    "code_edit": [{"role": "user", "content":
                   "Rename the function parse_config to load_config everywhere in this file and "
                   "reply with the whole file, unchanged otherwise.\n\n```python\n" + CODE +
                   "```"}],
    "summary": [{"role": "user", "content":
                 "Summarise the text below in a few sentences, quoting its most important "
                 "sentences word for word.\n\n" + ARTICLE}],
    "json_rewrite": [{"role": "user", "content":
                      "Rewrite this JSON so that every price is a string with a dollar sign in "
                      "front, keeping every other field exactly as it is. Reply with the JSON "
                      "only.\n\n" + RECORDS}],
    # The same task on other records, after json_rewrite: the answer's shape was written
    # before, by another request (what a pool of drafts shared across requests predicts).
    "json_again": [{"role": "user", "content":
                    "Rewrite this JSON so that every price is a string with a dollar sign in "
                    "front, keeping every other field exactly as it is. Reply with the JSON "
                    "only.\n\n" + RECORDS_AGAIN}],
    "agent": [
        {"role": "system", "content": "You are a coding agent. You edit files and run tests."},
        {"role": "user", "content": "The test in tests/test_config.py fails. Fix config.py."},
        {"role": "assistant", "content": "Let me read config.py first.\n\n$ cat config.py"},
        {"role": "user", "content": "Output of the command:\n```python\n" + CODE + "```"},
        {"role": "assistant", "content": "Now I run the tests.\n\n$ python -m pytest"},
        {"role": "user", "content": "Output of the command:\n```\n" + TRACEBACK + "```\n"
         "Write the corrected config.py in full."}],
    "chat": [{"role": "user", "content":
              "Which season of the year do you like best, and why? Tell me in a few "
              "paragraphs."}],
}
WARM_UP = [{"role": "user", "content": "Name three colours."}]
# Drafting modes by name: drift serve's options for each. Any other name is a --spec value.
MODES = {
    "none": ["--spec", "none"],
    "ngram": ["--spec", "ngram"],  # own history, then the shared pool
    "ngram-own": ["--spec", "ngram", "--spec-pool-mib", "0"],  # own history only
}
# Modes with a draft model (--draft-model, default the benchmarked model itself).
DRAFT_MODES = {
    "draft": ["--spec", "draft"],
    "auto-draft": ["--spec", "auto"],
}
# llama-server's modes: its options for each, beside the model, port, threads and one slot.
LLAMA_MODES = {
    "llama-server": [],
    "llama-server-spec": ["--spec-default"],
}


def text_baseline(mode, modes):
    """The mode whose greedy text `mode`'s must equal: drift's first mode for drift's modes,
    llama-server's own (without drafts) for its modes."""
    if mode in LLAMA_MODES:
        return "llama-server" if "llama-server" in modes else mode
    return next(m for m in modes if m not in LLAMA_MODES)


def server_for(mode, model, args):
    if mode in LLAMA_MODES:
        if not args.llama_bin:
            raise SystemExit(f"mode {mode} needs --llama-bin")
        return ServerProcess.llama(args.llama_bin, model, [*LLAMA_MODES[mode], "-np", "1", "-t",
                                                           str(args.threads)])
    if mode in DRAFT_MODES:
        spec = [*DRAFT_MODES[mode], "--spec-draft-model", args.draft_model or model]
    else:
        spec = MODES.get(mode, ["--spec", mode])
    extra = [*spec, "--parallel", "1", "-t", str(args.threads),
             *args.serve_args]
    return ServerProcess.drift(model, extra, drift=args.drift)


def gemma_model():
    cache = os.environ.get("DRIFT_CACHE", os.path.expanduser("~/.cache/drift"))
    return os.path.join(cache, "gemma-3-270m-q4_k_m.gguf")


COUNTERS = {  # name in the result: /metrics counter
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
    "pool_draft_tokens": "drift:spec_decode_pool_draft_tokens_total",
    "pool_accepted_tokens": "drift:spec_decode_pool_accepted_tokens_total",
    "model_draft_tokens": "drift:spec_decode_draft_model_draft_tokens_total",
    "model_accepted_tokens": "drift:spec_decode_draft_model_accepted_tokens_total",
    "model_seconds": "drift:spec_decode_draft_model_seconds_total",
    "model_steps": "drift:spec_decode_draft_model_steps_total",
}


def spec_counters(url):
    """The speculative decoding counters of /metrics so far (0 for those it does not have, and
    all 0 for a server without /metrics: llama-server without --metrics)."""
    counts = dict.fromkeys(COUNTERS, 0.0)
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
            text = r.read().decode()
    except urllib.error.HTTPError:
        return counts
    for line in text.splitlines():
        for key, metric in COUNTERS.items():
            if line.startswith(metric + "{") or line.startswith(metric + " "):
                counts[key] += float(line.rsplit(" ", 1)[1])
    return counts


def has_chat_template(model, drift):
    """Whether the GGUF carries a chat template (`drift inspect` says "(none)" when not)."""
    out = subprocess.run([drift, "inspect", "-m", model], capture_output=True, text=True,
                         check=True).stdout
    return "chat template: (none)" not in out


def plain_prompt(messages):
    """The conversation as a plain transcript ending where the assistant speaks, for a base model
    (no chat template): the same texts to copy from, continued as a document."""
    turns = "".join(f"{m['role'].capitalize()}: {m['content']}\n\n" for m in messages)
    return turns + "Assistant:"


def run_one(url, messages, args, chat):
    before = spec_counters(url)
    body = {"max_tokens": args.n, "temperature": 0}
    if chat:
        r = stream_completion(url, dict(body, messages=messages), path="/v1/chat/completions")
    else:
        r = stream_completion(url, dict(body, prompt=plain_prompt(messages)))
    if r.error or not r.token_times or not r.usage:
        raise RuntimeError(f"request failed: {r.error or 'no tokens or usage'}")
    after = spec_counters(url)
    tokens = r.usage["completion_tokens"]
    span = r.token_times[-1] - r.token_times[0]
    result = {"text": r.text, "tokens": tokens,
              "decode_tps": (tokens - 1) / span if tokens > 1 and span > 0 else float("nan")}
    result.update({k: after[k] - before[k] for k in COUNTERS})
    return result


def bench_model(model, args):
    """{workload: {mode: [result of each round]}} for one model."""
    results = {w: {m: [] for m in args.modes} for w in args.workloads}
    chat = has_chat_template(model, args.drift)
    if not chat:
        print(f"{os.path.basename(model)} has no chat template: plain transcripts through "
              "/v1/completions", file=sys.stderr)
    for rnd in range(args.rounds):
        order = args.modes if rnd % 2 == 0 else list(reversed(args.modes))
        for mode in order:
            with server_for(mode, model, args) as server:
                run_one(server.url, WARM_UP, args, chat)
                for w in args.workloads:
                    res = run_one(server.url, WORKLOADS[w], args, chat)
                    results[w][mode].append(res)
                    print(f"{os.path.basename(model)} round {rnd + 1} {mode:>6} {w:<12} "
                          f"{res['tokens']:4d} tokens {res['decode_tps']:7.1f} t/s, "
                          f"{res['accepted_tokens']:.0f}/{res['draft_tokens']:.0f} drafts accepted"
                          + (f", draft model {res['model_accepted_tokens']:.0f}/"
                             f"{res['model_draft_tokens']:.0f}, "
                             f"{1e3 * res['model_seconds'] / res['model_steps']:.2f} ms a step"
                             if res["model_steps"] else ""),
                          file=sys.stderr)
    return results


def report(model, results, args):
    """Prints the table of one model and returns its rows for the JSON record."""
    base = args.modes[0]
    print(f"\n{os.path.basename(model)}: decode t/s, median (min-max) of {args.rounds} rounds; "
          f"ratio to {base}; acceptance = draft tokens accepted / verified; from the pool = "
          "accepted / verified of the drafts from the pool shared across requests")
    print("| workload | mode | tokens | decode t/s | ratio | acceptance | from the pool | "
          f"same text as {base} |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    rows = []
    for w, by_mode in results.items():
        base_tps = summary([r["decode_tps"] for r in by_mode[base]])["median"]
        for mode, runs in by_mode.items():
            tps = summary([r["decode_tps"] for r in runs])
            drafted = sum(r["draft_tokens"] for r in runs)
            accepted = sum(r["accepted_tokens"] for r in runs)
            acceptance = accepted / drafted if drafted else None
            pool_drafted = sum(r["pool_draft_tokens"] for r in runs)
            pool_accepted = sum(r["pool_accepted_tokens"] for r in runs)
            same = all(r["text"] == b["text"]
                       for r, b in zip(runs, by_mode[text_baseline(mode, args.modes)]))
            ratio = tps["median"] / base_tps
            rows.append({"workload": w, "mode": mode, "tokens": [r["tokens"] for r in runs],
                         "decode_tps": tps, "ratio": ratio, "draft_tokens": drafted,
                         "accepted_tokens": accepted, "acceptance": acceptance,
                         "pool_draft_tokens": pool_drafted, "pool_accepted_tokens": pool_accepted,
                         "same_text": same})
            acc = f"{100 * acceptance:.0f}% of {drafted:.0f}" if acceptance is not None else "-"
            pool = f"{pool_accepted:.0f}/{pool_drafted:.0f}" if pool_drafted else "-"
            model_drafted = sum(r["model_draft_tokens"] for r in runs)
            model_accepted = sum(r["model_accepted_tokens"] for r in runs)
            model_steps = sum(r["model_steps"] for r in runs)
            model_ms = 1e3 * sum(r["model_seconds"] for r in runs) / model_steps if model_steps else 0
            rows[-1].update({"model_draft_tokens": model_drafted,
                             "model_accepted_tokens": model_accepted,
                             "model_ms_per_step": model_ms})
            if model_drafted:
                pool += f"; draft model {model_accepted:.0f}/{model_drafted:.0f}, {model_ms:.1f} ms/step"
            print(f"| {w} | {mode} | {runs[-1]['tokens']} | {fmt_summary(tps)} | {ratio:.2f} | "
                  f"{acc} | {pool} | {'yes' if same else 'NO'} |")
    return rows


def add_common_args(parser):
    """The arguments both speculative benchmarks take first: the binary, the models, threads and
    rounds."""
    parser.add_argument("--drift", default=DRIFT)
    parser.add_argument("-m", "--model", action="append",
                        help="GGUF file; repeat for several (default: SmolLM2 and Gemma 3 of the "
                             "drift cache, those present)")
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)


def parse_common_args(args):
    """Splits the comma lists of the arguments both speculative benchmarks take (--modes,
    --workloads, --serve-args), checks the workloads, and returns the models to run."""
    args.modes = args.modes.split(",")
    args.workloads = args.workloads.split(",")
    args.serve_args = args.serve_args.split()
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
    models = args.model or [m for m in (default_model(), gemma_model()) if os.path.exists(m)]
    if not models:
        raise SystemExit("no model: give -m GGUF")
    return models


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("-n", type=int, default=192, help="max_tokens of each request")
    parser.add_argument("--modes", default="none,ngram",
                        help="drafting modes, the first the baseline: " + ", ".join(MODES) +
                             ", " + ", ".join(DRAFT_MODES) +
                             ", " + ", ".join(LLAMA_MODES) + " or another --spec value "
                             "(default: %(default)s)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated subset of: " + ", ".join(WORKLOADS))
    parser.add_argument("--llama-bin", help="llama.cpp's bin directory (llama-server), for the "
                                            "llama-server modes")
    parser.add_argument("--draft-model", help="the draft model of the draft and auto-draft modes "
                                              "(default: each benchmarked model drafts for itself)")
    parser.add_argument("--serve-args", default="",
                        help="extra options of drift serve, e.g. '--kv-mib 256'")
    args = parser.parse_args()
    models = parse_common_args(args)

    record = {"benchmark": "spec_decode", "drift_commit": drift_commit(), "cpu": cpu_model(),
              "threads": args.threads, "rounds": args.rounds, "max_tokens": args.n,
              "modes": args.modes, "models": {}}
    all_same = True
    for model in models:
        rows = report(model, bench_model(model, args), args)
        record["models"][os.path.basename(model)] = rows
        all_same = all_same and all(r["same_text"] for r in rows if r["mode"] not in LLAMA_MODES)
        for r in rows:
            if r["mode"] in LLAMA_MODES and not r["same_text"]:
                print(f"note: {r['mode']} changed llama-server's greedy text on {r['workload']}",
                      file=sys.stderr)
    print(json.dumps(record))
    if not all_same:
        print("error: a drafting mode changed drift's greedy text", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

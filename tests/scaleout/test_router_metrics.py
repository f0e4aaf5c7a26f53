"""/metrics as the routers in front of vLLM replicas scrape it: llm-d's inference scheduler and
KV cache manager, Dynamo, the vLLM production stack. /metrics is parsed with prometheus-client's
own text parser, and each family a router reads must be there with its type and move as the load
does: running and waiting requests, KV cache usage (current and older names), prefix cache
queries and hits in tokens (current and older names), the page size.
"""
import threading
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from conftest import MODEL_NAME, Server

# family (as prometheus-client names it: counters without _total) -> type
ROUTER_FAMILIES = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:gpu_cache_usage_perc": "gauge",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:gpu_prefix_cache_queries": "counter",
    "vllm:gpu_prefix_cache_hits": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:cache_config_info": "gauge",
}


def scrape(server):
    text = httpx.get(server.url + "/metrics", timeout=10).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    values = {}
    for f in families.values():
        for s in f.samples:
            assert s.labels["model_name"] == MODEL_NAME
            values[s.name] = s
    return families, values


def value(values, name):
    return values[name].value


def test_router_metrics_are_there_and_follow_the_load():
    # One sequence at a time: the second request must wait while the first runs.
    server = Server("--kv-mib", "32", "--parallel", "1", "--page-size", "16")
    try:
        families, values = scrape(server)
        for name, typ in ROUTER_FAMILIES.items():
            assert name in families, f"{name} missing"
            assert families[name].type == typ, (name, families[name].type)
        config = values["vllm:cache_config_info"].labels
        assert config["block_size"] == "16" and int(config["num_gpu_blocks"]) > 0
        assert config["enable_prefix_caching"] == "True"

        # Two long generations at once: one runs, one waits, and the KV cache is in use.
        client = server.client()
        prompt = "Tell me a long story about a lighthouse keeper. " * 8
        threads = [threading.Thread(target=client.completions.create,
                                    kwargs=dict(model=MODEL_NAME, prompt=prompt, max_tokens=96,
                                                temperature=0, extra_body={"ignore_eos": True}))
                   for _ in range(2)]
        for t in threads:
            t.start()
        seen = None
        deadline = time.time() + 60
        while time.time() < deadline and seen is None:
            _, v = scrape(server)
            if value(v, "vllm:num_requests_running") == 1 and \
                    value(v, "vllm:num_requests_waiting") == 1:
                seen = v
            time.sleep(0.02)
        for t in threads:
            t.join()
        assert seen is not None, "never saw one running and one waiting"
        assert 0 < value(seen, "vllm:kv_cache_usage_perc") <= 1
        assert value(seen, "vllm:gpu_cache_usage_perc") == value(seen, "vllm:kv_cache_usage_perc")

        # The second run of the same prompt found its pages cached: hits in tokens, under both
        # names.
        _, after = scrape(server)
        assert value(after, "vllm:num_requests_running") == 0
        assert value(after, "vllm:kv_cache_usage_perc") == 0
        ids = server.post("/tokenize", {"model": MODEL_NAME, "prompt": prompt}).json()["tokens"]
        assert value(after, "vllm:prefix_cache_queries_total") == 2 * len(ids)
        assert value(after, "vllm:prefix_cache_hits_total") >= len(ids) // 16 * 16 - 16
        assert value(after, "vllm:prefix_cache_hits_total") > 0
        for name in ("prefix_cache_queries_total", "prefix_cache_hits_total"):
            assert value(after, f"vllm:gpu_{name}") == value(after, f"vllm:{name}")
    finally:
        assert server.stop() == 0

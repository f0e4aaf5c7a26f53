"""drift replicas behind Ray Serve (pip install "ray[serve]"), one drift engine per replica:

    serve run drift.ray:build_app model=PATH num_replicas=2 threads=1

serves /v1/completions and /v1/chat/completions (streaming too), /v1/models and
/v1/drift/replicas (each replica's engine counters) through Ray's HTTP proxy (port 8000). An
ingress deployment parses each request and hands it to the engine deployment through a
PrefixAffinityRouter: requests whose prompts start alike go to the replica that served that
start before (its prefix cache holds the KV pages), others to the least loaded replica.

Arguments (all optional but model; values as `serve run` passes them, strings):
    model           a GGUF path or registry name (default: the default model)
    model_name      the name clients send (default: the file name without .gguf)
    num_replicas    engine replicas (2); each reserves `threads` CPUs, so Ray spreads them
    threads         compute threads per engine (1)
    kv_mib, parallel, page_size, max_queued, ...: drift engine options, as drift.LLM takes them
    routing         prefix_affinity (default) or power_of_two (Ray's default router)
"""

import hashlib
import json
from collections import OrderedDict
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from ray import serve
from ray.serve.config import RequestRouterConfig
from ray.serve.request_router import FIFOMixin, PendingRequest, RequestRouter, RunningReplica

from . import _drift
from .async_llm import AsyncLLM
from .models import resolve_model
from .openai_api import OpenAIRoutes, ParsedRequest, RequestError, parse_request


def prefix_blocks(text: str, block_chars: int, max_blocks: int) -> list[bytes]:
    """Chained hashes of the text's leading full blocks of `block_chars` characters: block i's
    hash covers everything before it, so equal hashes mean equal prefixes."""
    hashes, parent = [], b""
    for start in range(0, min(len(text) // block_chars, max_blocks) * block_chars, block_chars):
        parent = hashlib.blake2b(parent + text[start:start + block_chars].encode(),
                                 digest_size=8).digest()
        hashes.append(parent)
    return hashes


class PrefixAffinityRouter(FIFOMixin, RequestRouter):
    """Ray Serve request router (the custom router API): remembers which prompt prefixes each
    replica served, in blocks of characters, and sends a request to the replica that served the
    longest prefix of its prompt — unless that replica's queue is `imbalance` requests longer
    than the shortest, or nothing matches; then the least loaded replica (by Ray's cached queue
    lengths). The chosen replica is the first rank; the rest, the second, take the request if it
    refuses (a full queue)."""

    def initialize_state(self, block_chars: int = 64, max_blocks: int = 256,
                         blocks_per_replica: int = 65536, imbalance: int = 4, **kwargs):
        self._block_chars = block_chars
        self._max_blocks = max_blocks
        self._capacity = blocks_per_replica
        self._imbalance = imbalance
        self._blocks: dict = {}  # replica id -> OrderedDict of block hashes, least recent first
        self._chosen: dict = {}  # replica id -> number of the routing that last chose it
        self._choices = 0

    def _request_blocks(self, pending_request: PendingRequest | None) -> list[bytes]:
        if pending_request is None or not pending_request.args:
            return []
        request = pending_request.args[0]
        if not isinstance(request, ParsedRequest):
            return []
        return prefix_blocks(request.prefix_text(), self._block_chars, self._max_blocks)

    def _matched(self, replica_id, blocks: list[bytes]) -> int:
        owned = self._blocks.get(replica_id)
        if not owned:
            return 0
        n = 0
        while n < len(blocks) and blocks[n] in owned:
            n += 1
        return n

    def _queue_len(self, replica: RunningReplica) -> int:
        q = self.replica_queue_len_cache.get(replica.replica_id)
        return q if q is not None else 0

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None):
        if not candidate_replicas:
            return []
        blocks = self._request_blocks(pending_request)
        shortest = min(self._queue_len(r) for r in candidate_replicas)
        target, best_match = None, 0
        for r in candidate_replicas:
            m = self._matched(r.replica_id, blocks)
            if m > best_match and self._queue_len(r) <= shortest + self._imbalance:
                target, best_match = r, m
        if target is None:
            # Least loaded; among equals the one chosen longest ago, so that new prefixes and
            # unrelated prompts spread over idle replicas instead of piling onto the first.
            target = min(candidate_replicas,
                         key=lambda r: (self._queue_len(r), self._chosen.get(r.replica_id, -1)))
        self._choices += 1
        self._chosen[target.replica_id] = self._choices
        # Remembered now: Ray reports the replica that took a request (on_request_routed) only
        # when strict max_ongoing_requests is on. Should the target refuse (its queue full), the
        # next rank takes the request and this guess is wrong until the prefix comes again.
        self._remember(target.replica_id, blocks)
        return [[target], [r for r in candidate_replicas if r is not target]]

    def _remember(self, replica_id, blocks: list[bytes]) -> None:
        if not blocks:
            return
        owned = self._blocks.setdefault(replica_id, OrderedDict())
        for b in blocks:
            owned[b] = None
            owned.move_to_end(b)
        while len(owned) > self._capacity:
            owned.popitem(last=False)

    def on_request_routed(self, pending_request: PendingRequest, replica_id, result) -> None:
        self._remember(replica_id, self._request_blocks(pending_request))

    def on_replica_actor_died(self, replica_id):
        self._blocks.pop(replica_id, None)
        self._chosen.pop(replica_id, None)
        super().on_replica_actor_died(replica_id)


@serve.deployment
class ReplicaStats:
    """The engines' counters, as each replica last reported them (/v1/drift/replicas)."""

    def __init__(self):
        self._stats: dict[str, dict] = {}

    def report(self, replica: str, stats: dict) -> None:
        self._stats[replica] = stats

    def all(self) -> dict:
        return dict(self._stats)


@serve.deployment
class DriftEngine:
    """One drift engine (drift.AsyncLLM) answering parsed OpenAI requests."""

    def __init__(self, model: str, model_name: str, engine_options: dict, stats):
        self._llm = AsyncLLM(model, **engine_options)
        self._routes = OpenAIRoutes(self._llm, model_name)
        self._replica = serve.get_replica_context().replica_id.unique_id
        self._stats = stats

    async def _report(self) -> None:
        await self._stats.report.remote(self._replica, self._llm.stats())

    async def complete(self, request: ParsedRequest) -> dict:
        try:
            body = await self._routes.complete(request)
            return {"status": 200, "body": body, "replica": self._replica}
        except RequestError as e:
            return {"status": e.status, "body": e.body(), "replica": self._replica}
        finally:
            await self._report()

    async def stream(self, request: ParsedRequest):
        """First a status dict, then the event stream's lines."""
        try:
            events = self._routes.stream(request)
            try:
                first = await events.__anext__()
            except RequestError as e:
                yield {"status": e.status, "body": e.body(), "replica": self._replica}
                return
            yield {"status": 200, "replica": self._replica}
            yield first
            async for line in events:
                yield line
        finally:
            await self._report()


app = FastAPI()


@serve.deployment(ray_actor_options={"num_cpus": 0})
@serve.ingress(app)
class OpenAIIngress:
    def __init__(self, engine, stats, model_name: str):
        self._engine = engine
        self._stats = stats
        self._model_name = model_name

    async def _serve(self, request: Request, chat: bool):
        try:
            try:
                body = json.loads(await request.body())
            except (ValueError, RecursionError) as e:  # RecursionError: nested too deep
                raise RequestError(400, f"the request body is not JSON: {e}") from None
            parsed = parse_request(body, chat)
            if parsed.model is not None and parsed.model != self._model_name:
                raise RequestError(404, f"model '{parsed.model}' is not served here (this "
                                        f"server serves '{self._model_name}')", "model")
        except RequestError as e:
            return JSONResponse(e.body(), status_code=e.status)
        if not parsed.stream:
            r = await self._engine.complete.remote(parsed)
            return JSONResponse(r["body"], status_code=r["status"],
                                headers={"x-drift-replica": r["replica"]})
        events = self._engine.options(stream=True).stream.remote(parsed)
        head = await events.__anext__()
        if head["status"] != 200:
            return JSONResponse(head["body"], status_code=head["status"],
                                headers={"x-drift-replica": head["replica"]})
        return StreamingResponse(events, media_type="text/event-stream",
                                 headers={"x-drift-replica": head["replica"]})

    @app.post("/v1/completions")
    async def completions(self, request: Request):
        return await self._serve(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(self, request: Request):
        return await self._serve(request, chat=True)

    @app.get("/v1/models")
    async def models(self):
        return {"object": "list",
                "data": [{"id": self._model_name, "object": "model", "owned_by": "drift"}]}

    @app.get("/v1/drift/replicas")
    async def replicas(self):
        return await self._stats.all.remote()


_ENGINE_OPTION_TYPES = {"threads": int, "parallel": int, "ctx_size": int, "batch_tokens": int,
                        "kv_mib": float, "kv_ram_fraction": float, "page_size": int,
                        "kv_cache_dtype": str, "admission": str, "policy": str,
                        "max_queued": int, "default_max_tokens": int, "target_itl_ms": float,
                        "idle_step_ms": float,
                        "kv_events_endpoint": str, "kv_events_topic": str}


def build_app(args: dict):
    """The Serve application of `serve run drift.ray:build_app key=value ...`."""
    args = dict(args)
    model = resolve_model(args.pop("model", None))
    model_name = args.pop("model_name", None) or Path(model).stem
    num_replicas = int(args.pop("num_replicas", 2))
    routing = args.pop("routing", "prefix_affinity")
    if routing not in ("prefix_affinity", "power_of_two"):
        raise ValueError(f"routing: expected prefix_affinity or power_of_two, got '{routing}'")
    options = {"threads": 1}
    for key, value in args.items():
        if key not in _ENGINE_OPTION_TYPES:
            raise ValueError(f"unknown argument '{key}' (engine options: "
                             f"{', '.join(sorted(_ENGINE_OPTION_TYPES))})")
        options[key] = _ENGINE_OPTION_TYPES[key](value)
    stats = ReplicaStats.options(ray_actor_options={"num_cpus": 0}).bind()
    engine = DriftEngine.options(
        num_replicas=num_replicas,
        ray_actor_options={"num_cpus": options["threads"]},
        # Room for the engine's own batching: Ray queues the rest at the router.
        max_ongoing_requests=int(options.get("parallel",
                                             _drift.engine_option_defaults()["parallel"])),
        request_router_config=RequestRouterConfig(request_router_class=PrefixAffinityRouter)
        if routing == "prefix_affinity" else RequestRouterConfig(),
    ).bind(model, model_name, options, stats)
    return OpenAIIngress.bind(engine, stats, model_name)

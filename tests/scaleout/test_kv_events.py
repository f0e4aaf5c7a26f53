"""`drift serve --kv-events-endpoint`: vLLM's KV event stream for KV-aware routers.

A router's side of it: a ZeroMQ SUB socket, three frames per message (topic, 8-byte big-endian
sequence number, msgpack batch), each batch decoded with vLLM's own struct definitions
(vllm_kv_events.py). The events replayed in order must describe the prefix cache the server
reports in /metrics: every stored page chains to a parent stored before it, every removed hash was
stored, the hashes left equal the cached pages, the counts equal the cache's insertions and
evictions, /reset_prefix_cache sends AllBlocksCleared, and a restarted server numbers its messages
from 0 again. With a disk tier, a restarted server tells a router that subscribes after it started
which pages its directory holds (medium DISK), as a chain of pages the router can rebuild a
prompt's block keys from.
"""
import threading
import time

import httpx
import pytest
import zmq

from conftest import MODEL_NAME, Server, free_port
from vllm_kv_events import AllBlocksCleared, BlockRemoved, BlockStored, decoder

PAGE = 16
# 8 MiB of KV is about 22 pages of SmolLM2 (368,640 bytes a page): a dozen prompts of 7 pages
# must evict.
SERVER_ARGS = ("--kv-mib", "8", "-c", "256", "--parallel", "2", "--page-size", str(PAGE))
SHARED = "You are a careful assistant who answers in one short sentence. " * 4


class Subscriber:
    """A router's SUB socket: binds (the server connects) or connects (the server binds), and
    receives from the start on a thread of its own, as a router does. (A SUB socket that nobody
    services never attaches a new connection, so its subscription never reaches the publisher.)"""

    def __init__(self, endpoint, bind):
        self.messages = []  # (topic, seq, KVEventBatch), appended by the thread
        self._last = time.time()
        self._stop = threading.Event()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(endpoint, bind, ready),
                                        daemon=True)
        self._thread.start()
        assert ready.wait(10)

    def _run(self, endpoint, bind, ready):
        ctx = zmq.Context()
        sock = ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        (sock.bind if bind else sock.connect)(endpoint)
        ready.set()
        while not self._stop.is_set():
            if sock.poll(50):
                topic, seq, payload = sock.recv_multipart()
                assert len(seq) == 8
                self.messages.append((topic, int.from_bytes(seq, "big"),
                                      decoder.decode(payload)))
                self._last = time.time()
        sock.close(linger=0)
        ctx.term()

    def collect(self, at_least=0, quiet=0.5, timeout=30):
        """The messages so far, once there are `at_least` and nothing has arrived for `quiet`
        seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(self.messages) >= at_least and time.time() - self._last >= quiet:
                return list(self.messages)
            time.sleep(0.05)
        raise AssertionError(f"no quiet stream of {at_least} messages in {timeout} s")

    def close(self):
        self._stop.set()
        self._thread.join()


def replay(messages, live=None):
    """Applies the events in order to a set of live hashes, checking each against the set."""
    live = set() if live is None else live
    stored, removed, cleared = [], [], 0
    for _, _, batch in messages:
        assert batch.data_parallel_rank == 0
        for e in batch.events:
            if isinstance(e, BlockStored):
                assert len(e.block_hashes) == 1 and e.block_size == PAGE
                assert len(e.token_ids) == PAGE
                assert e.medium == "GPU" and e.lora_id is None and e.group_idx == 0
                assert e.parent_block_hash is None or e.parent_block_hash in live, \
                    "a page is stored after its parent"
                assert e.block_hashes[0] not in live, "stored twice without a removal"
                live.add(e.block_hashes[0])
                stored.append(e)
            elif isinstance(e, BlockRemoved):
                assert e.block_hashes[0] in live, "removed a hash never stored"
                live.discard(e.block_hashes[0])
                removed.append(e)
            else:
                assert isinstance(e, AllBlocksCleared)
                live.clear()
                cleared += 1
    return live, stored, removed, cleared


def wait_idle(server):
    deadline = time.time() + 30
    while time.time() < deadline:
        m = server.metrics()
        if m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0:
            return m
        time.sleep(0.05)
    raise AssertionError("the server did not go idle")


def tokenize(server, text):
    r = server.post("/tokenize", {"model": MODEL_NAME, "prompt": text})
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def complete(client, prompt):
    client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=4, temperature=0)


@pytest.fixture
def endpoint():
    return f"tcp://127.0.0.1:{free_port()}"


def test_events_describe_the_prefix_cache(endpoint):
    sub = Subscriber(endpoint, bind=True)  # llm-d's way: the router binds, replicas connect
    server = Server(*SERVER_ARGS, "--kv-events-endpoint", endpoint, "--kv-events-topic",
                    "kv@replica-0@smollm2")
    try:
        client = server.client()
        # Distinct from the first page on, so that 12 of them overflow the cache.
        prompts = [f"Topic {i}. {SHARED}Question: what is {i} times {i + 3}?" for i in range(12)]
        for p in prompts + prompts[-3:]:  # the repeats hit the cache
            complete(client, p)
        wait_idle(server)
        sent = server.metrics()["drift:kv_event_batches_total"]
        messages = sub.collect(at_least=sent)
        m = server.metrics()
        assert m["drift:kv_events_dropped_total"] == 0
        assert [seq for _, seq, _ in messages] == list(range(len(messages))), "no gap, from 0"
        assert m["drift:kv_event_batches_total"] == len(messages)
        assert {topic for topic, _, _ in messages} == {b"kv@replica-0@smollm2"}

        live, stored, removed, cleared = replay(messages)
        assert cleared == 0
        assert m["drift:prefix_cache_evictions_total"] > 0, "the workload must evict"
        assert len(stored) == m["drift:prefix_cache_pages_inserted_total"]
        assert len(removed) == m["drift:prefix_cache_evictions_total"]
        # Idle, every registered page is a cached one.
        assert len(live) == m["drift:kv_pages_cached"] > 0
        assert m["drift:kv_events_total"] == len(stored) + len(removed)

        # The last prompt's pages are cached: its chain of token pages is in the stream, each
        # page's hash the parent of the next, as a router rebuilds a prompt's block keys.
        assert m["vllm:prefix_cache_hits_total"] > 0
        ids = tokenize(server, prompts[-1])
        by_parent_and_tokens = {(e.parent_block_hash, tuple(e.token_ids)): e.block_hashes[0]
                                for e in stored}
        parent = None
        for start in range(0, len(ids) // PAGE * PAGE, PAGE):
            key = (parent, tuple(ids[start:start + PAGE]))
            assert key in by_parent_and_tokens, f"page at token {start} of the prompt"
            parent = by_parent_and_tokens[key]
            assert parent in live

        # vLLM's /reset_prefix_cache: nothing is held, so one AllBlocksCleared.
        assert server.post("/reset_prefix_cache", {}).status_code == 200
        after = sub.collect(at_least=len(messages) + 1)[len(messages):]
        _, _, _, cleared = replay(after, set(live))
        assert cleared == 1 and len(after) == 1 and len(after[0][2].events) == 1
        assert wait_idle(server)["drift:kv_pages_cached"] == 0
    finally:
        sub.close()
        assert server.stop() == 0


def test_a_restarted_server_numbers_its_messages_from_zero_again():
    port = free_port()
    sub = Subscriber(f"tcp://127.0.0.1:{port}", bind=False)  # Dynamo's way: the replica binds
    try:
        for _ in range(2):
            server = Server(*SERVER_ARGS, "--kv-events-endpoint", f"tcp://*:{port}")
            try:
                time.sleep(0.3)  # the SUB reconnects; a PUB sends nothing to a late subscriber
                start = len(sub.messages)
                complete(server.client(), SHARED + "Hello")
                wait_idle(server)
                seqs = [seq for _, seq, _ in sub.collect(at_least=start + 1)[start:]]
                assert seqs and seqs[0] == 0, seqs
            finally:
                assert server.stop() == 0
    finally:
        sub.close()


def test_a_restarted_server_announces_the_pages_its_disk_holds(tmp_path):
    directory = str(tmp_path / "kv")
    prompt = SHARED + "Question: what is seven times eight?"
    first = Server(*SERVER_ARGS, "--kv-cache-dir", directory)
    try:
        complete(first.client(), prompt)
        ids = tokenize(first, prompt)
    finally:
        assert first.stop() == 0  # its cached pages are written back to the directory
    port = free_port()
    server = Server(*SERVER_ARGS, "--kv-cache-dir", directory, "--kv-events-endpoint",
                    f"tcp://*:{port}")
    try:
        time.sleep(0.3)  # up before its router: a PUB sends nothing to a subscriber not there yet
        sub = Subscriber(f"tcp://127.0.0.1:{port}", bind=False)
        try:
            messages = sub.collect(at_least=1)
        finally:
            sub.close()
        events = [e for _, _, batch in messages for e in batch.events]
        assert events and all(isinstance(e, BlockStored) and e.medium == "DISK" for e in events)
        assert all(e.block_size == PAGE and len(e.token_ids) == PAGE for e in events)
        # The prompt's pages, each chained to the one before, as the first life announced them.
        by_parent_and_tokens = {(e.parent_block_hash, tuple(e.token_ids)): e.block_hashes[0]
                                for e in events}
        parent = None
        for start in range(0, (len(ids) - 1) // PAGE * PAGE, PAGE):
            key = (parent, tuple(ids[start:start + PAGE]))
            assert key in by_parent_and_tokens, f"page at token {start} of the prompt"
            parent = by_parent_and_tokens[key]
        assert len(events) == server.metrics()["drift:kv_events_total"]
    finally:
        assert server.stop() == 0


def test_a_bad_endpoint_is_a_clear_startup_error():
    server = Server("--kv-events-endpoint", "nonsense://x", wait=False)
    assert server.proc.wait(timeout=120) != 0
    assert "kv_events_endpoint 'nonsense://x'" in server.log_text()


def test_events_need_the_prefix_cache(endpoint):
    server = Server("--no-prefix-cache", "--kv-events-endpoint", endpoint, wait=False)
    assert server.proc.wait(timeout=120) != 0
    assert "KV events need the prefix cache" in server.log_text()


def test_reset_prefix_cache_takes_post_only():
    server = Server(*SERVER_ARGS)
    try:
        r = httpx.get(server.url + "/reset_prefix_cache", timeout=10)
        assert r.status_code == 405 and "POST" in r.json()["error"]["message"]
    finally:
        assert server.stop() == 0

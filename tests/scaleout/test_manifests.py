"""The Kubernetes example of docs/scale-out.md (deploy/kubernetes/), loaded with PyYAML: the drift
container runs `drift serve` with flags the program accepts (its own --print-config parses them),
and what llm-d's endpoint picker is told agrees with what the replicas do — the HTTP port, the pod
labels the InferencePool selects, the ZeroMQ port and topic of the KV events, the page size as the
block size, the served model name as the tokenizer's.
"""
import os
import re
import subprocess
import tomllib

import yaml

from conftest import ROOT

DEPLOY = ROOT / "deploy" / "kubernetes"
DRIFT_BIN = os.environ.get("DRIFT_BIN", str(ROOT / "build" / "bin" / "drift"))


def load(name):
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def flag(args, name):
    assert args.count(name) == 1, f"{name} given {args.count(name)} times"
    return args[args.index(name) + 1]


def replicas():
    (deployment,) = load("drift-replicas.yaml")
    assert deployment["apiVersion"] == "apps/v1" and deployment["kind"] == "Deployment"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, container


def epp():
    (values,) = load("llm-d-epp-values.yaml")
    config = yaml.safe_load(values["inferenceExtension"]["pluginsCustomConfig"][
        values["inferenceExtension"]["pluginsConfigFile"]])
    plugins = {p["type"]: p.get("parameters", {}) for p in config["plugins"]}
    return values, config, plugins


def test_the_container_runs_drift_serve_with_flags_it_accepts():
    _, container = replicas()
    assert container["command"][0].endswith("/drift") and container["command"][1:] == ["serve"]
    env = {e["name"]: "value-of-" + e["name"] for e in container["env"]}
    # Kubernetes expands $(NAME) from the container's env; every name used must be defined there.
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in container["args"]]
    # The image resolves the model by its registry name.
    registry = tomllib.loads((ROOT / "share" / "models.toml").read_text())
    assert flag(args, "-m") in registry["models"]
    # --print-config parses every flag and prints the values without loading a model.
    r = subprocess.run([DRIFT_BIN, "serve", *args, "--print-config"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for name in ("--kv-events-endpoint", "--kv-events-topic", "--page-size", "--port"):
        assert flag(args, name) in r.stdout, f"{name} not in the effective configuration"


def test_the_replicas_and_the_endpoint_picker_agree():
    deployment, container = replicas()
    values, config, plugins = epp()
    args = container["args"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()

    # HTTP: the port drift listens on is the pool's target, the probes' and the container's.
    port = int(flag(args, "--port"))
    assert [p["number"] for p in values["inferencePool"]["targetPorts"]] == [port]
    assert container["ports"][0]["containerPort"] == port
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": port}
    assert values["inferencePool"]["modelServerType"] == "vllm"
    assert values["inferencePool"]["modelServers"]["matchLabels"].items() <= labels.items()

    # KV events: the replicas connect to the picker's bound port, under the topic it filters.
    events = plugins["precise-prefix-cache-scorer"]["kvEventsConfig"]
    endpoint = flag(args, "--kv-events-endpoint")
    host, _, zmq_port = endpoint.removeprefix("tcp://").rpartition(":")
    assert "*" not in host, "a replica connects (vLLM binds only wildcard endpoints)"
    assert host.startswith("drift-epp.")
    assert events["zmqEndpoint"] == f"tcp://*:{zmq_port}"
    assert {p["port"] for p in values["inferenceExtension"]["extraServicePorts"]} == {int(zmq_port)}
    assert flag(args, "--kv-events-topic").startswith(events["topicFilter"])

    # Blocks: the picker cuts prompts into the replicas' pages, with the tokenizer of the name
    # the replicas serve.
    scorer = plugins["precise-prefix-cache-scorer"]
    assert scorer["tokenProcessorConfig"]["blockSize"] == int(flag(args, "--page-size"))
    model = flag(args, "--served-model-name")
    assert scorer["indexerConfig"]["tokenizersPoolConfig"]["modelName"] == model
    assert flag(args, "--kv-events-topic").endswith("@" + model)

    # Every plugin the profile weighs is declared.
    (profile,) = config["schedulingProfiles"]
    assert {p["pluginRef"] for p in profile["plugins"]} <= plugins.keys()

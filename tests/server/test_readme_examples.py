"""The README's server examples, run exactly as written (curl, and Python with the official
client) against `drift serve` on the default model with no flags, as scripts/run.sh starts it:
the answers must read like text, so a regression in the sampling defaults or the chat template
shows up here. Sampled answers are judged by two measurable properties:

- their share of dictionary words (tests/common/plausible_text.py) — catches garbage such as a broken
  template or detokenizer, but separates sampling defaults only weakly (small models at
  temperature 1 still mostly emit real words, just incoherently);
- the mean log-probability the model itself gives the tokens it produced (logprobs of the raw
  logits), which measures how far into the unlikely tail the sampler reaches. Measured over 12
  answers each: -1.6 per token with the llama.cpp defaults, -3.3 (chat) and -3.0 (completion)
  with the former defaults (temperature 1, nothing else); single answers never crossed -2.0.

Greedy answers are judged by their content ("2+2" -> "4")."""
import json
import pathlib
import re
import subprocess
import sys

import pytest

from conftest import ROOT, Server

sys.path.insert(0, str(ROOT / "tests" / "common"))
from plausible_text import dictionary_share  # noqa: E402

RUNS = 6  # answers pooled per example (request ids, hence seeds, are the same on every run)


def readme_request_bodies():
    """The requests the two examples send: the curl body as written, and the completion the
    Python one makes (prompt and max_tokens taken from its text)."""
    curl, python = readme_server_examples()
    chat = json.loads(re.search(r"-d '(.*?)'", curl, re.S).group(1))
    completion = {"prompt": re.search(r'prompt="([^"]*)"', python).group(1),
                  "max_tokens": int(re.search(r"max_tokens=(\d+)", python).group(1))}
    return chat, completion


def readme_server_examples():
    """The first code block of the README's "The server" section: (curl command, python one)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### The server", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    curl, python = block.split("\npython3 ", 1)
    assert curl.startswith("curl "), block
    return curl, "python3 " + python


def readme_python_example(paragraph, module):
    """The code block of the README's paragraph that starts with `paragraph` (one python3 -c
    that imports `module`)."""
    text = (ROOT / "README.md").read_text()
    section = text.split(paragraph, 1)[1]
    example = re.search(r"```\n(.*?)```", section, re.S).group(1).strip()
    assert example.startswith(f"python3 -c 'import {module}"), example
    return example


@pytest.fixture(scope="module")
def readme_server():
    # The README's commands name port 8080; the test's server gets a free port instead.
    s = Server(served_model_name=None)
    yield s
    assert s.stop() == 0


def run_example(command, server):
    command = command.replace("http://127.0.0.1:8080", server.url)
    # The venv's python has the openai, anthropic and ollama packages the README's examples
    # import.
    command = re.sub(r"^python3 ", sys.executable + " ", command)
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{command}\n{result.stderr}"
    return result.stdout


def test_readme_curl_example_answers_in_words(readme_server):
    curl, _ = readme_server_examples()
    answers = []
    for _ in range(RUNS):
        body = json.loads(run_example(curl, readme_server))
        answers.append(body["choices"][0]["message"]["content"])
    assert all(a.strip() for a in answers), answers
    share, n = dictionary_share(answers)
    assert n >= 40 and share >= 0.93, (share, n, answers)


def test_readme_python_example_answers_in_words(readme_server):
    _, python = readme_server_examples()
    answers = [run_example(python, readme_server) for _ in range(RUNS)]
    assert all(a.strip() for a in answers), answers
    share, n = dictionary_share(answers)
    assert n >= 60 and share >= 0.95, (share, n, answers)


def test_readme_anthropic_example_answers_in_words(readme_server):
    example = readme_python_example("Anthropic's Messages API:", "anthropic")
    answers = [run_example(example, readme_server) for _ in range(RUNS)]
    assert all(a.strip() for a in answers), answers
    share, n = dictionary_share(answers)
    assert n >= 40 and share >= 0.93, (share, n, answers)


def test_readme_responses_example_answers_in_words(readme_server):
    example = readme_python_example("OpenAI's Responses API:", "openai")
    answers = [run_example(example, readme_server) for _ in range(RUNS)]
    assert all(a.strip() for a in answers), answers
    share, n = dictionary_share(answers)
    assert n >= 40 and share >= 0.93, (share, n, answers)


def test_readme_ollama_example_answers_in_words(readme_server):
    example = readme_python_example("Ollama's API:", "ollama")
    answers = [run_example(example, readme_server) for _ in range(RUNS)]
    assert all(a.strip() for a in answers), answers
    share, n = dictionary_share(answers)
    assert n >= 40 and share >= 0.93, (share, n, answers)


def test_greedy_arithmetic_through_the_chat_template(readme_server):
    client = readme_server.client()
    model = client.models.list().data[0].id
    r = client.chat.completions.create(model=model, temperature=0, max_tokens=32,
                                       messages=[{"role": "user", "content": "What is 2+2?"}])
    assert "4" in r.choices[0].message.content, r.choices[0].message.content


def test_readme_examples_sample_tokens_the_model_finds_likely(readme_server):
    chat, completion = readme_request_bodies()
    means = {"chat": [], "completion": []}
    for _ in range(RUNS):
        r = readme_server.post("/v1/chat/completions", {**chat, "logprobs": True}).json()
        lp = [t["logprob"] for t in r["choices"][0]["logprobs"]["content"]]
        means["chat"].append(sum(lp) / len(lp))
        r = readme_server.post("/v1/completions", {**completion, "logprobs": 0}).json()
        lp = r["choices"][0]["logprobs"]["token_logprobs"]
        means["completion"].append(sum(lp) / len(lp))
    for kind, values in means.items():
        assert sum(values) / len(values) >= -2.3, (kind, values)

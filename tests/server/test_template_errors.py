"""A server-side chat template (--chat-template, or the GGUF's) that fails is the operator's fault,
not the client's: a runtime error in it answers 500 saying so, while the template's own
raise_exception refuses the conversation with the client's 400 and the template's words. Checked
with the official openai client; the server keeps serving throughout."""
import httpx
import openai
import pytest

from conftest import Server

# ChatML, broken on purpose for some conversations: a message "divide" divides by zero, a message
# "method" calls a method strings do not have, and a system message "refuse" makes the template
# refuse the conversation as templates refuse non-alternating roles.
TEMPLATE = """\
{%- for message in messages -%}
{%- if message.role == 'system' and message.content == 'refuse' -%}
{{ raise_exception('This template refuses a system message that says refuse') }}
{%- endif -%}
{%- if message.content == 'divide' -%}{{ 1 // 0 }}{%- endif -%}
{%- if message.content == 'method' -%}{{ message.content.no_such_method() }}{%- endif -%}
{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}
"""


@pytest.fixture(scope="module")
def template_server(tmp_path_factory):
    path = tmp_path_factory.mktemp("template") / "broken.jinja"
    path.write_text(TEMPLATE)
    s = Server("--kv-mib", "64", "--chat-template", str(path))
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


def chat(client, content, **kw):
    return client.chat.completions.create(
        model="smollm2", max_tokens=4, messages=[{"role": "user", "content": content}], **kw)


def assert_serving(server):
    assert httpx.get(server.url + "/health", timeout=10).json() == {"status": "ok"}
    reply = chat(server.client(), "Say hello.")
    assert reply.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize("content", ["divide", "method"])
def test_a_broken_server_template_is_a_500_naming_the_template(template_server, content):
    client = template_server.client()
    with pytest.raises(openai.InternalServerError) as raised:
        chat(client, content)
    error = raised.value.response.json()["error"]
    assert raised.value.status_code == 500
    assert error["code"] == "chat_template_error"
    assert "server's chat template failed" in error["message"], error["message"]
    assert "not of the request" in error["message"], error["message"]
    # Streamed, the failure comes before the stream starts: the same status.
    with pytest.raises(openai.InternalServerError):
        for _ in chat(client, content, stream=True):
            pass
    # /tokenize renders the same template.
    r = template_server.post("/tokenize", {"messages": [{"role": "user", "content": content}]})
    assert r.status_code == 500, r.text
    assert r.json()["error"]["code"] == "chat_template_error"
    assert_serving(template_server)


def test_the_templates_raise_exception_is_the_clients_400_with_its_message(template_server):
    client = template_server.client()
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model="smollm2", max_tokens=4,
            messages=[{"role": "system", "content": "refuse"}, {"role": "user", "content": "hi"}])
    error = raised.value.response.json()["error"]
    assert "This template refuses a system message that says refuse" in error["message"]
    assert error["param"] == "messages"
    assert_serving(template_server)

"""vLLM's prompt forms -> (kind, prompt) for the engine: a str, {"prompt": str} or
{"prompt_token_ids": [ids]}; conversations are lists of {"role", "content"} dicts."""


def prompt_job(prompt) -> tuple[str, object, str | None]:
    """(kind, value, the prompt's text or None) of one prompt."""
    if isinstance(prompt, str):
        return "text", prompt, prompt
    if isinstance(prompt, dict):
        if "prompt_token_ids" in prompt:
            return "tokens", list(prompt["prompt_token_ids"]), prompt.get("prompt")
        if "prompt" in prompt:
            return prompt_job(prompt["prompt"])
    raise TypeError("a prompt is a str, {'prompt': str} or {'prompt_token_ids': [int, ...]}, "
                    f"got {type(prompt).__name__}")


def prompt_list(prompts) -> list:
    """One prompt or a list of them -> a list."""
    if isinstance(prompts, (str, dict)):
        return [prompts]
    return list(prompts)


def conversation_list(messages) -> list[list[dict]]:
    """One conversation (a list of message dicts) or a list of them -> a list of conversations."""
    messages = list(messages)
    if messages and isinstance(messages[0], dict):
        return [messages]
    return [list(conversation) for conversation in messages]

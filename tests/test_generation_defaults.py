"""Default generation models and efforts live in the library; `pv4kit generate` gets the same configs."""

import pytest

from pv4kit.cli import build_parser
from pv4kit.cli.generation import _configs
from pv4kit.generation.defaults import DEFAULT_CHAT_MODEL, DEFAULT_MODEL, generation_llm_configs
from pv4kit.llm.config import LLMConfig


def _before(args, model, base_url, protocol):
    """``pv4kit.cli.generation._configs`` as it was before the defaults moved (transcribed)."""
    chat_model = args.chat_model
    if chat_model is None or chat_model == "local":
        chat_model = "gpt-5-mini" if base_url is None and model.startswith("gpt-") else model
    responses = protocol == "responses"
    common = dict(
        base_url=base_url,
        protocol=protocol,
        api_key_env=args.api_key_env,
        temperature=args.temperature,
        max_output_tokens=args.max_output_tokens,
        max_concurrency=args.max_workers,
        max_retries=args.http_retries,
        timeout=args.timeout,
    )
    effort = args.reasoning_effort or ("none" if responses else None)
    chat_effort = args.chat_reasoning_effort or ("minimal" if responses else None)
    return (
        LLMConfig(model=model, reasoning_effort=effort, **common),
        LLMConfig(model=chat_model, reasoning_effort=chat_effort, **common),
    )


@pytest.mark.parametrize(
    ("extra", "base_url", "protocol"),
    [
        ([], None, "responses"),
        (["--model", "gpt-5-nano"], None, "responses"),
        (["--model", "gpt-5.1"], "http://127.0.0.1:8000/v1", "chat"),
        (["--model", "qwen3"], "http://127.0.0.1:8000/v1", "chat"),
        (["--model", "qwen3", "--chat-model", "qwen3-small"], "http://h/v1", "chat"),
        (["--reasoning-effort", "low", "--chat-reasoning-effort", "high"], None, "responses"),
        (["--chat-model", "gpt-5.1", "--temperature", "0.7", "--max-output-tokens", "99"], None, "responses"),
        (["--max-workers", "3", "--http-retries", "1", "--timeout", "5", "--api-key-env", "K"], None, "chat"),
        (["--model", "local", "--chat-model", "local"], "http://127.0.0.1:9/v1", "chat"),
    ],
)
def test_the_cli_builds_the_configs_it_built_before(extra, base_url, protocol):
    args = build_parser().parse_args(["generate", "--persona-dir", "p", "--output-dir", "o", *extra])
    model = "smollm2" if args.model == "local" else args.model
    assert _configs(args, model, base_url, protocol) == _before(args, model, base_url, protocol)


def test_the_library_defaults_are_the_references_models():
    llm, chat = generation_llm_configs()
    assert (llm.model, llm.reasoning_effort, llm.protocol) == ("gpt-5.1", "none", "responses")
    assert (chat.model, chat.reasoning_effort, chat.protocol) == ("gpt-5-mini", "minimal", "responses")
    assert llm.temperature is None and not llm.greedy  # sampled: a re-ask gets a new answer
    assert (
        build_parser().parse_args(["generate", "--persona-dir", "p", "--output-dir", "o"]).model
        == DEFAULT_MODEL
    )
    assert DEFAULT_CHAT_MODEL == "gpt-5-mini"
    local, local_chat = generation_llm_configs("qwen3", base_url="http://h/v1", max_concurrency=2)
    assert (local.protocol, local.reasoning_effort, local_chat.model) == ("chat", None, "qwen3")
    assert local.max_concurrency == local_chat.max_concurrency == 2

"""The endpoint policy the CLI and the notebooks share: `endpoint_config`, `local_llm_config`."""

import pytest

from pv4kit.llm.config import LLMConfig, default_protocol, endpoint_config
from pv4kit.llm.local import LOCAL_SERVER_OPTIONS, Endpoint, local_llm_config


def _before(model, base_url, protocol=None, max_tokens=None):
    """The config ``pv4kit audit`` and notebook 02 built by hand before (transcribed)."""
    return LLMConfig(
        model=model,
        base_url=base_url,
        protocol=protocol or ("chat" if base_url else "responses"),
        temperature=0.0 if base_url else None,
        max_output_tokens=max_tokens,
    )


@pytest.mark.parametrize("base_url", [None, "http://127.0.0.1:8000/v1"])
@pytest.mark.parametrize("protocol", [None, "chat", "responses"])
@pytest.mark.parametrize("max_tokens", [None, 16])
def test_endpoint_config_is_what_the_callers_wrote(base_url, protocol, max_tokens):
    got = endpoint_config("m", base_url=base_url, protocol=protocol, max_output_tokens=max_tokens)
    assert got == _before("m", base_url, protocol, max_tokens)


def test_endpoint_config_choices():
    remote = endpoint_config("qwen", base_url="http://h:1/v1")
    assert (remote.protocol, remote.temperature, remote.greedy) == ("chat", 0.0, True)
    openai = endpoint_config("gpt-5.1")
    assert (openai.protocol, openai.temperature, openai.base_url) == ("responses", None, None)
    assert endpoint_config("gpt-5.1", base_url="").base_url is None  # an empty variable is no base URL
    sampled = endpoint_config("qwen", base_url="http://h:1/v1", temperature=None)
    assert sampled.temperature is None and not sampled.greedy
    assert endpoint_config("m", base_url="http://h:1/v1", protocol="responses").protocol == "responses"
    assert endpoint_config("m", api_key_env="K", max_concurrency=2).max_concurrency == 2
    with pytest.raises(TypeError, match="max_tokens"):
        endpoint_config("m", max_tokens=3)
    assert default_protocol(None) == "responses" and default_protocol("http://h/v1") == "chat"


def test_the_local_server_gets_batched_requests_and_a_long_timeout():
    local = Endpoint(model="smollm2", base_url="http://127.0.0.1:5555/v1", protocol="chat")
    asked = dict(protocol="responses", max_concurrency=2, timeout=120.0, max_retries=2, api_key_env="K")
    got = local_llm_config(local, **asked)
    assert got == LLMConfig(
        model="smollm2",
        base_url="http://127.0.0.1:5555/v1",
        protocol="chat",
        max_concurrency=8,
        timeout=600.0,
        max_retries=2,
        api_key_env="K",
    )
    assert LOCAL_SERVER_OPTIONS == {"max_concurrency": 8, "timeout": 600.0}
    assert local.local and local_llm_config(local) == LLMConfig(
        model="smollm2", base_url=local.base_url, protocol="chat", max_concurrency=8, timeout=600.0
    )


def test_another_endpoint_gets_what_the_caller_asked():
    remote = Endpoint(model="qwen", base_url="http://h:1/v1", protocol=None)
    assert not remote.local
    got = local_llm_config(remote, protocol="responses", max_concurrency=8, timeout=120.0)
    assert got == LLMConfig(
        model="qwen", base_url="http://h:1/v1", protocol="responses", max_concurrency=8, timeout=120.0
    )
    assert local_llm_config(remote).protocol == "chat"
    assert local_llm_config(Endpoint(model="gpt-5.1", base_url=None, protocol=None)).protocol == "responses"

import json
import math
import re
import time

import pytest

from pv4kit.cli import main
from pv4kit.llm.client import build_request, cache_key, complete
from pv4kit.llm.config import LLMConfig, LLMConfigError
from pv4kit.llm.store import load_prices, usage_frame, usage_summary
from tests.llm_server import FakeLLMServer, Reply

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]


def cfg(server, **kw):
    base = dict(model="fake-model", base_url=server.base_url, protocol="chat", backoff_base=0.01, timeout=5.0)
    base.update(kw)
    return LLMConfig(**base)


@pytest.fixture
def server():
    with FakeLLMServer() as srv:
        yield srv


def test_build_request_maps_both_protocols():
    r = build_request(MSGS, LLMConfig(model="gpt-5.1", reasoning_effort="none", max_output_tokens=10))
    assert r == {
        "model": "gpt-5.1",
        "instructions": "be brief",
        "input": [{"role": "user", "content": "hello"}],
        "reasoning": {"effort": "none"},
        "max_output_tokens": 10,
    }
    c = build_request(MSGS, LLMConfig(model="m", protocol="chat", temperature=0.0, max_output_tokens=5))
    assert c == {"model": "m", "messages": MSGS, "max_tokens": 5, "temperature": 0.0}
    with pytest.raises(ValueError, match="messages\\[0\\]"):
        build_request([{"role": "bot", "content": "x"}], LLMConfig(model="m"))
    with pytest.raises(ValueError, match="protocol"):
        LLMConfig(model="m", protocol="grpc")


def test_cache_key_rule():
    greedy = LLMConfig(model="m", temperature=0.0)
    assert cache_key(MSGS, greedy, sample_index=0) == cache_key(MSGS, greedy, sample_index=3)
    sampled = LLMConfig(model="m")
    assert cache_key(MSGS, sampled, sample_index=0) != cache_key(MSGS, sampled, sample_index=1)
    assumed = LLMConfig(model="m", assume_greedy=True)
    assert cache_key(MSGS, assumed, sample_index=0) == cache_key(MSGS, assumed, sample_index=1)
    # endpoint, timeouts, retries, concurrency never change the key
    other = LLMConfig(model="m", base_url="http://x/v1", timeout=1, max_retries=0, max_concurrency=99)
    assert cache_key(MSGS, sampled) == cache_key(MSGS, other)
    assert cache_key(MSGS, sampled) != cache_key(MSGS, LLMConfig(model="m2"))
    assert cache_key(MSGS, sampled) != cache_key(MSGS, LLMConfig(model="m", protocol="chat"))


@pytest.mark.parametrize("protocol", ["chat", "responses"])
def test_roundtrip_and_cache(server, tmp_path, protocol):
    cache = tmp_path / "c.sqlite"
    reqs = [[{"role": "user", "content": f"q{i}"}] for i in range(5)]
    seen = []
    out = complete(
        reqs,
        llm=cfg(server, protocol=protocol),
        cache=cache,
        step="t",
        user_id=3,
        progress=False,
        on_result=lambda i, r: seen.append(i),
    )
    assert [r.text for r in out] == [f"echo: q{i}" for i in range(5)]
    assert sorted(seen) == list(range(5))
    assert not any(r.cached for r in out) and all(r.error is None for r in out)
    assert out[0].usage["prompt_tokens"] == 11 and out[0].response_id
    if protocol == "responses":
        assert out[0].usage["reasoning_tokens"] == 3
    assert len(server.requests) == 5
    again = complete(
        reqs,
        llm=cfg(server, protocol=protocol, base_url=server.base_url + "/"),
        cache=cache,
        step="t",
        user_id=3,
        progress=False,
    )
    assert [r.text for r in again] == [r.text for r in out] and all(r.cached for r in again)
    assert len(server.requests) == 5
    frame = usage_frame(cache)
    assert len(frame) == 10 and frame["cached"].sum() == 5
    assert set(frame["step"]) == {"t"} and set(frame["user_id"]) == {3}


def test_responses_instructions_reach_server(server):
    complete([MSGS], llm=cfg(server, protocol="responses", reasoning_effort="low"), progress=False)
    _, _, body = server.requests[0]
    assert body["instructions"] == "be brief" and body["reasoning"] == {"effort": "low"}


def test_sampled_calls_differ_by_sample_index(server, tmp_path):
    cache = tmp_path / "c.sqlite"
    c = cfg(server)
    complete([MSGS], llm=c, cache=cache, sample_index=0, progress=False)
    complete([MSGS], llm=c, cache=cache, sample_index=1, progress=False)
    assert len(server.requests) == 2
    g = cfg(server, temperature=0.0)
    complete([MSGS], llm=g, cache=cache, sample_index=0, progress=False)
    complete([MSGS], llm=g, cache=cache, sample_index=5, progress=False)
    assert len(server.requests) == 3


def test_429_retry_after_is_honoured(server):
    server.faults = [Reply(status=429, headers={"Retry-After": "0.3"})]
    start = time.monotonic()
    (out,) = complete([MSGS], llm=cfg(server), progress=False)
    assert time.monotonic() - start >= 0.3
    assert out.error is None and out.attempts == 2 and len(server.requests) == 2


def test_5xx_and_timeouts_are_retried(server):
    server.faults = [Reply(status=500), Reply(status=503), Reply(delay=1.0)]
    (out,) = complete([MSGS], llm=cfg(server, timeout=0.3), progress=False)
    assert out.error is None and out.text == "echo: be brief" or out.text.startswith("echo:")
    assert out.attempts == 4


def test_exhausted_retries_set_error_and_batch_goes_on(server, tmp_path):
    server.faults = [Reply(status=500)] * 3
    reqs = [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]
    out = complete(
        reqs,
        llm=cfg(server, max_retries=1, max_concurrency=1),
        cache=tmp_path / "c.sqlite",
        progress=False,
    )
    assert out[0].error is not None and "gave up after 2 attempts" in out[0].error
    assert out[1].error is None
    # the failure is not cached: asking again calls the server
    n = len(server.requests)
    again = complete(reqs, llm=cfg(server), cache=tmp_path / "c.sqlite", progress=False)
    assert again[0].error is None and not again[0].cached and again[1].cached
    assert len(server.requests) == n + 1


def test_400_is_not_retried(server):
    server.faults = [Reply(status=400, error="context too long")]
    (out,) = complete([MSGS], llm=cfg(server), progress=False)
    assert "400" in out.error and len(server.requests) == 1


def test_bad_key_raises_without_leaking_it(tmp_path, monkeypatch):
    secret = "sk-proj-SECRETSECRET1234567890"
    monkeypatch.setenv("PV4_TEST_KEY", secret)
    cache = tmp_path / "c.sqlite"
    with FakeLLMServer(api_key="right-key") as srv:
        with pytest.raises(LLMConfigError) as info:
            complete([MSGS], llm=cfg(srv, api_key_env="PV4_TEST_KEY"), cache=cache, progress=False)
        msg = str(info.value)
        assert "fake-model" in msg and srv.base_url in msg and "401" in msg
        assert secret not in msg and secret[:12] not in msg
        assert len(srv.requests) == 1  # not retried
        monkeypatch.setenv("PV4_TEST_KEY", "right-key")
        (ok,) = complete([MSGS], llm=cfg(srv, api_key_env="PV4_TEST_KEY"), cache=cache, progress=False)
        assert ok.error is None
    for f in tmp_path.iterdir():
        assert secret.encode() not in f.read_bytes() and b"right-key" not in f.read_bytes()


def test_unknown_model_raises(tmp_path):
    with FakeLLMServer(known_models={"real-model"}) as srv:
        with pytest.raises(LLMConfigError, match="no-such-model"):
            complete([MSGS], llm=cfg(srv, model="no-such-model"), progress=False)


def test_missing_key_for_openai_names_the_variable(monkeypatch):
    monkeypatch.delenv("PV4_NOPE", raising=False)
    with pytest.raises(LLMConfigError, match="PV4_NOPE"):
        complete([MSGS], llm=LLMConfig(model="gpt-5.1", api_key_env="PV4_NOPE"), progress=False)


def test_concurrency_is_bounded():
    with FakeLLMServer(delay=0.05) as srv:
        reqs = [[{"role": "user", "content": str(i)}] for i in range(12)]
        complete(reqs, llm=cfg(srv, max_concurrency=3), progress=False)
        assert srv.max_in_flight <= 3
        srv.max_in_flight = 0
        complete(
            [[{"role": "user", "content": f"x{i}"}] for i in range(12)],
            llm=cfg(srv, max_concurrency=12),
            progress=False,
        )
        assert srv.max_in_flight > 3


def test_per_request_configs_and_steps(server, tmp_path):
    a, b = cfg(server, model="m-a"), cfg(server, model="m-b", protocol="responses")
    out = complete([MSGS, MSGS], llm=[a, b], step=["x", "y"], cache=tmp_path / "c.sqlite", progress=False)
    assert [r.model for r in out] == ["m-a", "m-b"]
    assert [p for p, _, _ in server.requests].count("responses") == 1
    frame = usage_frame(tmp_path / "c.sqlite")
    assert sorted(frame["step"]) == ["x", "y"]
    with pytest.raises(ValueError, match="step"):
        complete([MSGS], llm=a, step=["x", "y"], progress=False)


def test_usage_frame_prices(tmp_path, server):
    cache = tmp_path / "c.sqlite"
    complete([MSGS], llm=cfg(server, model="gpt-5.1-2025-11-13"), cache=cache, step="s", progress=False)
    complete([MSGS], llm=cfg(server, model="mystery"), cache=cache, step="s", progress=False)
    complete([MSGS], llm=cfg(server, model="gpt-5.1-2025-11-13"), cache=cache, step="s", progress=False)
    frame = usage_frame(cache)
    assert list(frame.columns)[-1] == "cost_usd"
    p = load_prices()["gpt-5.1"]
    row = frame.iloc[0]
    expected = (row.prompt_tokens * p["input"] + row.completion_tokens * p["output"]) / 1e6
    assert math.isclose(row.cost_usd, expected)
    assert math.isnan(frame.iloc[1].cost_usd)
    assert frame.iloc[2].cached and frame.iloc[2].cost_usd == 0.0
    custom = usage_frame(cache, prices={"mystery": {"input": 1e6, "output": 0}})
    assert custom.iloc[1].cost_usd == 11.0 and math.isnan(custom.iloc[0].cost_usd)
    summary = usage_summary(frame, by=["model"])
    assert set(summary.columns) >= {"calls", "cached", "cost_usd"}
    json.dumps(load_prices())  # the shipped table is plain JSON


def test_usage_by_cached_and_a_broken_price_file(tmp_path, server, capsys):
    cache = tmp_path / "c.sqlite"
    complete([MSGS], llm=cfg(server, model="m"), cache=cache, step="s", progress=False)
    complete([MSGS], llm=cfg(server, model="m"), cache=cache, step="s", progress=False)
    by_cached = usage_summary(usage_frame(cache), by=["cached"])
    assert by_cached["cached"].tolist() == [False, True] and by_cached["calls"].tolist() == [1, 1]
    assert main(["usage", "--cache", str(cache), "--by", "cached"]) == 0
    with pytest.raises(ValueError, match=r"by: unknown column\(s\) \['nope'\]; choose from .*model"):
        usage_summary(usage_frame(cache), by=["nope"])
    broken = tmp_path / "prices.json"
    broken.write_text('{"models": {"m": {"input": 1,}}}')
    with pytest.raises(
        ValueError, match=rf"prices: {re.escape(str(broken))}: not valid JSON \(line 1, column 30"
    ):
        load_prices(broken)
    capsys.readouterr()
    assert main(["usage", "--cache", str(cache), "--prices", str(broken)]) == 1
    err = capsys.readouterr().err
    assert str(broken) in err and "not valid JSON" in err and "Traceback" not in err

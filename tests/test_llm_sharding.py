"""``complete(requests, llm=[a, b])``: requests dealt round-robin over equivalent endpoints.

Two real loopback servers (``tests/llm_server.py``) behind the real openai client.
"""

import threading

import pytest

from pv4kit.llm.client import cache_key, complete
from pv4kit.llm.config import LLMConfig
from pv4kit.llm.store import usage_frame
from tests.llm_server import FakeLLMServer


def _cfg(server, **kw):
    base = dict(model="fake-model", base_url=server.base_url, protocol="chat", backoff_base=0.01, timeout=5.0)
    base.update(kw)
    return LLMConfig(**base)


def _reqs(n):
    return [[{"role": "user", "content": f"q{i}"}] for i in range(n)]


def test_requests_are_dealt_round_robin_in_order_and_cached_whatever_the_endpoint(tmp_path):
    cache = tmp_path / "c.sqlite"
    seen = []
    with FakeLLMServer() as one, FakeLLMServer() as two:
        a, b = _cfg(one), _cfg(two)
        out = complete(
            _reqs(7),
            llm=[a, b],
            cache=cache,
            step="s",
            progress=False,
            on_result=lambda i, r: seen.append((i, r.text)),
        )
        assert [r.text for r in out] == [f"echo: q{i}" for i in range(7)]
        assert [r.error for r in out] == [None] * 7
        assert sorted(p for _, p, _ in one.requests) == [f"q{i}" for i in (0, 2, 4, 6)]
        assert sorted(p for _, p, _ in two.requests) == [f"q{i}" for i in (1, 3, 5)]
        assert sorted(seen) == [(i, f"echo: q{i}") for i in range(7)]  # callback gets the batch's index
        assert [r.key for r in out] == [cache_key(m, a) for m in _reqs(7)]  # the key ignores the base URL
        # Another endpoint of the same model (here: the second server alone) finds every answer cached.
        again = complete(_reqs(7), llm=[b], cache=cache, progress=False)
        assert all(r.cached for r in again) and [r.text for r in again] == [r.text for r in out]
        assert len(two.requests) == 3
    frame = usage_frame(cache)
    assert len(frame) == 14 and frame["cached"].sum() == 7


def test_each_endpoint_has_its_own_pool():
    """Two servers that answer one request at a time are busy at once (one pool of width 1 would not)."""
    both = threading.Barrier(2, timeout=5)

    def wait_for_the_other(protocol, body, nth):
        try:
            both.wait()
            return "together"
        except threading.BrokenBarrierError:
            return "alone"

    with FakeLLMServer(wait_for_the_other) as one, FakeLLMServer(wait_for_the_other) as two:
        out = complete(
            _reqs(2), llm=[_cfg(one, max_concurrency=1), _cfg(two, max_concurrency=1)], progress=False
        )
    assert [r.text for r in out] == ["together", "together"]
    assert one.max_in_flight == two.max_in_flight == 1


def test_a_single_config_and_a_list_of_one_or_two_agree(tmp_path):
    with FakeLLMServer() as one, FakeLLMServer() as two:
        single = complete(_reqs(3), llm=_cfg(one), progress=False)
        assert [r.text for r in single] == [f"echo: q{i}" for i in range(3)]
        listed = complete(_reqs(4), llm=[_cfg(one), _cfg(two)], progress=False)
        assert [r.text for r in listed] == [f"echo: q{i}" for i in range(4)]
        assert len(two.requests) == 2


def test_one_config_per_request_is_not_sharding():
    """A list as long as the batch gives each request its own config (what generation sends)."""
    with FakeLLMServer() as one:
        a, b = _cfg(one, model="m-a"), _cfg(one, model="m-b")
        out = complete(_reqs(2), llm=[a, b], progress=False)
    assert [r.model for r in out] == ["m-a", "m-b"]


def test_endpoints_that_would_cache_differently_are_refused():
    a = LLMConfig(model="m", base_url="http://127.0.0.1:1/v1", protocol="chat", temperature=0.0)
    with pytest.raises(ValueError, match=r"llm\[1\] has temperature=None"):
        complete(_reqs(3), llm=[a, LLMConfig(model="m", base_url="http://127.0.0.1:2/v1", protocol="chat")])
    with pytest.raises(ValueError, match=r"llm\[1\] has model='n'"):
        complete(_reqs(3), llm=[a, LLMConfig(model="n", protocol="chat", temperature=0.0)])
    with pytest.raises(TypeError, match=r"llm\[0\]: expected an LLMConfig"):
        complete(_reqs(2), llm=["m"])
    with pytest.raises(ValueError, match="empty list"):
        complete(_reqs(2), llm=[])
    with pytest.raises(TypeError, match="config"):  # one way to name the endpoints: llm=
        complete(_reqs(2), config=a, llm=[a])
    with pytest.raises(TypeError, match="llm"):
        complete(_reqs(2))

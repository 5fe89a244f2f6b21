"""Faults of the LLM call (issue 13): a long Retry-After, credentials in the base URL, a corrupt cache file.

Each test talks to the loopback fake server (``tests/llm_server.py``) through the real openai client.
"""

import logging
import threading
import time

from pv4kit.llm import LLMConfig, complete
from tests.llm_server import FakeLLMServer, Reply

MSGS = [{"role": "user", "content": "hello"}]


def _run_with_deadline(fn, seconds):
    """Run ``fn`` in a daemon thread; ``(finished, result)`` after at most ``seconds``."""
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("out", fn()), daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive(), box.get("out")


def test_retry_after_3600_is_capped_for_all_workers_and_logged(caplog):
    """429 with Retry-After: 3600 to every worker of a batch: the shared pause is capped and logged."""
    with FakeLLMServer() as srv:
        srv.faults = [Reply(status=429, headers={"Retry-After": "3600"})] * 2
        config = LLMConfig(
            model="fake-model",
            base_url=srv.base_url,
            protocol="chat",
            backoff_base=0.01,
            timeout=5.0,
            max_concurrency=4,
            retry_after_max=0.5,
        )
        reqs = [[{"role": "user", "content": f"q{i}"}] for i in range(4)]
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="pv4kit.llm"):
            finished, out = _run_with_deadline(lambda: complete(reqs, config=config, progress=False), 30)
        elapsed = time.monotonic() - start
    assert finished, "the batch was still paused after 30 s (the shared pause is not capped)"
    assert [r.error for r in out] == [None] * 4
    assert 0.5 <= elapsed < 10
    long_pauses = [r.getMessage() for r in caplog.records if "Retry-After" in r.getMessage()]
    assert long_pauses, "a long pause was not logged"
    assert "3600" in long_pauses[0] and "0.5" in long_pauses[0]

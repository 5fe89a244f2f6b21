"""Faults of the LLM call (issues 13, 23): a long Retry-After, credentials in the base URL, HTTP 200 without
an answer, a server dripping its answer, Ctrl-C, a cache on a full or read-only disk.

Each test talks to the loopback fake server (``tests/llm_server.py``) through the real openai client.
"""

import json
import logging
import threading
import time

import pytest

from pv4kit.llm.client import complete
from pv4kit.llm.config import LLMConfig
from tests.llm_server import FakeLLMServer, Reply

MSGS = [{"role": "user", "content": "hello"}]
ANSWER_ARGS = ["answer", "--data", "raw", "--method", "no_docs", "--model", "fake-model"]
ANSWER_ARGS += ["--tokenizer", "chars"]


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
        with caplog.at_level(logging.WARNING, logger="pv4kit.llm.client"):
            finished, out = _run_with_deadline(lambda: complete(reqs, llm=config, progress=False), 30)
        elapsed = time.monotonic() - start
    assert finished, "the batch was still paused after 30 s (the shared pause is not capped)"
    assert [r.error for r in out] == [None] * 4
    assert 0.5 <= elapsed < 10
    long_pauses = [r.getMessage() for r in caplog.records if "Retry-After" in r.getMessage()]
    assert long_pauses, "a long pause was not logged"
    assert "3600" in long_pauses[0] and "0.5" in long_pauses[0]


# --------------------------------------------------------------------------- 13.8 credentials in a URL

SECRET = "s3cr3t-PASSWORD"
QKEY = "qk-ABCDEF123456"


def _creds_url(server: FakeLLMServer, *, query: bool = False) -> str:
    """The server's base URL with user info (and a key-like query parameter: the openai client would put
    the path after it, so only messages carry that form)."""
    host = server.base_url.split("://", 1)[1]
    return f"http://alice:{SECRET}@{host}" + (f"?api_key={QKEY}&region=eu" if query else "")


def _assert_clean(*paths):
    for path in paths:
        for f in [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]:
            data = f.read_bytes()
            assert SECRET.encode() not in data and QKEY.encode() not in data, f"secret written to {f}"


def test_redact_url_rules():
    from pv4kit.redact import redact_text, redact_url

    assert (
        redact_url("http://u:p@h:1/v1?api_key=k&x=1&token=t") == "http://***@h:1/v1?api_key=***&x=1&token=***"
    )
    assert redact_url("https://h/v1?sig=abc&model=m") == "https://h/v1?sig=***&model=m"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"  # unchanged, byte for byte
    assert redact_url(None) is None and redact_url("not a url") == "not a url"
    assert redact_text("failed at http://u:p@h/v1 (HTTP 401)") == "failed at http://***@h/v1 (HTTP 401)"


def test_credentials_in_base_url_stay_out_of_the_401_message(capsys, tmp_path, monkeypatch):
    """`pv4kit answer --base-url http://user:secret@host/v1` printed the secret in the 401 message."""
    from pv4kit.cli import main

    monkeypatch.setenv("PV4_TEST_KEY", "wrong-key")
    with FakeLLMServer(api_key="right-key") as srv:
        rc = main(
            ["answer", "--data", "raw", "--method", "no_docs", "--model", "fake-model", "--limit", "1"]
            + ["--base-url", _creds_url(srv), "--api-key-env", "PV4_TEST_KEY", "--tokenizer", "chars"]
            + ["--runs-dir", str(tmp_path / "runs"), "--cache", str(tmp_path / "c.sqlite")]
        )
        err = capsys.readouterr().err
    assert rc == 1 and "401" in err and "127.0.0.1" in err
    assert SECRET not in err and QKEY not in err
    _assert_clean(tmp_path)


def test_credentials_in_base_url_stay_out_of_config_cache_and_logs(capsys, tmp_path, caplog):
    """config.json, generations, the LLM cache and the log hold the redacted URL only."""
    import json

    from pv4kit.cli import main

    with FakeLLMServer() as srv:
        host = srv.base_url.split("://")[1]
        srv.faults = [Reply(status=429, headers={"Retry-After": "0.01"})]
        with caplog.at_level(logging.DEBUG):
            rc = main(
                ["answer", "--data", "raw", "--method", "no_docs", "--model", "fake-model", "--limit", "2"]
                + ["--base-url", _creds_url(srv), "--tokenizer", "chars", "--name", "r"]
                + ["--runs-dir", str(tmp_path / "runs"), "--cache", str(tmp_path / "c.sqlite")]
            )
        out = capsys.readouterr()
    assert rc == 0, out.err
    config = json.loads((tmp_path / "runs" / "r" / "config.json").read_text())
    assert config["base_url"] == f"http://***@{host}"
    _assert_clean(tmp_path)
    logged = "\n".join(r.getMessage() for r in caplog.records) + out.out + out.err
    assert SECRET not in logged and QKEY not in logged


def test_credentials_in_base_url_stay_out_of_recorded_errors(tmp_path):
    """A request that fails for good records its error redacted (generations' and the ledger's error)."""
    from pv4kit.llm.store import usage_frame

    with FakeLLMServer() as srv:
        srv.faults = [Reply(status=500, error=f"upstream {_creds_url(srv, query=True)} failed")] * 2
        config = LLMConfig(
            model="fake-model", base_url=_creds_url(srv), protocol="chat", max_retries=1, backoff_base=0.01
        )
        (out,) = complete([MSGS], llm=config, cache=tmp_path / "c.sqlite", progress=False)
    assert out.error is not None and "upstream http://***@127.0.0.1" in out.error
    assert "api_key=***" in out.error
    assert SECRET not in out.error and QKEY not in out.error
    assert SECRET not in "".join(usage_frame(tmp_path / "c.sqlite")["error"].dropna())
    _assert_clean(tmp_path)


def test_credentials_in_base_url_stay_out_of_related_config(tmp_path):
    """The related-benchmark commands record their options in config.json: the URL is redacted there."""
    from pathlib import Path

    from pv4kit.cli import main

    fixture = Path(__file__).parent / "fixtures" / "personafeedback"
    with FakeLLMServer(responder=lambda protocol, body, nth: "A") as srv:
        rc = main(
            ["-q", "personafeedback", "judge", "--data", str(fixture), "--model", "m", "--limit", "1"]
            + [
                "--base-url",
                _creds_url(srv),
                "--cache",
                str(tmp_path / "c.sqlite"),
                "--out",
                str(tmp_path / "j"),
            ]
        )
    assert rc == 0
    assert "***@127.0.0.1" in (tmp_path / "j" / "config.json").read_text()
    _assert_clean(tmp_path)


# --------------------------------------------------------------------------- 23.1 a reply without an answer

ERROR_OBJECT = '{"error": {"message": "upstream model overloaded", "type": "server_error", "code": 503}}'
HTML_PAGE = "<html><head><title>502</title></head><body><h1>502 Bad Gateway</h1>nginx</body></html>"
NO_SHAPE = '{"object": "list", "data": []}'


def _config(srv, protocol="chat", **options):
    options = {"max_retries": 1, "backoff_base": 0.01, "timeout": 10.0, **options}
    return LLMConfig(model="fake-model", base_url=srv.base_url, protocol=protocol, **options)


@pytest.mark.parametrize("protocol", ["chat", "completions", "responses"])
@pytest.mark.parametrize(
    "raw, content_type, words",
    [
        (ERROR_OBJECT, "application/json", "upstream model overloaded"),
        (HTML_PAGE, "text/html", "502 Bad Gateway"),
        (NO_SHAPE, "application/json", '"object": "list"'),
    ],
    ids=["error-object", "html", "no-shape"],
)
def test_http_200_without_an_answer_fails_is_retried_and_never_cached(
    tmp_path, protocol, raw, content_type, words
):
    """HTTP 200 with an error object, an HTML page or JSON without choices/output: a failure, not ""."""
    cache = tmp_path / "c.sqlite"
    with FakeLLMServer() as srv:
        srv.faults = [Reply(raw=raw, content_type=content_type)] * 2
        (out,) = complete([MSGS], llm=_config(srv, protocol), cache=cache, progress=False)
        assert out.error is not None and words in out.error, out
        assert out.text == "" and len(srv.requests) == 2  # retried like a 5xx
        (again,) = complete([MSGS], llm=_config(srv, protocol), cache=cache, progress=False)
    assert again.error is None and not again.cached and again.text == "echo: hello"
    assert len(srv.requests) == 3  # nothing was cached: the healthy server is asked again


def test_an_empty_answer_the_server_gave_stays_an_answer(tmp_path):
    """`content: null` with finish_reason content_filter is the reference's empty answer (cached)."""
    choice = {"message": {"role": "assistant", "content": None}, "finish_reason": "content_filter"}
    filtered = json.dumps({"id": "chatcmpl-1", "model": "fake-model", "choices": [choice]})
    with FakeLLMServer() as srv:
        srv.faults = [Reply(raw=filtered)]
        (out,) = complete([MSGS], llm=_config(srv), cache=tmp_path / "c.sqlite", progress=False)
        (again,) = complete([MSGS], llm=_config(srv), cache=tmp_path / "c.sqlite", progress=False)
    assert out.error is None and out.text == "" and out.finish_reason == "content_filter"
    assert again.cached and again.text == "" and len(srv.requests) == 1


def test_a_cached_row_without_an_answer_is_asked_again(tmp_path):
    """Rows an older pv4kit cached from an answerless HTTP 200 (empty text, no finish reason) are misses."""
    from pv4kit.llm.client import build_request, cache_key
    from pv4kit.llm.config import LLMResponse
    from pv4kit.llm.store import ResponseStore

    cache = tmp_path / "c.sqlite"
    with FakeLLMServer() as srv:
        config = _config(srv)
        store = ResponseStore(cache)
        key = cache_key(MSGS, config)
        store.put(config, build_request(MSGS, config), LLMResponse(text="", key=key), (0,) * 12)
        store.close()
        (out,) = complete([MSGS], llm=config, cache=cache, progress=False)
        (again,) = complete([MSGS], llm=config, cache=cache, progress=False)
    assert not out.cached and out.text == "echo: hello" and len(srv.requests) == 1
    assert again.cached and again.text == "echo: hello"


def test_answer_run_against_a_server_answering_errors_with_200_fails_its_rows(tmp_path, capsys):
    """`answer` with a gateway answering HTTP 200 + an error object: rows failed, exit 1, a rerun repairs."""
    import pandas as pd

    from pv4kit.cli import main

    args = [*ANSWER_ARGS, "--limit", "2", "--name", "r", "--max-retries", "0"]
    args += ["--runs-dir", str(tmp_path / "runs"), "--cache", str(tmp_path / "c.sqlite")]
    with FakeLLMServer(responder=lambda protocol, body, nth: "A") as srv:
        srv.faults = [Reply(raw=ERROR_OBJECT)] * 2
        rc = main([*args, "--base-url", srv.base_url])
        gens = pd.read_parquet(tmp_path / "runs" / "r" / "generations.parquet")
        assert rc == 1 and capsys.readouterr().out.count("2 failed") == 1
        assert gens["status"].tolist() == ["failed"] * 2
        assert all("upstream model overloaded" in e for e in gens["error"])
        assert main([*args, "--base-url", srv.base_url]) == 0 and len(srv.requests) == 4
    gens = pd.read_parquet(tmp_path / "runs" / "r" / "generations.parquet")
    assert gens["status"].tolist() == ["ok"] * 2 and gens["generation"].tolist() == ["A", "A"]


# --------------------------------------------------------------------------- 23.8 a dripping server


def test_timeout_bounds_a_whole_request_to_a_dripping_server():
    """A server dripping one byte every 0.5 s never trips a per-read timeout; the attempt's deadline does."""
    with FakeLLMServer() as srv:
        srv.faults = [Reply(text="x" * 50, drip=0.5)] * 2  # ~300 bytes: 150 s per answer
        config = _config(srv, timeout=2.0, max_retries=1)
        start = time.monotonic()
        finished, out = _run_with_deadline(lambda: complete([MSGS], llm=config, progress=False), 40)
        elapsed = time.monotonic() - start
    assert finished, "the request was still reading the dripping server after 40 s"
    assert out[0].error is not None and "Timeout" in out[0].error
    assert len(srv.requests) == 2 and elapsed < 10


def test_answer_timeout_bounds_a_dripping_server(tmp_path, capsys):
    """`pv4kit answer --timeout 3` against a dripping server: the row fails after ~3 s, the run ends."""
    from pv4kit.cli import main

    with FakeLLMServer() as srv:
        srv.faults = [Reply(text="x" * 50, drip=0.5)]
        args = [*ANSWER_ARGS, "--limit", "1", "--timeout", "3", "--max-retries", "0", "--name", "r"]
        args += ["--base-url", srv.base_url, "--runs-dir", str(tmp_path / "runs"), "--cache", "none"]
        start = time.monotonic()
        finished, rc = _run_with_deadline(lambda: main(args), 60)
        elapsed = time.monotonic() - start
    assert finished, "answer --timeout 3 was still waiting on the dripping server after 60 s"
    assert rc == 1 and "1 failed" in capsys.readouterr().out
    assert elapsed < 30


def test_ctrl_c_stops_a_run_waiting_on_a_dripping_server_and_keeps_the_cache(tmp_path):
    """SIGINT while a worker reads a dripping server: the run ends in seconds (130); answers stay cached."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    cache = tmp_path / "c.sqlite"
    with FakeLLMServer() as srv:
        srv.responder = lambda p, b, n: Reply(text="x" * 50, drip=0.5) if len(srv.requests) > 2 else "A"
        args = [*ANSWER_ARGS, "--limit", "3", "--concurrency", "1", "--timeout", "120", "--name", "r"]
        args += ["--base-url", srv.base_url, "--runs-dir", str(tmp_path / "runs"), "--cache", str(cache)]
        env = {**os.environ, "PYTHONPATH": str(repo)}
        proc = subprocess.Popen([sys.executable, "-m", "pv4kit", "-q", *args], cwd=repo, env=env)
        try:
            deadline = time.monotonic() + 120
            while len(srv.requests) < 3 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            assert len(srv.requests) == 3, "the run did not reach the dripping request"
            time.sleep(1.0)
            proc.send_signal(signal.SIGINT)
            start = time.monotonic()
            try:
                rc = proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                rc = None
            elapsed = time.monotonic() - start
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert rc == 130, f"Ctrl-C did not stop the run within 15 s (rc {rc})"
        assert elapsed < 5
        srv.responder = lambda p, b, n: "A"
        from pv4kit.cli import main

        assert main(args) == 0
    assert len(srv.requests) == 4  # the two answers before Ctrl-C came from the cache

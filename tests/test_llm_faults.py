"""Faults of the LLM call (issue 13): a long Retry-After, credentials in the base URL, a corrupt cache file.

Each test talks to the loopback fake server (``tests/llm_server.py``) through the real openai client.
"""

import logging
import threading
import time

from pv4kit.llm.client import complete
from pv4kit.llm.config import LLMConfig
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
        with caplog.at_level(logging.WARNING, logger="pv4kit.llm.transport"):
            finished, out = _run_with_deadline(lambda: complete(reqs, config=config, progress=False), 30)
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
        (out,) = complete([MSGS], config=config, cache=tmp_path / "c.sqlite", progress=False)
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

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pv4kit.cli import main
from pv4kit.generation import prompts
from pv4kit.generation.steps import generate_user, generate_users, normalise_output
from pv4kit.llm.config import LLMConfig
from pv4kit.llm.store import usage_frame
from tests.llm_server import FakeLLMServer, Reply, prompt_of

PERSONA = "Mara is a night-shift nurse who restores old bicycles and secretly writes a cookbook.\n"
ROOT = Path(__file__).resolve().parents[1]


def qa_block(i, category):
    return (
        f"<QUESTION> Q{i} about {category}?\n<CHOICE_A> alpha {i}\n<CHOICE_B> beta {i}\n"
        f"<CHOICE_C> gamma {i}\n"
        f"<CHOICE_D> delta {i}\n<CHOICE_E> epsilon {i}\n<CORRECT_CHOICE> {'ABCDE'[i % 5]}\n"
        f"<RATIONALE> because {i}\n<WORD_COUNTS> A: 2 | B: 2 | C: 2 | D: 2 | E: 2\n"
    )


def answer(prompt):
    """A valid output for any pv4kit generation prompt (deterministic in the prompt)."""
    task = re.search(r"# Task: (.+)", prompt).group(1)
    n = int(m.group(1)) if (m := re.search(r"exactly (\d+)", prompt)) else 1
    if task == "question categories":
        return "\n".join(f"{i + 1}. Category number {i}" for i in range(n))
    if task == "chat topics":
        return "\n\n".join(f"{i + 1}. Topic number {i}" for i in range(n))
    if task == "one chat":
        topic = re.search(r"<TOPIC>\n(.*)\n</TOPIC>", prompt).group(1)
        return f"Leo: help me with {topic}\nAssistant: Sure, here is a short answer."
    category = re.search(r'category "([^"]+)"', prompt).group(1)
    return "\n".join(qa_block(i, category) for i in range(n))


def responder(bad=None):
    """Valid answers; ``bad(prompt, nth)`` may return a malformed text or a Reply instead."""

    def respond(protocol, body, nth):
        prompt = prompt_of(protocol, body)
        if bad is not None and (out := bad(prompt, nth)) is not None:
            return out
        return answer(prompt)

    return respond


def gen_config(server, *, protocol="chat", model="fake-model", **kw):
    llm = LLMConfig(
        model=model,
        base_url=server.base_url,
        protocol=protocol,
        max_concurrency=8,
        backoff_base=0.01,
        max_retries=2,
        timeout=5,
    )
    base = dict(llm=llm, chat_llm=llm, num_categories=3, num_topics=6, num_questions=2, max_retries=2)
    base.update(kw)
    return base


@pytest.fixture
def persona_dir(tmp_path):
    d = tmp_path / "personas"
    d.mkdir()
    (d / "user_7.txt").write_text(PERSONA)
    return d


def test_list_items_one_reading_reference_by_default():
    from pv4kit.text import list_items

    reply = "Here are they:\n1. a\n\n2) b\n- c\n3 . d\n2.5-hour commutes\n4.\n-5 degrees\n"
    # the reference's rule: one leading "digits." removed, nothing else (2.5-hour loses its "2.")
    assert list_items(reply) == [
        "Here are they:",
        "a",
        "2) b",
        "- c",
        "3 . d",
        "5-hour commutes",
        "",
        "-5 degrees",
    ]
    # pv4kit's loose reading: 1), 1 ., bullets removed; 2.5-hour and -5 stay whole; empty items dropped
    assert list_items(reply, loose=True) == [
        "Here are they:",
        "a",
        "b",
        "c",
        "d",
        "2.5-hour commutes",
        "-5 degrees",
    ]
    # only the marked lines: a heading or a sentence around the list is no item
    assert list_items(reply, loose=True, marked_only=True) == ["a", "b", "c", "d"]


def check_output(step, text, **kw):
    return normalise_output(step, text, **kw)[:2]


def test_check_output_rules():
    # the reference's list rule by default; pv4kit's repair on request
    from pv4kit.text import list_items

    assert list_items("1. a\n\n2) b\n- c\n") == ["a", "2) b", "- c"]
    assert list_items("1. a\n\n2) b\n- c\n", loose=True) == ["a", "b", "c"]
    assert check_output("categories", "1. a\n2) b", n=2, repair_lists=True) == ("a\nb", [])
    assert check_output("categories", "1. a\n2. b", n=2) == ("a\nb", [])
    content, problems = check_output("topics", "1. a\n2. b\n3. c", n=2)
    assert content == "a\nb\nc" and problems == ["expected 2 items, got 3"]  # no truncation
    assert check_output("topics", "   ", n=2) == (None, ["empty reply"])
    assert check_output("chats", "Leo: hi\n\nAssistant: hello\n", n=1)[0] == "Leo: hi\n\nAssistant: hello"
    assert check_output("chats", "Leo: hi\n\nAssistant: hello\n", n=1, repair_chats=True) == (
        "Leo: hi\nAssistant: hello",
        [],
    )
    assert check_output("chats", "Leo: hi\\nAssistant: hello", n=1)[1]
    assert check_output("chats", "Leo: hi\\nAssistant: hello", n=1, repair_chats=True)[1] == []
    assert check_output("chats", "User: hi\nAssistant: yo", n=1)[1]
    assert check_output("chats", "Leo: hi", n=1)[1]
    assert check_output("chats", "Leo: a\nAssistant: b\nLeo: c\nAssistant: d", n=1)[1]
    good = qa_block(0, "x") + qa_block(1, "x")
    assert check_output("questions", good, n=2) == (good, [])
    assert check_output("questions", good.replace("<CORRECT_CHOICE> A", "<CORRECT_CHOICE> ?"), n=2)[1]
    assert check_output("questions", "no tags at all", n=2)[1]


def test_prompts_are_generic_and_versioned():
    chat = prompts.chat_messages(PERSONA, "fixing a bike")[0]["content"]
    assert "Leo: " in chat and "fixing a bike" in chat and PERSONA.strip() in chat
    for word in (" he ", " his ", " him ", "Toronto", "sarcas"):
        assert word not in chat
    q = prompts.questions_messages(PERSONA, "Night routines", n=15)[0]["content"]
    for tag in (
        "<QUESTION>",
        "<CHOICE_A>",
        "<CHOICE_E>",
        "<CORRECT_CHOICE>",
        "<RATIONALE>",
        "<WORD_COUNTS>",
        "A: n | B: n",
    ):
        assert tag in q
    assert "exactly 15" in q and "best practice" in q and "two or more" in q
    assert "exactly 200" in prompts.topics_messages(PERSONA, n=200)[0]["content"]
    assert "exactly 10" in prompts.categories_messages(PERSONA)[0]["content"]
    assert len({prompts.template_hash(s) for s in prompts.TEMPLATES}) == 4
    # the templates of PROMPT_VERSION, byte for byte (a changed wording bumps PROMPT_VERSION and this hash)
    assert prompts.prompt_set().sha256 == "6b637c731be5ec041145dd457286b3de93e901bf43f035c1e72a31fd980514a3"


@pytest.mark.parametrize("protocol", ["chat", "responses"])
def test_generate_end_to_end_and_rerun(tmp_path, persona_dir, protocol):
    out, cache = tmp_path / "users", tmp_path / "cache.sqlite"
    with FakeLLMServer(responder()) as srv:
        cfg = gen_config(srv, protocol=protocol)
        report = generate_users(persona_dir, out, **cfg, cache=cache, progress=False)
        assert report.loc[0, "status"] == "complete" and report.loc[0, "questions"] == 6
        assert len(srv.requests) == 2 + 6 + 3 and report.loc[0, "calls"] == 11
        user = out / "user_7"
        assert (user / "categories.txt").read_text().splitlines()[0] == "Category number 0"
        assert len((user / "chat_topics.txt").read_text().splitlines()) == 6
        assert (
            (user / "chats" / "5.txt").read_text().startswith("Leo: help me with Topic number 5\nAssistant:")
        )
        manifest = json.loads((user / "manifest.json").read_text())
        entry = manifest["files"]["chats/0.txt"]
        assert entry["model"] == "fake-model" and entry["prompt_version"] == prompts.PROMPT_VERSION
        assert entry["valid"] and entry["request_sha256"] and entry["template_sha256"]
        assert set(manifest["files"]) >= {"categories.txt", "chat_topics.txt", "qa/2.txt", "qa.csv"}
        assert manifest["pv4kit_version"]
        qa_bytes = (user / "qa.csv").read_bytes()
        assert not list(out.rglob("*.tmp"))

        again = generate_users(persona_dir, out, **cfg, cache=cache, progress=False)
        assert again.loc[0, "status"] == "complete" and again.loc[0, "calls"] == 0
        assert len(srv.requests) == 11

        # a deleted chat and qa.csv come back from the cache, byte for byte
        (user / "chats" / "3.txt").unlink()
        (user / "qa.csv").unlink()
        third = generate_users(persona_dir, out, **cfg, cache=cache, progress=False)
        assert third.loc[0, "cached"] == 1 and third.loc[0, "calls"] == 0 and len(srv.requests) == 11
        assert (user / "qa.csv").read_bytes() == qa_bytes
    frame = usage_frame(cache)
    assert set(frame["step"]) == {"categories", "topics", "chats", "questions"}
    assert set(frame["user_id"]) == {7}


def test_malformed_outputs_are_asked_again_then_kept_with_reask_malformed(tmp_path, persona_dir):
    def bad(prompt, nth):
        if "Topic number 1\n" in prompt and nth == 0:
            return "Leo: only one turn"  # malformed once
        if "Topic number 2\n" in prompt:
            return "Here is a chat: Leo said hi"  # always malformed
        if "Category number 0" in prompt and "# Task: multiple" in prompt and nth < 2:
            return qa_block(0, "x")  # one block instead of two, twice
        return None

    out = tmp_path / "users"
    with FakeLLMServer(responder(bad)) as srv:
        cfg = gen_config(srv, max_retries=2, reask_malformed=True)
        res = generate_user(
            persona_dir / "user_7.txt",
            out / "user_7",
            **cfg,
            cache=tmp_path / "c.sqlite",
            progress=False,
        )
        assert res.status == "complete" and res.malformed == ["chats/2.txt"]
        # 11 first asks + chat1 once + chat2 twice + qa0 twice
        assert len(srv.requests) == 11 + 1 + 2 + 2
        assert (out / "user_7" / "chats" / "1.txt").read_text().startswith("Leo: help me")
        assert (out / "user_7" / "chats" / "2.txt").read_text() == "Here is a chat: Leo said hi"
        files = json.loads((out / "user_7" / "manifest.json").read_text())["files"]
        assert files["chats/2.txt"]["valid"] is False and files["chats/2.txt"]["problems"]
        assert files["qa/0.txt"]["sample_index"] == 2 and files["qa/0.txt"]["valid"]
        assert files["qa/0.txt"]["repairs"][0].startswith("asked again after: expected 2 complete")
        assert "chats/1.txt: asked again after" in " ".join(res.repairs)
        rerun = generate_user(
            persona_dir / "user_7.txt",
            out / "user_7",
            **cfg,
            cache=tmp_path / "c.sqlite",
            progress=False,
        )
        assert rerun.calls == 0 and rerun.malformed == ["chats/2.txt"]


def test_failures_leave_user_incomplete_and_rerun_completes(tmp_path, persona_dir):
    broken = {"on": True}

    def bad(prompt, nth):
        if broken["on"] and "Topic number 4\n" in prompt:
            return Reply(status=500)
        return None

    out = tmp_path / "users"
    with FakeLLMServer(responder(bad)) as srv:
        cfg = gen_config(srv)
        report = generate_users(persona_dir, out, **cfg, cache=tmp_path / "c.sqlite", progress=False)
        assert report.loc[0, "status"] == "incomplete" and report.loc[0, "missing"] == ["chats/4.txt"]
        assert report.loc[0, "errors"] and "gave up" in report.loc[0, "errors"][0]
        assert not (out / "user_7" / "qa.csv").exists()  # as the reference: all chats and questions first
        assert not list(out.rglob("*.tmp"))
        broken["on"] = False
        report = generate_users(persona_dir, out, **cfg, cache=tmp_path / "c.sqlite", progress=False)
        assert report.loc[0, "status"] == "complete" and report.loc[0, "calls"] == 1
        assert (out / "user_7" / "qa.csv").is_file()


def test_a_reply_without_an_answer_leaves_the_user_incomplete_and_says_why(tmp_path, persona_dir):
    """HTTP 200 with an error object (a gateway) for one chat: incomplete, the server's words in errors."""
    broken = {"on": True}
    gateway = Reply(raw='{"error": {"message": "upstream model overloaded", "type": "server_error"}}')

    def bad(prompt, nth):
        return gateway if broken["on"] and "Topic number 4\n" in prompt else None

    out, cache = tmp_path / "users", tmp_path / "c.sqlite"
    with FakeLLMServer(responder(bad)) as srv:
        cfg = gen_config(srv)
        report = generate_users(persona_dir, out, **cfg, cache=cache, progress=False)
        assert report.loc[0, "status"] == "incomplete" and report.loc[0, "missing"] == ["chats/4.txt"]
        assert "upstream model overloaded" in " ".join(report.loc[0, "errors"])
        broken["on"] = False
        report = generate_users(persona_dir, out, **cfg, cache=cache, progress=False)
        assert report.loc[0, "status"] == "complete" and report.loc[0, "calls"] == 1


def test_stale_files_are_detected_and_regenerated(tmp_path, persona_dir):
    out, cache = tmp_path / "users", tmp_path / "c.sqlite"
    with FakeLLMServer(responder()) as srv:
        generate_users(persona_dir, out, **gen_config(srv), cache=cache, progress=False)
        n = len(srv.requests)
        other = gen_config(srv, model="other-model")
        report = generate_users(persona_dir, out, **other, cache=cache, progress=False)
        assert report.loc[0, "status"] == "stale" and len(report.loc[0, "stale"]) == 11
        assert len(srv.requests) == n
        fixed = gen_config(srv, model="other-model", regenerate_stale=True)
        report = generate_users(persona_dir, out, **fixed, cache=cache, progress=False)
        assert report.loc[0, "status"] == "complete" and len(srv.requests) == n + 11
        files = json.loads((out / "user_7" / "manifest.json").read_text())["files"]
        assert {e.get("model") for k, e in files.items() if k != "qa.csv"} == {"other-model"}
        # a changed persona makes everything stale
        (persona_dir / "user_7.txt").write_text(PERSONA + "She also sings.\n")
        report = generate_users(
            persona_dir,
            out,
            **{**fixed, "regenerate_stale": False},
            cache=cache,
            progress=False,
        )
        assert report.loc[0, "status"] == "stale"


def test_lost_manifest_is_rebuilt_from_cache(tmp_path, persona_dir):
    out, cache = tmp_path / "users", tmp_path / "c.sqlite"
    with FakeLLMServer(responder()) as srv:
        cfg = gen_config(srv)
        generate_users(persona_dir, out, **cfg, cache=cache, progress=False)
        (out / "user_7" / "manifest.json").unlink()
        res = generate_users(persona_dir, out, **cfg, cache=cache, progress=False)
        assert res.loc[0, "untracked"] == [] and res.loc[0, "status"] == "complete"
        (out / "user_7" / "manifest.json").unlink()
        res = generate_users(persona_dir, out, **cfg, cache=None, progress=False)
        assert len(res.loc[0, "untracked"]) == 11 and len(srv.requests) == 11


def test_cli_generate_and_usage(tmp_path, persona_dir, capsys):
    out, cache = tmp_path / "users", tmp_path / "c.sqlite"
    with FakeLLMServer(responder()) as srv:
        args = [
            "generate",
            "--persona-dir",
            str(persona_dir),
            "--output-dir",
            str(out),
            "--base-url",
            srv.base_url,
            "--model",
            "fake-model",
            "--num-categories",
            "2",
            "--num-topics",
            "3",
            "--num-questions",
            "2",
            "--cache",
            str(cache),
            "--max-workers",
            "4",
        ]
        assert main(["-q", *args]) == 0
        assert (out / "user_7" / "qa.csv").is_file()
        assert main(["-q", *args, "--user-start", "8"]) == 1  # no persona in range: clear error
        assert "no user_N.txt" in capsys.readouterr().err
        assert main(["-q", *args[:-2], "--max-workers", "4", "--num-topics", "4"]) == 1  # stale topics
        captured = capsys.readouterr()
        assert "regenerate-stale" in captured.out and "not complete: 7" in captured.err
    assert main(["usage", "--cache", str(cache), "--by", "step,model"]) == 0
    text = capsys.readouterr().out
    assert "chats" in text and "estimated cost" in text


def test_sigkill_mid_run_then_rerun_matches_uninterrupted(tmp_path, persona_dir):
    sizes = ["--num-categories", "4", "--num-topics", "40", "--num-questions", "3", "--max-workers", "4"]
    with FakeLLMServer(responder(), delay=0.03) as srv:

        def cmd(out, cache):
            return [
                sys.executable,
                "-m",
                "pv4kit",
                "-q",
                "generate",
                "--persona-dir",
                str(persona_dir),
                "--output-dir",
                str(out),
                "--base-url",
                srv.base_url,
                "--model",
                "fake-model",
                "--cache",
                str(cache),
                *sizes,
            ]

        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        ref_out, ref_cache = tmp_path / "ref", tmp_path / "ref.sqlite"
        assert main(cmd(ref_out, ref_cache)[3:]) == 0  # uninterrupted reference run, in process
        n_ref = len(srv.requests)
        assert n_ref == 2 + 40 + 4

        out, cache = tmp_path / "users", tmp_path / "c.sqlite"
        proc = subprocess.Popen(
            cmd(out, cache), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            chats = out / "user_7" / "chats"
            if chats.is_dir() and len(list(chats.glob("*.txt"))) >= 10:
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert not (out / "user_7" / "qa.csv").exists()
        first = srv.requests[n_ref:]
        import sqlite3

        conn = sqlite3.connect(cache)
        stored = {
            json.loads(r)["messages"][-1]["content"] for (r,) in conn.execute("SELECT request FROM responses")
        }
        conn.close()
        assert 10 <= len(stored) < n_ref

        subprocess.run(cmd(out, cache), check=True, env=env, timeout=60, capture_output=True)
        rerun = srv.requests[n_ref + len(first) :]
        assert not {p for _, p, _ in rerun} & stored  # cached responses are not requested again
        assert len(stored) + len(rerun) == n_ref
    assert (out / "user_7" / "qa.csv").read_bytes() == (ref_out / "user_7" / "qa.csv").read_bytes()
    for rel in ["categories.txt", "chat_topics.txt", "chats/39.txt", "qa/3.txt"]:
        assert (out / "user_7" / rel).read_bytes() == (ref_out / "user_7" / rel).read_bytes()
    assert not [p for p in out.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]


def test_a_shorter_list_removes_the_files_past_its_end(tmp_path, persona_dir):
    out, cache = tmp_path / "users", tmp_path / "c.sqlite"
    with FakeLLMServer(responder()) as srv:
        generate_users(persona_dir, out, **gen_config(srv), cache=cache, progress=False)
        shorter = gen_config(srv, num_topics=3, num_categories=2, regenerate_stale=True)
        report = generate_users(persona_dir, out, **shorter, cache=cache, progress=False)
    assert report.loc[0, "status"] == "complete"
    user = out / "user_7"
    assert sorted(p.name for p in (user / "chats").iterdir()) == ["0.txt", "1.txt", "2.txt"]
    assert sorted(p.name for p in (user / "qa").iterdir()) == ["0.txt", "1.txt"]
    files = json.loads((user / "manifest.json").read_text())["files"]
    assert "chats/5.txt" not in files and "qa/2.txt" not in files

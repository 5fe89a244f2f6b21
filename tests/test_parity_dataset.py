"""Parity of the dataset steps (5 and 6) with the public reference, byte for byte.

The ``_ref_*`` functions below are an independent transcription, written for these tests from reading
``personalizationv4/generate.py`` (``parse_questions``, ``shuffle_choices``, ``build_question_table``,
``write_question_table``, ``UserGenerator.generate_list``) and ``personalizationv4/build_dataset.py``
(``read_questions``, ``read_chats``, ``split_questions``, ``make_table``, ``build``) of
``snap-stanford/memorilla``; nothing is imported from the reference. They run on inputs crafted to stress
each rule, and pv4kit's output must equal theirs byte for byte.
"""

from __future__ import annotations

import csv
import io
import math
import random
import re
from pathlib import Path

import numpy as np
import pytest

from pv4kit.dataset.formats import read_list
from pv4kit.dataset.questions import build_question_table, format_qa_csv, parse_qa_text, write_qa_tables
from pv4kit.dataset.splits import build_dataset
from pv4kit.dataset.tree import read_chats
from pv4kit.dataset.validate import validate_raw

ABCDE = ("A", "B", "C", "D", "E")
FIELDS = (
    "question",
    "choice_a",
    "choice_b",
    "choice_c",
    "choice_d",
    "choice_e",
    "correct_choice",
    "rationale",
)
HEADER = ("index", "category", *FIELDS[:7], "rationale")

# ------------------------------------------------------------------ transcription of the reference, step 5

# each field: (opening tag, what ends it); the reference searches each pattern in "<QUESTION>" + chunk
_REF_FIELDS = {
    "question": ("<QUESTION>", "<CHOICE_A>"),
    "choice_a": ("<CHOICE_A>", "<CHOICE_B>"),
    "choice_b": ("<CHOICE_B>", "<CHOICE_C>"),
    "choice_c": ("<CHOICE_C>", "<CHOICE_D>"),
    "choice_d": ("<CHOICE_D>", "<CHOICE_E>"),
    "choice_e": ("<CHOICE_E>", "<CORRECT_CHOICE>"),
}


def _ref_parse(text: str) -> list[dict[str, str]]:
    out = []
    for chunk in text.strip().split("<QUESTION>"):
        if chunk.strip() == "":
            continue
        block = "<QUESTION>" + chunk
        rec: dict[str, str] = {}
        for name, (open_tag, close_tag) in _REF_FIELDS.items():
            m = re.search(re.escape(open_tag) + r"\s*(.*?)(?=" + re.escape(close_tag) + r"|$)", block, re.S)
            if m is not None:
                rec[name] = m.group(1).strip()
        m = re.search(r"<CORRECT_CHOICE>\s*([A-E])\b", block, re.S)
        if m is not None:
            rec["correct_choice"] = m.group(1).strip()
        m = re.search(r"<RATIONALE[^>]*>\s*(.*?)$", block, re.S)
        if m is not None:
            rec["rationale"] = m.group(1).strip()
        if rec.get("question"):
            out.append(rec)
    return out


def _ref_shuffle(records: list[dict], rng: random.Random) -> list[dict]:
    kept = []
    for rec in records:
        m = re.match(r"[A-E]", rec.get("correct_choice", ""), re.I)
        if not m:
            continue
        right = rec.get("choice_" + m.group(0).lower(), "")
        if right == "":
            continue
        letter = rng.choice(ABCDE)
        five = [rec.get(f"choice_{x.lower()}", "") for x in ABCDE]
        five.remove(right)
        rng.shuffle(five)
        five.insert(ABCDE.index(letter), right)
        kept.append(
            {**rec, **{f"choice_{x.lower()}": v for x, v in zip(ABCDE, five, strict=True)}}
            | {"correct_choice": letter}
        )
    return kept


def _ref_qa_csv(user_dir: Path, seed: int = 42) -> str:
    n = len((user_dir / "categories.txt").read_text(encoding="utf-8").split("\n"))
    records = []
    for c in range(n):
        text = (user_dir / "qa" / f"{c}.txt").read_text(encoding="utf-8")
        records += [dict(r, category=c) for r in _ref_parse(text)]
    rows = _ref_shuffle(records, random.Random(seed))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=HEADER, lineterminator="\n")
    w.writeheader()
    for i, r in enumerate(rows):
        w.writerow({k: r.get(k, "") for k in HEADER} | {"index": i})
    return buf.getvalue()


# ------------------------------------------------------------------ crafted inputs


def block(q, choices, letter, rationale="r", tag=True):
    parts = [("<QUESTION>\n" if tag else "") + q]
    parts += [f"<CHOICE_{x}>\n{c}" for x, c in zip(ABCDE, choices, strict=True) if c is not None]
    parts += [f"<CORRECT_CHOICE>\n{letter}", f"<RATIONALE>\n{rationale}\n<WORD_COUNTS>\nA: 1 | B: 1"]
    return "\n".join(parts) + "\n"


def five(tag):
    return [f"{tag} {x}" for x in "abcde"]


CRAFTED = {
    "untagged_first": block("Forgot the tag?", five("u"), "B", tag=False) + block("Second?", five("s"), "D"),
    "preamble_plain": "Here are the questions:\n\n"
    + block("One?", five("o"), "A")
    + block("Two?", five("t"), "E"),
    "preamble_tags_no_letter": "Each uses <CHOICE_A> to <CHOICE_E> and a <CORRECT_CHOICE> line.\n"
    + block("P?", five("p"), "C"),
    "preamble_tags_with_letter": "Format <CHOICE_A> option text <CORRECT_CHOICE> A\n\n"
    + block("W?", five("w"), "B"),
    "letters": block("lower?", five("l"), "c")
    + block("paren?", five("p"), "C)")
    + block("dot?", five("d"), " E.")
    + block("word?", five("w"), "Choice B")
    + block("two?", five("t"), "BD")
    + block("after lower?", five("a"), "A"),
    "duplicate_correct": block("dup?", ["same", "x", "same", "same", "y"], "C")
    + block("dup2?", ["k", "k", "m", "n", "k"], "E"),
    "empty_and_missing": block("empty correct?", ["a", "", "c", "d", "e"], "B")
    + block("no E tag?", ["a", "b", "c", "d", None], "D")
    + "<QUESTION>\n\n<QUESTION>\n<CHOICE_A> no question\n"
    + block("last?", five("z"), "A"),
    "bom": "\ufeff" + block("After a BOM?", five("b"), "A") + block("Next?", five("n"), "B"),
    "crlf": (block("Windows?", five("w"), "E") + block("Lines?", five("l"), "A")).replace("\n", "\r\n"),
    "trailing_space": "\n\n  " + block("Spaced?", five("s"), "D") + "\n\n   \n",
}


def write_user(users: Path, uid: int, files: list[str], *, categories: str | None = None) -> Path:
    d = users / f"user_{uid}"
    (d / "qa").mkdir(parents=True)
    (d / "chats").mkdir()
    cats = categories if categories is not None else "\n".join(f"Category {c}" for c in range(len(files)))
    (d / "categories.txt").write_text(cats, encoding="utf-8")
    for c, text in enumerate(files):
        (d / "qa" / f"{c}.txt").write_bytes(text.encode("utf-8"))
    return d


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_qa_csv_bytes_equal_reference_on_crafted_file(tmp_path, name):
    filler = block("Before?", five("f"), "A") + block("Also before?", five("g"), "C")
    after = block("After?", five("h"), "B") * 3  # later letters shift if a draw is gained or lost
    d = write_user(tmp_path, 1, [filler, CRAFTED[name], after])
    table, _ = build_question_table(d)
    assert format_qa_csv(table) == _ref_qa_csv(d)


def test_qa_csv_bytes_equal_reference_on_random_files(tmp_path):
    rng = random.Random(2026)
    pieces = list(CRAFTED.values())
    for uid in range(25):
        files = [
            "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 4))
        ]
        d = write_user(tmp_path, uid, files)
        seed = rng.randint(0, 10**6)
        table, _ = build_question_table(d, seed=seed)
        assert format_qa_csv(table) == _ref_qa_csv(d, seed=seed), uid


def test_untagged_first_question_is_kept_and_draws(tmp_path):
    d = write_user(tmp_path, 1, [CRAFTED["untagged_first"]])
    table, report = build_question_table(d)
    assert table["question"].tolist() == ["Forgot the tag?", "Second?"]
    assert report[["reason", "kept", "line"]].values.tolist() == [["untagged_first_kept", True, 1]]
    write_qa_tables(tmp_path)
    assert (d / "qa.csv").read_text(encoding="utf-8") == _ref_qa_csv(d)


@pytest.mark.parametrize(
    ("name", "reason", "questions"),
    [
        ("preamble_plain", "preamble", ["One?", "Two?"]),
        ("preamble_tags_no_letter", "preamble", ["P?"]),
        ("bom", "preamble", ["After a BOM?", "Next?"]),  # the BOM is a chunk of its own in the reference
    ],
)
def test_preamble_is_dropped_without_a_draw(tmp_path, name, reason, questions):
    d = write_user(tmp_path, 1, [CRAFTED[name]])
    table, report = build_question_table(d)
    assert table["question"].tolist() == questions
    assert report["reason"].tolist() == [reason] and not report["kept"].any()
    assert report["line"].tolist() == [1]
    # no draw: the letters equal those of the same file without the preamble
    bare = write_user(tmp_path / "bare", 1, [CRAFTED[name][CRAFTED[name].index("<QUESTION>") :]])
    assert build_question_table(bare)[0]["correct_choice"].tolist() == table["correct_choice"].tolist()


def test_preamble_with_a_letter_is_a_question_as_in_the_reference(tmp_path):
    d = write_user(tmp_path, 1, [CRAFTED["preamble_tags_with_letter"]])
    table, report = build_question_table(d)
    assert table["question"].tolist() == ["Format", "W?"]
    assert report["reason"].tolist() == ["untagged_first_kept"]


def test_letters_and_blocks_parse_as_reference():
    for name, text in CRAFTED.items():
        ours = [b for b in parse_qa_text(text) if b.question]
        ref = _ref_parse(text.replace("\r\n", "\n"))  # read_text turns CRLF into LF before parsing
        assert [(b.question, b.letter) for b in ours] == [
            (r["question"], r.get("correct_choice", "")) for r in ref
        ], name


def test_trailing_newline_in_categories_counts_a_category(tmp_path):
    files = [block("Q?", five("q"), "A")]
    d = write_user(tmp_path, 1, files, categories="Only category\n")
    with pytest.raises(FileNotFoundError, match=r"qa/1.txt.*file ends with a newline"):
        build_question_table(d)
    with pytest.raises(FileNotFoundError):
        _ref_qa_csv(d)
    report = validate_raw(tmp_path)
    row = report[report["code"] == "trailing_newline"]
    assert set(row["severity"]) == {"error", "warning"} and row["file"].str.endswith("qa/1.txt").any()
    # when qa/1.txt exists, the reference reads it as category 1, and so does pv4kit
    (d / "qa" / "1.txt").write_text(block("Extra?", five("e"), "B"), encoding="utf-8")
    table, _ = build_question_table(d)
    assert table["category"].tolist() == [0, 1]
    assert format_qa_csv(table) == _ref_qa_csv(d)


def test_list_items_read_exactly_as_stored(tmp_path):
    path = tmp_path / "categories.txt"
    path.write_bytes(b"2.5-hour commutes\r\n10. Numbered twice\r\n  spaced  \r\n\r\nlast")
    ref = path.read_text(encoding="utf-8").split("\n")
    assert read_list(path) == ref == ["2.5-hour commutes", "10. Numbered twice", "  spaced  ", "", "last"]
    path.write_text("\ufeffa\nb\n", encoding="utf-8")
    assert read_list(path) == ["\ufeffa", "b", ""]


def test_data_loader_keeps_category_names_as_stored(tmp_path):
    from pv4kit.dataset.load import load

    users = tmp_path / "raw" / "users"
    d = write_user(users, 130, [block("Q?", five("q"), "A"), block("R?", five("r"), "B")])
    (d / "categories.txt").write_text("2.5-hour commutes\n3. Numbered", encoding="utf-8")
    (d / "chats" / "0.txt").write_text("Leo: hi\nAssistant: hello", encoding="utf-8")
    write_qa_tables(users)
    q = load(tmp_path / "raw").questions
    assert q["category_name"].tolist() == ["2.5-hour commutes", "3. Numbered"]


# ------------------------------------------------------------------ transcription of the reference, step 6


def _ref_build(users_dir: Path, out: Path, train: range, test: range, hard_csv: Path | None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    splits = ("train", "validation", "test")
    hard = set()
    if hard_csv is not None:
        with hard_csv.open(encoding="utf-8", newline="") as fh:
            hard = {(int(r["user_id"]), int(r["question_index"])) for r in csv.DictReader(fh)}
    schema = pa.schema(
        [
            pa.field("user_id", pa.int64()),
            pa.field("question", pa.string()),
            pa.field("answer", pa.string()),
            pa.field("choices", pa.list_(pa.string())),
            pa.field("documents", pa.list_(pa.string())),
            pa.field("hard", pa.bool_()),
        ]
    )
    out.mkdir(parents=True)
    writers = {s: pq.ParquetWriter(out / f"{s}.parquet", schema) for s in splits}
    ids = sorted(int(p.name[5:]) for p in users_dir.iterdir() if re.fullmatch(r"user_\d+", p.name))
    summary = []
    for uid in ids:
        if uid not in train and uid not in test:
            continue
        d = users_dir / f"user_{uid}"
        qs = []
        with (d / "qa.csv").open(encoding="utf-8", newline="") as fh:
            for r in csv.DictReader(fh):
                ch = [r[f"choice_{x.lower()}"] for x in ABCDE]
                letter = r["correct_choice"].strip().upper()
                qs.append((int(r["index"]), r["question"], ch, ch[ABCDE.index(letter)]))
        qs.sort(key=lambda q: q[0])
        chats = sorted((d / "chats").glob("*.txt"), key=lambda p: int(p.stem))
        docs = [p.read_text(encoding="utf-8") for p in chats]
        if uid in train:
            perm = np.random.default_rng(23).permutation(len(qs)).tolist()
            k = math.ceil(0.1 * len(qs))
            parts = {"train": [qs[i] for i in perm[k:]], "validation": [qs[i] for i in perm[:k]]}
        else:
            parts = {"test": qs}
        for s, sel in parts.items():
            cols = [
                [uid] * len(sel),
                [q[1] for q in sel],
                [q[3] for q in sel],
                [q[2] for q in sel],
                [docs] * len(sel),
                [(uid, q[0]) in hard for q in sel],
            ]
            arrays = [pa.array(v, type=f.type) for v, f in zip(cols, schema, strict=True)]
            writers[s].write_table(pa.Table.from_arrays(arrays, schema=schema))
        summary.append(
            {
                "user_id": uid,
                "role": "training" if uid in train else "evaluation",
                "questions": len(qs),
                **{s: len(parts.get(s, [])) for s in splits},
                "hard": sum((uid, q[0]) in hard for q in qs),
            }
        )
    for w in writers.values():
        w.close()
    with (out / "user_splits.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(
            fh, fieldnames=("user_id", "role", "questions", *splits, "hard"), lineterminator="\n"
        )
        w.writeheader()
        w.writerows(summary)


def _qa_rows(uid: int, n: int, *, order=None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    for i in order if order is not None else range(n):
        ch = [f"u{uid} q{i} {x}" for x in "abcde"]
        if i == 1:
            ch[4] = ""  # an empty distractor stays an empty candidate
        w.writerow([i, 0, f"u{uid} question {i}, with a comma?", *ch, "ABCD"[i % 4], "why"])
    return buf.getvalue()


def test_build_files_equal_reference_bytes(tmp_path):
    users = tmp_path / "raw" / "users"
    sizes = {6: 12, 7: 7, 8: 1, 9: 0, 126: 21, 127: 0, 150: 9}  # zero- and one-question users included
    for uid, n in sizes.items():
        d = users / f"user_{uid}"
        (d / "chats").mkdir(parents=True)
        order = list(range(n))[::-1] if uid == 150 else None  # rows out of index order
        (d / "qa.csv").write_text(_qa_rows(uid, n, order=order), encoding="utf-8")
        for i in range(12):
            text = f"Leo: chat {i} of {uid}\nAssistant: ok"
            if uid == 126 and i == 3:
                text = "\ufeff" + text.replace("\n", "\r\n") + "\r\n\r\n"  # BOM, CRLF, trailing newlines
            if uid == 7 and i == 0:
                text = "  " + text + "\n"
            (d / "chats" / f"{i}.txt").write_bytes(text.encode("utf-8"))
    (users / "user_300").mkdir()  # outside both ranges: ignored by both
    hard = tmp_path / "raw" / "hard_subset.csv"
    hard.write_text("user_id,question_index\n126,2\n126,20\n150,0\n150,0\n", encoding="utf-8")

    _ref_build(users, tmp_path / "ref", range(6, 126), range(126, 156), hard)
    frame = build_dataset(users, tmp_path / "ours", hard_subset=hard, progress=False)
    for name in ("train.parquet", "validation.parquet", "test.parquet", "user_splits.csv"):
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
    assert frame["role"].tolist() == ["training"] * 4 + ["evaluation"] * 3
    import pyarrow.parquet as pq

    assert pq.ParquetFile(tmp_path / "ours" / "test.parquet").num_row_groups == 3  # user 127: empty group
    docs = pq.read_table(tmp_path / "ours" / "test.parquet").column("documents")[0].as_py()
    assert docs[3] == "\ufeffLeo: chat 3 of 126\nAssistant: ok\n\n"  # as read_text gives it, not stripped


def test_read_chats_as_stored_strip_as_option(tmp_path):
    d = tmp_path / "user_1"
    (d / "chats").mkdir(parents=True)
    (d / "chats" / "0.txt").write_bytes(b" Leo: a\r\nAssistant: b\r\n")
    assert read_chats(d) == [" Leo: a\nAssistant: b\n"]
    assert read_chats(d, strip=True) == ["Leo: a\nAssistant: b"]


def test_sample_qa_csv_and_build_equal_reference(tmp_path):
    import shutil

    raw = Path(__file__).resolve().parents[1] / "raw"
    for d in sorted((raw / "users").glob("user_*")):
        assert (d / "qa.csv").read_text(encoding="utf-8") == _ref_qa_csv(d), d.name
    users = tmp_path / "users"
    shutil.copytree(raw / "users", users)
    _ref_build(users, tmp_path / "ref", range(6, 126), range(126, 156), raw / "hard_subset.csv")
    build_dataset(users, tmp_path / "ours", hard_subset=raw / "hard_subset.csv", progress=False)
    for name in ("train.parquet", "validation.parquet", "test.parquet", "user_splits.csv"):
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name


# ------------------------------------------------------------------ generation (steps 1-4) as the reference

STAND_IN = Path(__file__).resolve().parent / "fixtures" / "reference_checkout"
GEN_PERSONA = "Ines repairs clocks in Porto.\nShe hides a second workshop.\n"  # ends with a newline


def _ref_numbered_list(text: str) -> str:
    """The reference's list rule and write: stripped, split on \\n, blanks out, one leading 'digits.'."""
    kept = [ln.strip() for ln in text.strip().split("\n") if ln.strip() != ""]
    return "\n".join(re.sub(r"^[0-9]+\.\s*", "", ln, count=1) for ln in kept)


GEN_CATEGORIES = (
    "Here you go:\n1. 2.5-hour commutes\n2) Paren item\n- Bullet item\n\n3.   Spaced  \n4.\n2.5-hour bare\n"
)
GEN_TOPICS = "1. First topic\r\n2. Second topic  \n\n3) Third topic\n"


def _stand_in_answer(prompt: str, nth: int) -> str:
    if prompt.startswith("STAND-IN categories"):
        return GEN_CATEGORIES
    if prompt.startswith("STAND-IN topics"):
        return GEN_TOPICS
    if prompt.startswith("STAND-IN chat"):
        topic = prompt.split("<<", 1)[1].split(">>", 1)[0]
        if topic == "First topic":
            return "  Leo: about the first\\nAssistant: a literal backslash-n  \n\n"
        if topic == "Second topic" and nth == 0:
            return "   \n"  # an empty reply: the one case the reference asks again
        return f"\nLeo: {topic}?\n\nAssistant: ok.\n"
    category = prompt.split("<<", 1)[1].split(">>", 1)[0]
    if category == "Paren item":
        return "<QUESTION> malformed, no letter\n<CHOICE_A> a\n"  # not asked again by default
    return (
        "Preamble.\n" + block(f"{category} one?", five("o"), "B") + block(f"{category} two?", five("t"), "c")
    )


def _gen_config(server, **kw):
    from pv4kit.llm.config import LLMConfig

    llm = LLMConfig(model="m", base_url=server.base_url, protocol="chat", max_retries=1, backoff_base=0.01)
    base = dict(llm=llm, chat_llm=llm, num_categories=4, num_topics=3, num_questions=2, max_retries=2)
    return {**base, **kw}


def _stand_in_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "stand_in_prompts", STAND_IN / "personalizationv4" / "prompts.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generation_writes_as_the_reference_with_reference_prompts(tmp_path):
    import hashlib
    import json

    from pv4kit.generation.steps import generate_user
    from tests.llm_server import FakeLLMServer, prompt_of

    persona = tmp_path / "user_3.txt"
    persona.write_text(GEN_PERSONA, encoding="utf-8")
    user = tmp_path / "users" / "user_3"
    with FakeLLMServer(lambda protocol, body, nth: _stand_in_answer(prompt_of(protocol, body), nth)) as srv:
        res = generate_user(
            persona, user, **_gen_config(srv, reference_prompts=STAND_IN), cache=None, progress=False
        )
        prompts_sent = [p for _, p, _ in srv.requests]
    assert res.status == "complete" and res.repairs == [] and res.notes == []
    categories = _ref_numbered_list(GEN_CATEGORIES)
    assert (user / "categories.txt").read_text(encoding="utf-8") == categories
    assert categories.split("\n")[1:3] == ["2.5-hour commutes", "2) Paren item"]
    assert categories.split("\n")[-1] == "5-hour bare"  # the reference's rule strips "2." off a bare item
    topics = _ref_numbered_list(GEN_TOPICS)
    assert (user / "chat_topics.txt").read_text(encoding="utf-8") == topics
    # the requests are the stand-in's prompts, persona and items passed exactly as read
    module = _stand_in_module()
    assert module.categories_prompt(GEN_PERSONA, 4) in prompts_sent
    for i, topic in enumerate(topics.split("\n")):
        assert module.chat_prompt(GEN_PERSONA, topic) in prompts_sent
        want = _stand_in_answer(module.chat_prompt(GEN_PERSONA, topic), 1).strip()
        assert (user / "chats" / f"{i}.txt").read_text(encoding="utf-8") == want
    for c, category in enumerate(categories.split("\n")):
        prompt = module.questions_prompt(GEN_PERSONA, category, 2)
        assert prompt in prompts_sent
        assert (user / "qa" / f"{c}.txt").read_text(encoding="utf-8") == _stand_in_answer(prompt, 0)
    n_lists, n_chats, n_qa = 2, len(topics.split("\n")), len(categories.split("\n"))
    assert len(prompts_sent) == n_lists + n_chats + n_qa + 1  # one re-ask: the empty chat reply
    assert (user / "qa.csv").read_text(encoding="utf-8") == _ref_qa_csv(user)
    assert set(res.malformed) >= {"categories.txt", "qa/2.txt", "chats/0.txt"}  # reported, kept as returned
    manifest = json.loads((user / "manifest.json").read_text(encoding="utf-8"))
    sha = hashlib.sha256((STAND_IN / "personalizationv4" / "prompts.py").read_bytes()).hexdigest()
    assert manifest["prompt_set"] == "reference" and manifest["prompts_sha256"] == sha
    for rel in ("categories.txt", "chats/0.txt", "qa/0.txt"):
        entry = manifest["files"][rel]
        assert (entry["prompt_set"], entry["prompts_sha256"], entry["repairs"]) == ("reference", sha, [])


def test_pv4kit_repairs_are_options_reported_and_recorded(tmp_path):
    import json

    from pv4kit.generation.steps import generate_user
    from tests.llm_server import FakeLLMServer, prompt_of

    persona = tmp_path / "user_3.txt"
    persona.write_text(GEN_PERSONA, encoding="utf-8")
    user = tmp_path / "users" / "user_3"
    opts = dict(reference_prompts=STAND_IN, repair_lists=True, repair_chats=True, reask_malformed=True)
    with FakeLLMServer(lambda protocol, body, nth: _stand_in_answer(prompt_of(protocol, body), nth)) as srv:
        res = generate_user(persona, user, **_gen_config(srv, **opts), cache=None, progress=False)
    cats = (user / "categories.txt").read_text(encoding="utf-8").split("\n")
    assert cats[:4] == ["Here you go:", "2.5-hour commutes", "Paren item", "Bullet item"]
    assert (user / "chats" / "0.txt").read_text(encoding="utf-8").split("\n") == [
        "Leo: about the first",
        "Assistant: a literal backslash-n",
    ]
    joined = " | ".join(res.repairs)
    assert "categories.txt: list repaired" in joined and "chats/0.txt: chat repaired" in joined
    assert "qa/2.txt: asked again after" in joined  # still malformed at the last attempt: kept, reported
    assert "qa/2.txt" in res.malformed
    files = json.loads((user / "manifest.json").read_text(encoding="utf-8"))["files"]
    assert files["categories.txt"]["repairs"] and files["chats/0.txt"]["repairs"]
    assert files["qa/2.txt"]["sample_index"] == 2  # asked again max_retries times


def test_existing_qa_csv_is_kept_unless_rewrite_stale_qa(tmp_path):
    from pv4kit.generation.steps import generate_user
    from tests.llm_server import FakeLLMServer, prompt_of

    persona = tmp_path / "user_3.txt"
    persona.write_text(GEN_PERSONA, encoding="utf-8")
    user = tmp_path / "users" / "user_3"
    cache = tmp_path / "c.sqlite"
    with FakeLLMServer(lambda protocol, body, nth: _stand_in_answer(prompt_of(protocol, body), nth)) as srv:
        cfg = _gen_config(srv, reference_prompts=STAND_IN)
        generate_user(persona, user, **cfg, cache=cache, progress=False)
        (user / "qa.csv").write_text("edited\n", encoding="utf-8")
        res = generate_user(persona, user, **cfg, cache=cache, progress=False)
        assert (user / "qa.csv").read_text(encoding="utf-8") == "edited\n"
        assert res.notes and "differs" in res.notes[0] and res.repairs == []
        res = generate_user(
            persona,
            user,
            **_gen_config(srv, reference_prompts=STAND_IN, rewrite_stale_qa=True),
            cache=cache,
            progress=False,
        )
        assert (user / "qa.csv").read_text(encoding="utf-8") == _ref_qa_csv(user)
        assert res.repairs == ["qa.csv: rewritten: it differed from what the question files give"]
        # pv4kit's own prompts make other requests: every file is stale, nothing is silently reused
        res = generate_user(persona, user, **_gen_config(srv), cache=cache, progress=False)
        assert res.status == "stale" and "qa/0.txt" in res.stale


def test_reference_prompts_errors_and_cli(tmp_path, capsys):
    from pv4kit.cli import main
    from pv4kit.generation.prompts import load_reference_prompts
    from tests.llm_server import FakeLLMServer, prompt_of

    with pytest.raises(FileNotFoundError, match="personalizationv4/prompts.py"):
        load_reference_prompts(tmp_path)
    bad = tmp_path / "prompts.py"
    bad.write_text("def categories_prompt(persona, n):\n    return ''\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no function topics_prompt\(\)"):
        load_reference_prompts(bad)
    ps = load_reference_prompts(STAND_IN / "personalizationv4")
    assert ps.messages("chats", "P", topic="T") == [{"role": "user", "content": "STAND-IN chat\n<<T>>\n[P]"}]

    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "user_3.txt").write_text(GEN_PERSONA, encoding="utf-8")
    with FakeLLMServer(lambda protocol, body, nth: _stand_in_answer(prompt_of(protocol, body), nth)) as srv:
        args = ["-q", "generate", "--persona-dir", str(personas), "--output-dir", str(tmp_path / "users")]
        args += ["--base-url", srv.base_url, "--model", "m", "--cache", "none", "--num-categories", "4"]
        args += ["--num-topics", "3", "--num-questions", "2"]
        assert main([*args, "--reference-prompts", str(tmp_path / "nowhere")]) == 1
        assert "no reference prompts found" in capsys.readouterr().err
        main([*args, "--reference-prompts", str(STAND_IN)])
        assert srv.requests and all(p.startswith("STAND-IN") for _, p, _ in srv.requests)
    assert (tmp_path / "users" / "user_3" / "qa.csv").is_file()


# --------------------------------------------------------------------------- step 6 edges (issue 24)
# Each case was run through the reference's own build_dataset.py (a5c2d6f, scratch copy) beside pv4kit's.


def _edge_tree(root: Path) -> Path:
    users = root / "users"
    for uid, n in ((6, 9), (126, 7)):
        d = users / f"user_{uid}"
        (d / "chats").mkdir(parents=True)
        (d / "qa.csv").write_text(_qa_rows(uid, n), encoding="utf-8")
        for i in range(3):
            (d / "chats" / f"{i}.txt").write_text(f"Leo: chat {i} of {uid}\nAssistant: ok", encoding="utf-8")
    return users


def _whitespace_answer(users, root):
    path = users / "user_126" / "qa.csv"
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    rows[1][3 + "ABCDE".index(rows[1][8])] = "   "  # the correct choice of question 0: whitespace only
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


def _long_row(line):
    def make(users, root):
        path = users / "user_126" / "qa.csv"
        lines = path.read_text(encoding="utf-8").split("\n")
        lines[line - 1] += ",an 11th field"
        path.write_text("\n".join(lines), encoding="utf-8")

    return make


def _hard_columns(header, rows):
    def make(users, root):
        (root / "hard.csv").write_text(header + "\n" + "".join(r + "\n" for r in rows), encoding="utf-8")
        return root / "hard.csv"

    return make


def _nul_in_question(users, root):
    path = users / "user_126" / "qa.csv"
    path.write_text(path.read_text(encoding="utf-8").replace("question 3", "question\x003"), encoding="utf-8")


@pytest.mark.parametrize(
    "edit",
    [
        _whitespace_answer,
        _hard_columns("user_id,question_index,note", ["126,0,x", "126,3,y"]),
        _hard_columns("question_index,user_id", ["0,126", "3,126"]),
        _nul_in_question,
    ],
    ids=["whitespace_answer", "hard_extra_column", "hard_reordered", "nul_in_question"],
)
def test_step6_edges_build_the_reference_bytes(tmp_path, edit):
    users = _edge_tree(tmp_path)
    hard = edit(users, tmp_path)
    _ref_build(users, tmp_path / "ref", range(6, 126), range(126, 156), hard)
    build_dataset(users, tmp_path / "ours", hard_subset=hard, progress=False)
    for name in ("train.parquet", "validation.parquet", "test.parquet", "user_splits.csv"):
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name


def test_whitespace_answer_is_built_but_refused_when_loaded(tmp_path):
    # the reference builds it; its scorer drops blank candidates, so the question is always wrong
    import pv4kit

    users = _edge_tree(tmp_path)
    _whitespace_answer(users, tmp_path)
    build_dataset(users, tmp_path / "data", progress=False)
    with pytest.raises(ValueError, match=r"user 126 question 0: answer '   ' is whitespace only"):
        pv4kit.load(tmp_path / "data")


def test_step6_bom_is_read_as_an_encoding_mark_where_the_reference_stops(tmp_path):
    # the reference's csv.DictReader keeps a BOM in the first header: KeyError 'index' (qa.csv) or
    # 'user_id' (hard_subset.csv), nothing built; pv4kit builds the bytes of the same files without it
    users = _edge_tree(tmp_path)
    hard = tmp_path / "hard.csv"
    hard.write_text("user_id,question_index\n126,2\n", encoding="utf-8")
    _ref_build(users, tmp_path / "ref", range(6, 126), range(126, 156), hard)
    for path in (users / "user_126" / "qa.csv", hard):
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    build_dataset(users, tmp_path / "ours", hard_subset=hard, progress=False)
    for name in ("train.parquet", "validation.parquet", "test.parquet", "user_splits.csv"):
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name


def _rename_user(name):
    def make(users, root):
        (users / "user_6").rename(users / name)

    return make


def _chat_named(name):
    def make(users, root):
        (users / "user_126" / "chats" / "1.txt").rename(users / "user_126" / "chats" / name)

    return make


def _nul_in_chat(users, root):
    (users / "user_6" / "chats" / "0.txt").write_bytes(b"Leo: a\x00b\nAssistant: ok")


@pytest.mark.parametrize(
    ("edit", "ranges", "message"),
    [
        # the reference reads user_007 and user_<Arabic-Indic 6> as user 6 (int() of any Unicode digits)
        (_rename_user("user_006"), {}, r"user_006.*no leading zeros.*found 'user_006'.*rename it user_6"),
        (_rename_user("user_\u0666"), {}, r"ASCII digits.*rename it user_6"),
        # the reference writes empty files (each split an empty table, user_splits.csv its header)
        (
            lambda u, r: None,
            {"train_users": (1, 5), "test_users": (200, 210)},
            r"no user falls in train users",
        ),
        # the reference reads +1.txt as chat 1; .1.txt stops it: ValueError invalid literal for int(): '.1'
        (_chat_named("+1.txt"), {}, r"chats/\+1\.txt: chat file names must be '<integer>.txt'"),
        (_chat_named(".1.txt"), {}, r"chats/\.1\.txt: chat file names must be '<integer>.txt'"),
        # the reference keeps a NUL byte in a chat as read_text gives it
        (_nul_in_chat, {}, r"chats/0\.txt:1: holds a NUL byte"),
        # the reference's csv.DictReader keeps an 11th field under the key None and builds
        (_long_row(3), {}, r"qa\.csv:3: not a readable CSV \(Expected 10 fields in line 3, saw 11\)"),
        (_long_row(2), {}, r"qa\.csv:2: not a readable CSV \(Expected 10 fields in line 2, saw 11\)"),
    ],
    ids=[
        "leading_zeros",
        "non_ascii_digits",
        "empty_ranges",
        "plus_chat",
        "dot_chat",
        "nul_in_chat",
        "long_row",
        "long_first_row",
    ],
)
def test_step6_edges_refused_with_the_file_and_what_to_do(tmp_path, edit, ranges, message):
    users = _edge_tree(tmp_path)
    edit(users, tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.parquet").write_bytes(b"previous")
    with pytest.raises(ValueError, match=message):
        build_dataset(users, tmp_path / "data", progress=False, **ranges)
    assert (tmp_path / "data" / "train.parquet").read_bytes() == b"previous"  # nothing replaced
    assert "qa.csv is missing" not in str(validate_raw(users)["message"].tolist())

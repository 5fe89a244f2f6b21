"""An ipywidgets browser of PV4: users, their persona and chats, questions, and what each run answered.

Everything is drawn as HTML widgets, so it works (and is testable) without a front end: set
``box.controls["user"].value`` or ``["question"].value`` and read ``["detail"].value``.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import pandas as pd

from pv4kit.schema import LETTERS

_BOX = "max-height:{h}px;overflow-y:auto;border:1px solid #ddd;padding:6px;font-size:13px"
# ipywidgets' HTML sets line-height to its row height (28px): every panel resets it and wraps long words
_TEXT = "line-height:1.45;font-size:13px;overflow-wrap:anywhere"
_GREEN, _ORANGE, _GREY = "#1b7a5a", "#c2540a", "#9aa5c4"


def _esc(text: Any) -> str:
    return html.escape("" if text is None or (isinstance(text, float) and np.isnan(text)) else str(text))


def _bar(row: pd.Series, letter: str, answer: str) -> str:
    """A run's similarity bar for ``letter``, its value and, on the run's prediction, a text mark."""
    value, best = _number(row.get(f"sim_{letter}")), row.get("predicted_letter") == letter
    width = max(0.0, min(1.0, float(value))) * 80 if np.isfinite(value) else 0
    color = _GREEN if best and letter == answer else (_ORANGE if best else _GREY)
    text = f"{value:.3f}" if np.isfinite(value) else "n/a"
    mark = f" <b class='pv4-pick' style='color:{color}'>&#9664; pick</b>" if best else ""
    return (
        f"<span style='display:inline-block;width:{width:.0f}px;height:10px;background:{color};"
        f"vertical-align:middle'></span> <span class='pv4-sim'>{text}</span>{mark}"
    )


def _number(value: Any) -> float:
    """``value`` as a float, NaN when it is missing."""
    return float("nan") if value is None or pd.isna(value) else float(value)


def _short(text: Any, limit: int = 100) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def user_html(data: Any, user_id: int) -> str:
    """Persona and chats of one user as HTML."""
    persona = data.persona(user_id)
    chats = data.documents(user_id)
    items = "".join(
        f"<li><b>chat {i}</b>: {_esc(c).replace(chr(10), '<br>')}</li>" for i, c in enumerate(chats)
    )
    return (
        f"<div style='{_TEXT}'><h4>User {user_id}</h4>"
        f"<details><summary>Persona</summary><div style='{_BOX.format(h=220)}'>"
        f"{_esc(persona or '(no persona in this source)').replace(chr(10), '<br>')}</div></details>"
        f"<details open><summary>{len(chats)} chats</summary><div style='{_BOX.format(h=260)}'>"
        f"<ol start='0'>{items}</ol></div></details></div>"
    )


def _retrieved_html(run: str, ids: list[Any], scores: Any, docs: list[str]) -> str:
    """The chats a retrieval run used for one question (with their scores), as a folded list."""
    items = []
    for k, doc_id in enumerate(ids):
        scored = scores is not None and not isinstance(scores, float) and k < len(scores)
        score = f" (score {float(scores[k]):.3f})" if scored else ""
        text = docs[int(doc_id)] if 0 <= int(doc_id) < len(docs) else "(no such chat)"
        items.append(f"<li><b>chat {int(doc_id)}</b>{score}: {_esc(text)}</li>")
    return (
        f"<details><summary>{len(items)} chats retrieved by {_esc(run)}</summary>"
        f"<div style='{_BOX.format(h=220)}'><ul>{''.join(items)}</ul></div></details>"
    )


def question_html(data: Any, question: pd.Series, runs: dict[str, pd.DataFrame]) -> str:
    """One question: candidates with per-run similarity bars, generations and retrieved chats, as HTML."""
    uid, qi = int(question["user_id"]), int(question["question_index"])
    answer = str(question["answer_letter"])
    header = (
        f"<h4>User {uid}, question {qi} ({_esc(question.get('split'))}"
        f"{', hard' if bool(question.get('hard')) else ''})</h4>"
        f"<p><i>{_esc(question.get('category_name'))}</i></p><p><b>{_esc(question['question'])}</b></p>"
    )
    hits = {name: p[(p["user_id"] == uid) & (p["question_index"] == qi)] for name, p in runs.items()}
    rows_by_run = {name: hit.iloc[0] for name, hit in hits.items() if len(hit)}  # runs covering it
    head = "".join(
        f"<th style='text-align:left;white-space:nowrap' data-run='{_esc(n)}'>{_esc(n)}</th>"
        for n in rows_by_run
    )
    body = []
    for letter, choice in zip(LETTERS, question["choices"], strict=False):
        mark = " &#10003;" if letter == answer else ""
        cells = [
            f"<td style='white-space:nowrap;padding-right:10px' data-run='{_esc(name)}'>"
            f"{_bar(row, letter, answer)}</td>"
            for name, row in rows_by_run.items()
        ]
        style = "font-weight:bold" if letter == answer else ""
        body.append(
            f"<tr data-letter='{letter}'><td style='{style};white-space:nowrap;vertical-align:top'>"
            f"{letter}{mark}</td>"
            f"<td class='pv4-candidate' style='{style};min-width:14em;padding-right:10px'>{_esc(choice)}</td>"
            f"{''.join(cells)}</tr>"
        )
    table = (
        "<table class='pv4-candidates' style='border-collapse:collapse'>"
        f"<tr><th></th><th style='text-align:left'>candidate</th>{head}</tr>{''.join(body)}</table>"
    )
    legend = (
        "<p style='font-size:12px;color:#444'>&#10003; the reference answer. Each run column: cosine "
        "similarity of the run's answer to the candidate; &#9664; pick marks the run's prediction "
        f"(<span style='color:{_GREEN}'>green</span> right, <span style='color:{_ORANGE}'>orange</span> "
        "wrong).</p>"
        if rows_by_run
        else ""
    )
    parts = [header, table, legend]
    if pd.notna(question.get("rationale")):
        parts.append(f"<details><summary>Rationale</summary><p>{_esc(question['rationale'])}</p></details>")
    for name, row in rows_by_run.items():
        verdict = "correct" if bool(row.get("correct")) else "wrong"
        margin = _number(row.get("margin"))
        margin_txt = f", margin {margin:.3f}" if np.isfinite(margin) else ""
        parts.append(
            f"<p class='pv4-verdict' data-run='{_esc(name)}'><b>{_esc(name)}</b>: predicted "
            f"{_esc(row.get('predicted_letter'))} ({verdict}{margin_txt})"
            f"<br><span style='color:#444'>{_esc(row.get('generation'))}</span></p>"
        )
        ids = row.get("retrieved_ids")
        if ids is not None and not (isinstance(ids, float) and np.isnan(ids)) and len(ids):
            parts.append(_retrieved_html(name, list(ids), row.get("retrieved_scores"), data.documents(uid)))
    if not rows_by_run:
        parts.append("<p><i>No scored run covers this question.</i></p>")
    return f"<div style='{_TEXT}'>{''.join(parts)}</div>"


def browser(data: Any, runs: dict[str, pd.DataFrame] | None = None, *, user_id: int | None = None) -> Any:
    """Build the PV4 explorer.

    Args:
        data: A :class:`~pv4kit.dataset.load.PV4Data`.
        runs: ``{run name: predictions}`` (e.g. :func:`pv4kit.analysis.notebooks.load_scored_runs`); may be
            empty.
        user_id: User selected at start (default: the first).

    Returns an ``ipywidgets.VBox``; ``box.controls`` maps ``user``, ``question``, ``question_label``,
    ``only_wrong``, ``user_info`` and ``detail`` to the widgets.
    """
    import ipywidgets as w

    runs = dict(runs or {})
    users = [int(u) for u in data.users["user_id"]]
    if not users:
        raise ValueError("data: no users to browse")
    if user_id is not None and int(user_id) not in users:
        raise ValueError(f"user_id: {user_id} is not in the data; users: {users}")
    # (user_id, question_index) of every question some run got wrong
    bad = [p.loc[~p["correct"].astype(bool), ["user_id", "question_index"]] for p in runs.values()]
    wrong = {key for frame in bad for key in zip(frame["user_id"], frame["question_index"], strict=True)}
    q, first = data.questions, users[0] if user_id is None else int(user_id)
    c = {
        "user": w.Dropdown(options=[(f"user {u}", u) for u in users], value=first, description="User"),
        "question": w.Select(options=[], rows=10, layout=w.Layout(width="auto")),
        "question_label": w.HTML(),
        "only_wrong": w.Checkbox(value=False, description="only questions some run got wrong", indent=False),
        "user_info": w.HTML(),
        "detail": w.HTML(),
    }
    updating = []  # non-empty while the question list is replaced: one detail render per change

    def show_question(change: Any = None) -> None:
        if updating:
            return
        uid, qi = c["user"].value, c["question"].value
        if qi is None:
            c["detail"].value = "<p><i>No question selected.</i></p>"
            return
        row = q[(q["user_id"] == uid) & (q["question_index"] == qi)].iloc[0]
        c["detail"].value = question_html(data, row, runs)

    def show_questions(change: Any = None) -> None:
        uid, only_wrong = c["user"].value, c["only_wrong"].value
        sub = q[q["user_id"] == uid].sort_values("question_index")
        n_all = len(sub)
        if only_wrong:
            sub = sub[[(uid, int(i)) in wrong for i in sub["question_index"]]]
        opts = [
            (f"{int(r.question_index):>3} [{r.split}] {_short(r.question)}", int(r.question_index))
            for r in sub.itertuples(index=False)
        ]
        updating.append(True)
        try:
            c["question"].options = opts
            c["question"].value = opts[0][1] if opts else None
        finally:
            updating.clear()
        shown = f"{len(opts)} of {n_all}, only those some run got wrong" if only_wrong else f"{n_all}"
        # set after the options: a front end showing this label already has the new list
        c["question_label"].value = f"<b>Questions</b> of user {uid} ({shown})"
        show_question()

    def show_user(change: Any = None) -> None:
        c["user_info"].value = user_html(data, c["user"].value)
        show_questions()

    c["user"].observe(show_user, names="value")
    c["only_wrong"].observe(show_questions, names="value")
    c["question"].observe(show_question, names="value")
    show_user()
    runs_txt = ", ".join(runs) if runs else "none scored yet (run `pv4kit demo` or `pv4kit score`)"
    header = f"<b>PV4 browser</b>: {len(users)} users, {len(q)} questions; runs: {_esc(runs_txt)}"
    # min_width 0: the columns may shrink below their content, so nothing overflows the output
    left = w.VBox([c["user_info"]], layout=w.Layout(flex="2 1 0%", min_width="0"))
    right = w.VBox(
        [c["question_label"], c["question"], c["detail"]], layout=w.Layout(flex="3 1 0%", min_width="0")
    )
    panels = w.HBox([left, right], layout=w.Layout(width="100%"))
    row = w.HBox([c["user"], c["only_wrong"]], layout=w.Layout(flex_flow="row wrap", align_items="center"))
    box = w.VBox([w.HTML(header), row, panels], layout=w.Layout(width="100%"))
    box.controls = c
    return box

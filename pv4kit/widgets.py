"""An ipywidgets browser of PV4: users, their persona and chats, questions, and what each run answered.

:func:`browser` returns an ``ipywidgets.VBox``. Pick a user to see the persona, the chats and the list of
questions; pick a question to see its five candidates (the reference marked) with one similarity bar per
scored run, each run's generation and prediction, and the chats a retrieval run used. Everything is drawn
as HTML widgets, so the browser works (and is testable) without a front end: set
``box.controls["user"].value`` or ``box.controls["question"].value`` and read
``box.controls["detail"].value``.
"""

from __future__ import annotations

import html
import logging
from typing import Any

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

LETTERS = "ABCDE"
_BOX = "max-height:{h}px;overflow-y:auto;border:1px solid #ddd;padding:6px;font-size:13px"


def _esc(text: Any) -> str:
    return html.escape("" if text is None or (isinstance(text, float) and np.isnan(text)) else str(text))


def _bar(value: float, *, best: bool, correct: bool) -> str:
    width = max(0.0, min(1.0, float(value))) * 160 if np.isfinite(value) else 0
    color = "#1b9e77" if best and correct else ("#d95f02" if best else "#9aa5c4")
    return (
        f"<span style='display:inline-block;width:{width:.0f}px;height:10px;background:{color};"
        f"vertical-align:middle'></span> <span style='font-size:11px'>{value:.3f}</span>"
    )


def user_html(data: Any, user_id: int, *, max_chats: int | None = None) -> str:
    """Persona and chats of one user as HTML."""
    persona = data.persona(user_id)
    chats = data.documents(user_id)
    shown = chats if max_chats is None else chats[:max_chats]
    items = "".join(
        f"<li><b>chat {i}</b>: {_esc(c).replace(chr(10), '<br>')}</li>" for i, c in enumerate(shown)
    )
    more = f"<p>... {len(chats) - len(shown)} more</p>" if len(shown) < len(chats) else ""
    return (
        f"<h4>User {user_id}</h4>"
        f"<details><summary>Persona</summary><div style='{_BOX.format(h=220)}'>"
        f"{_esc(persona or '(no persona in this source)').replace(chr(10), '<br>')}</div></details>"
        f"<details open><summary>{len(chats)} chats</summary><div style='{_BOX.format(h=260)}'>"
        f"<ol start='0'>{items}</ol>{more}</div></details>"
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
    rows_by_run = {}
    for name, preds in runs.items():
        hit = preds[(preds["user_id"] == uid) & (preds["question_index"] == qi)]
        if len(hit):
            rows_by_run[name] = hit.iloc[0]
    head = "".join(f"<th style='text-align:left'>{_esc(n)}</th>" for n in rows_by_run)
    body = []
    for j, choice in enumerate(question["choices"]):
        letter = LETTERS[j]
        mark = " &#10003;" if letter == answer else ""
        cells = []
        for row in rows_by_run.values():
            sim = row.get(f"sim_{letter}", np.nan)
            sim = float(sim) if sim is not None and not pd.isna(sim) else float("nan")
            best = row.get("predicted_letter") == letter
            cells.append(f"<td>{_bar(sim, best=best, correct=letter == answer)}</td>")
        style = "font-weight:bold" if letter == answer else ""
        body.append(
            f"<tr><td style='{style}'>{letter}{mark}</td>"
            f"<td style='{style};max-width:420px'>{_esc(choice)}</td>{''.join(cells)}</tr>"
        )
    table = (
        f"<table><tr><th></th><th style='text-align:left'>candidate</th>{head}</tr>{''.join(body)}</table>"
    )
    parts = [header, table]
    if question.get("rationale") is not None and not pd.isna(question.get("rationale")):
        parts.append(f"<details><summary>Rationale</summary><p>{_esc(question['rationale'])}</p></details>")
    docs = None
    for name, row in rows_by_run.items():
        verdict = "correct" if bool(row.get("correct")) else "wrong"
        margin = row.get("margin")
        margin_txt = f", margin {float(margin):.3f}" if margin is not None and not pd.isna(margin) else ""
        parts.append(
            f"<p><b>{_esc(name)}</b>: predicted {_esc(row.get('predicted_letter'))} ({verdict}{margin_txt})"
            f"<br><span style='color:#444'>{_esc(row.get('generation'))}</span></p>"
        )
        ids = row.get("retrieved_ids")
        if ids is not None and not (isinstance(ids, float) and np.isnan(ids)) and len(ids):
            docs = docs if docs is not None else data.documents(uid)
            scores = row.get("retrieved_scores")
            items = []
            for k, doc_id in enumerate(list(ids)):
                score = ""
                if scores is not None and not (isinstance(scores, float)) and k < len(scores):
                    score = f" (score {float(scores[k]):.3f})"
                text = docs[int(doc_id)] if 0 <= int(doc_id) < len(docs) else "(no such chat)"
                items.append(f"<li><b>chat {int(doc_id)}</b>{score}: {_esc(text)}</li>")
            parts.append(
                f"<details><summary>{len(items)} chats retrieved by {_esc(name)}</summary>"
                f"<div style='{_BOX.format(h=220)}'><ul>{''.join(items)}</ul></div></details>"
            )
    if not rows_by_run:
        parts.append("<p><i>No scored run covers this question.</i></p>")
    return "".join(parts)


def browser(data: Any, runs: dict[str, pd.DataFrame] | None = None, *, user_id: int | None = None) -> Any:
    """Build the PV4 explorer.

    Args:
        data: A :class:`~pv4kit.data.PV4Data`.
        runs: ``{run name: predictions}`` (e.g. :func:`pv4kit.notebooks.load_scored_runs`); may be empty.
        user_id: User selected at start (default: the first).

    Returns:
        An ``ipywidgets.VBox``; ``box.controls`` maps ``user``, ``question``, ``only_wrong``, ``user_info``
        and ``detail`` to the widgets.
    """
    try:
        import ipywidgets as w
    except ImportError:  # pragma: no cover - a declared dependency
        raise ImportError("the browser needs ipywidgets: pip install ipywidgets") from None
    runs = dict(runs or {})
    users = [int(u) for u in data.users["user_id"]]
    if not users:
        raise ValueError("data: no users to browse")
    if user_id is not None and int(user_id) not in users:
        raise ValueError(f"user_id: {user_id} is not in the data; users: {users}")
    questions = data.questions
    wrong_keys = set()
    for preds in runs.values():
        bad = preds[~preds["correct"].astype(bool)]
        wrong_keys |= set(zip(bad["user_id"], bad["question_index"], strict=True))

    user_dd = w.Dropdown(
        options=[(f"user {u}", u) for u in users], value=user_id or users[0], description="User"
    )
    only_wrong = w.Checkbox(value=False, description="only questions some run got wrong", indent=False)
    q_select = w.Select(options=[], rows=10, layout=w.Layout(width="100%"))
    user_info = w.HTML()
    detail = w.HTML()

    def options_for(uid: int) -> list[tuple[str, int]]:
        sub = questions[questions["user_id"] == uid].sort_values("question_index")
        if only_wrong.value:
            sub = sub[[(uid, int(q)) in wrong_keys for q in sub["question_index"]]]
        return [
            (f"{int(r.question_index):>3} [{r.split}] {str(r.question)[:110]}", int(r.question_index))
            for r in sub.itertuples(index=False)
        ]

    def show_question(change: Any = None) -> None:
        uid, qi = user_dd.value, q_select.value
        if qi is None:
            detail.value = "<p><i>No question selected.</i></p>"
            return
        row = questions[(questions["user_id"] == uid) & (questions["question_index"] == qi)].iloc[0]
        detail.value = question_html(data, row, runs)

    def show_user(change: Any = None) -> None:
        uid = user_dd.value
        user_info.value = user_html(data, uid)
        opts = options_for(uid)
        q_select.options = opts
        q_select.value = opts[0][1] if opts else None
        show_question()

    user_dd.observe(show_user, names="value")
    only_wrong.observe(show_user, names="value")
    q_select.observe(show_question, names="value")
    show_user()
    runs_txt = ", ".join(runs) if runs else "none scored yet (run `pv4kit demo` or `pv4kit score`)"
    box = w.VBox(
        [
            w.HTML(
                f"<b>PV4 browser</b>: {len(users)} users, {len(questions)} questions; runs: {_esc(runs_txt)}"
            ),
            w.HBox([user_dd, only_wrong]),
            w.HBox(
                [
                    w.VBox([user_info], layout=w.Layout(width="40%")),
                    w.VBox([q_select, detail], layout=w.Layout(width="60%")),
                ]
            ),
        ]
    )
    box.controls = {
        "user": user_dd,
        "question": q_select,
        "only_wrong": only_wrong,
        "user_info": user_info,
        "detail": detail,
    }
    return box

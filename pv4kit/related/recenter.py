"""Re-Centering Humans in LLM Personalization (leczhang/recenter-personalization): loaders and metrics.

Record shapes follow the data card and the authors' annotation tool (``docs/related.md``); a record of
another shape raises naming file and line. Stage 1: attribute acceptance; stage 2: relevance (human
majority vs LLMs, coarse filter, embedding, BM25); stage 3: generic vs personalised response ratings (1 =
prefer generic .. 5 = prefer personalised).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pv4kit._io import iter_jsonl
from pv4kit._options import check_number
from pv4kit.baselines.bm25 import bm25_scores
from pv4kit.related._common import check_choice, encode, resolve_source
from pv4kit.related.agreement import fleiss_kappa, krippendorff_alpha, pairwise_cohen
from pv4kit.schema import require_columns
from pv4kit.text import tokenize

logger = logging.getLogger(__name__)

HUB_ID = "leczhang/recenter-personalization"
_KEY = ["item_index", "attribute"]  # an (item, attribute) pair
_INDEX_KEYS = ("item_index", "index", "sample_index")
# what -> (index field, the field holding the record's entries, their shape) of the records _entries reads
_SHAPES = {
    "stage-1 item": ("item_index", "merged_attributes", "[{attribute, confidence, ground_truth, ...}]"),
    "stage-1 annotation": ("index", "attr_judgments", "[{judgment, note}]"),
    "stage-2 item": ("item_index", "profile_attributes", "[{attribute, ...}]"),
    "stage-2 annotation": ("index", "relevance_judgments", "[{attribute, relevant | rating}]"),
    "stage-2 LLM judgment": ("sample_index", "items", "[{attribute, relevant, raw_answer, full_output}]"),
    "stage-3 item": ("item_index", "attributes", "[{attribute, is_relevant}]"),
    "stage-3 rating": ("index | item_index | sample_index", "ratings", "{attribute: 1-5 | null}"),
}

# ------------------------------------------------------------------------------------ reading records


def _stage_dir(source: str | os.PathLike[str], stage: str) -> Path:
    root = resolve_source(source, repo_id=HUB_ID)
    folder = root / stage if (root / stage).is_dir() else root
    if not (folder / "items.jsonl").is_file():
        raise FileNotFoundError(f"{root}: {stage}/items.jsonl not found")
    return folder


def _shape_error(path: Path, line: int, what: str, expected: str, rec: dict[str, Any]) -> ValueError:
    return ValueError(f"{path}:{line}: not a {what} record: expected {expected}; found fields {sorted(rec)}")


def _entries(paths: Iterable[Path], what: str) -> Iterator[tuple[Path, int, dict[str, Any], int, Any, Any]]:
    """``(path, line, record, item index, position or key, entry)`` per entry of each ``what`` record.

    A record without an index or entries raises; so does a second record for an item in one file, after its
    entries (so that their own errors come first).
    """
    index_field, field, shape = _SHAPES[what]
    kind = dict if shape.startswith("{") else list
    for path in paths:
        first: dict[int, int] = {}
        for line, rec in iter_jsonl(path):
            key = next((k for k in _INDEX_KEYS if rec.get(k) is not None), None)
            if key is None or not isinstance(rec.get(field), kind):
                raise _shape_error(path, line, what, f"{{{index_field}, {field}: {shape}, ...}}", rec)
            try:
                index = int(rec[key])
            except (TypeError, ValueError):
                raise ValueError(f"{path}:{line}: {key} {rec[key]!r} is not an integer") from None
            for j, entry in rec[field].items() if kind is dict else enumerate(rec[field]):
                yield path, line, rec, index, j, entry
            if index in first:
                raise ValueError(
                    f"{path}:{line}: a second {what} record for item {index} (the first is line "
                    f"{first[index]}); expected one record per item in a file: remove or merge one of them"
                )
            first[index] = line


def _files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.jsonl"))


def _entry(value: Any, where: str, expected: str, *keys: str) -> dict[str, Any]:
    """``value`` if it is a dict with an ``attribute`` text (and one of ``keys``); else raise at ``where``."""
    if isinstance(value, dict) and isinstance(value.get("attribute"), str):
        if not keys or any(k in value for k in keys):
            return value
    if isinstance(value, dict) and "attribute" in value and not isinstance(value["attribute"], str):
        raise ValueError(f"{where}: attribute must be text, found {value['attribute']!r}")
    found = sorted(value) if isinstance(value, dict) else type(value).__name__
    raise ValueError(f"{where}: expected {expected}, found {found}")


def _attr_text(value: Any, where: str) -> str:
    return value if isinstance(value, str) else _entry(value, where, "{attribute, ...}")["attribute"]


def _float_or_none(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, bool) and isinstance(value, int | float | str):
        with contextlib.suppress(ValueError):
            return float(value)
    raise ValueError(f"{where}: expected a number, found {value!r}")


def _coverage(items: pd.DataFrame, ratings: pd.DataFrame, value: str) -> pd.DataFrame:
    """How many of the items' (item, attribute) pairs each rater, and each family (``<kind> (any)``), rated.

    ``ratings``: :func:`_by_rater`'s, NA in ``value`` for a missing label. ``n_orphan`` counts the pairs a
    rater judged that are no pair of the items.
    """
    pairs = pd.MultiIndex.from_frame(items[_KEY]).unique()
    known = pd.MultiIndex.from_frame(ratings[_KEY]).isin(pairs)
    frame = ratings.assign(labelled=ratings[value].notna(), known=known)
    rows = []
    for kind, family in frame.groupby("kind"):
        for rater, part in [*family.groupby("rater"), (f"{kind} (any)", family)]:
            rated = part[part["labelled"]]
            n_rated = len(rated[rated["known"]].drop_duplicates(_KEY))
            n_orphan = len(rated[~rated["known"]].drop_duplicates(["rater", *_KEY]))
            rows.append((kind, rater, n_rated, int((~part["labelled"]).sum()), n_orphan))
    out = pd.DataFrame(rows, columns=["kind", "rater", "n_rated", "n_missing_label", "n_orphan"])
    out.insert(2, "n_pairs", len(pairs))
    out.insert(4, "n_unrated", len(pairs) - out["n_rated"])
    return out


def _by_rater(human: pd.DataFrame, llm: pd.DataFrame) -> pd.DataFrame:
    """The annotations, then the LLM judgments, with ``rater`` and ``kind`` (human | llm)."""
    human = human.rename(columns={"annotator": "rater"}).assign(kind="human")
    return pd.concat([human, llm.rename(columns={"model": "rater"}).assign(kind="llm")], ignore_index=True)


def _multi_rater(wide: pd.DataFrame, labels: list[Any] | None) -> list[tuple[str, float, int]]:
    """``(statistic, value, n)`` of Fleiss' kappa (items all rated) and Krippendorff's alpha (rated twice)."""
    return [
        ("fleiss_kappa", fleiss_kappa(wide, labels=labels), len(wide.dropna())),
        ("krippendorff_alpha", krippendorff_alpha(wide), int((wide.notna().sum(axis=1) >= 2).sum())),
    ]


# -------------------------------------------------------------------------------------------- stage 1

STAGE1_LABELS = ("bad", "unsure", "ok")  # ordered, for the weighted kappa


@dataclass
class Stage1Data:
    """Stage 1: ``items`` (one row per attribute) and ``annotations`` (one row per annotator x attribute)."""

    items: pd.DataFrame
    annotations: pd.DataFrame


def load_stage1(source: str | os.PathLike[str] = HUB_ID) -> Stage1Data:
    """Load ``stage1/items.jsonl`` and ``stage1/annotations/*.jsonl`` from the release folder or hub id.

    Returns ``items``: ``item_index, user_id, source, attr_index, attribute, confidence, ground_truth``;
    ``annotations``: ``annotator, item_index, attr_index, judgment`` (``ok``/``unsure``/``bad``).

    Args:
        source: Release folder or hub id.
    """
    folder = _stage_dir(source, "stage1")
    rows = []
    for path, line, rec, index, j, attr in _entries([folder / "items.jsonl"], "stage-1 item"):
        where, fields = f"{path}:{line}: merged_attributes[{j}]", attr if isinstance(attr, dict) else {}
        confidence = _float_or_none(fields.get("confidence"), f"{where}.confidence")
        source_name = rec.get("source", rec.get("dataset"))
        row = (index, rec.get("user_id"), source_name, j, _attr_text(attr, where), confidence)
        rows.append((*row, fields.get("ground_truth")))
    columns = "item_index user_id source attr_index attribute confidence ground_truth".split()
    items = pd.DataFrame(rows, columns=columns).astype({"confidence": float})
    n_attrs = items.groupby("item_index").size().to_dict()
    ann = []
    for path, line, rec, index, j, judg in _entries(_files(folder / "annotations"), "stage-1 annotation"):
        if j == 0 and len(rec["attr_judgments"]) > n_attrs.get(index, np.inf):
            raise ValueError(
                f"{path}:{line}: {len(rec['attr_judgments'])} judgments for item {index} with "
                f"{n_attrs[index]} attributes"
            )
        value = judg.get("judgment") if isinstance(judg, dict) else judg
        if value not in (None, "", *STAGE1_LABELS):
            raise ValueError(f"{path}:{line}: judgment {value!r} not in {list(STAGE1_LABELS)}")
        if value not in (None, ""):
            ann.append((path.stem, index, j, value))
    return Stage1Data(items, pd.DataFrame(ann, columns=["annotator", "item_index", "attr_index", "judgment"]))


def stage1_acceptance(data: Stage1Data) -> pd.DataFrame:
    """Per attribute: judgment counts and acceptance (strictly more than half of its judges said ``ok``).

    Returns ``item_index, user_id, source, attr_index, attribute, n_ratings, n_ok, n_unsure, n_bad, accepted,
    ground_truth, matches_release`` (``accepted`` equals the release's label).
    """
    key = ["item_index", "attr_index"]
    counts = data.annotations.pivot_table(index=key, columns="judgment", values="annotator", aggfunc="count")
    counts = counts.reindex(columns=list(STAGE1_LABELS)).fillna(0).add_prefix("n_")
    out = data.items.merge(counts.reset_index(), on=key, how="left")
    columns = ["n_ok", "n_unsure", "n_bad"]
    out[columns] = out[columns].fillna(0).astype(int)
    out["n_ratings"] = out[columns].sum(axis=1)
    out["accepted"] = 2 * out["n_ok"] > out["n_ratings"]
    gt = pd.to_numeric(out["ground_truth"], errors="coerce")
    out["matches_release"] = (gt == out["accepted"].astype(int)).where(gt.notna())
    columns = "item_index user_id source attr_index attribute n_ratings n_ok n_unsure n_bad accepted"
    return out[[*columns.split(), "ground_truth", "matches_release"]]


def stage1_agreement(data: Stage1Data) -> pd.DataFrame:
    """Annotator agreement on stage 1, 3-way (ok/unsure/bad) and binary (ok vs not).

    Fleiss' kappa, Krippendorff's alpha, pairwise Cohen's kappa (linear-weighted too on the 3-way scale) and
    its mean. Returns ``metric, scale, raters, n_items, value``.
    """
    wide = data.annotations.pivot(index=["item_index", "attr_index"], columns="annotator", values="judgment")
    binary = wide.map(lambda v: v if pd.isna(v) else v == "ok")
    rows = []
    for table, scale, labels, weightings in (
        (wide, "ok/unsure/bad", list(STAGE1_LABELS), [None, "linear"]),
        (binary, "ok vs not", [False, True], [None]),
    ):
        rows += [(stat, scale, "all", n, value) for stat, value, n in _multi_rater(table, labels)]
        for weights in weightings:
            pair = pairwise_cohen(table, weights=weights, labels=labels)
            name = "cohen_kappa" if weights is None else "cohen_kappa_linear"
            rows += [(name, scale, f"{r.rater_a}-{r.rater_b}", r.n, r.kappa) for r in pair.itertuples()]
            rows.append((f"mean_{name}", scale, "pairs", len(table.dropna()), float(pair["kappa"].mean())))
    return pd.DataFrame(rows, columns=["metric", "scale", "raters", "n_items", "value"])


def acceptance_by_source(acceptance: pd.DataFrame) -> pd.DataFrame:
    """``source, n, accepted``: attributes and the share accepted per source (NA kept as a group)."""
    grouped = acceptance.groupby("source", dropna=False)
    return grouped.agg(n=("accepted", "size"), accepted=("accepted", "mean")).reset_index()


# -------------------------------------------------------------------------------------------- stage 2

# relevance labels -> binary, as the authors' convert_task2_to_task3.py binarises the task-2 ratings
RELEVANCE_LABELS: dict[str, bool] = {
    **dict.fromkeys("necessary_explicit necessary_implicit optional yes true relevant".split(), True),
    **dict.fromkeys("unnecessary forbidden no false not_relevant irrelevant".split(), False),
}
MISSING_LABELS = ("none", "")  # the tool's "not rated yet"


@dataclass
class Stage2Data(Stage1Data):
    """Stage 2 frames (see :func:`load_stage2`)."""

    judgments: pd.DataFrame
    coverage: pd.DataFrame


def relevance_label(value: Any, *, where: str = "") -> bool | None:
    """A human or LLM relevance label as binary (``None`` for a missing one).

    ``necessary_explicit``, ``necessary_implicit`` and ``optional`` are relevant; ``unnecessary`` and
    ``forbidden`` are not; ``none``, ``""``, null and NaN are missing; booleans, 0/1 and ``yes``/``no`` are
    taken as they are. Anything else raises ``ValueError`` naming ``where``.
    """
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, bool | np.bool_ | int | float):
        if value in (0, 1):
            return bool(value)
        raise ValueError(f"{where}: relevance {value!r} is neither 0 nor 1")
    key = str(value).strip().lower().replace("-", "_").replace(" ", "_")
    if key in MISSING_LABELS:
        return None
    if key not in RELEVANCE_LABELS:
        raise ValueError(f"{where}: unknown relevance label {value!r}; known: {sorted(RELEVANCE_LABELS)}")
    return RELEVANCE_LABELS[key]


def _judgment_label(judg: Any, where: str) -> tuple[str, Any, bool | None]:
    """``(attribute, label as written, binary)`` of a human judgment (``rating`` and ``relevant`` agree)."""
    judg = _entry(judg, where, "a judgment {attribute, relevant | rating}", "rating", "relevant")
    label = {k: judg.get(k) for k in ("rating", "relevant")}
    binary = {k: relevance_label(v, where=f"{where}: {k}") for k, v in label.items()}
    if None not in binary.values() and binary["rating"] != binary["relevant"]:
        raise ValueError(
            f"{where}: judgment of {judg['attribute']!r}: rating {label['rating']!r} and relevant "
            f"{label['relevant']!r} disagree"
        )
    use = "relevant" if binary["rating"] is None else "rating"
    return judg["attribute"], label[use], binary[use]


def load_stage2(source: str | os.PathLike[str] = HUB_ID) -> Stage2Data:
    """Load ``stage2/items.jsonl``, ``annotations/*.jsonl`` and ``llm_judgments/*.jsonl``.

    Returns ``items``: ``item_index, prompt_index, prompt_text, user_id, attribute, ground_truth,
    coarse_filter``; ``annotations``: ``annotator, item_index, attribute, label, relevant`` (missing labels
    left out); ``judgments``: ``model, model_name, item_index, attribute, relevant`` (NA: unparsed),
    ``raw_answer``; ``coverage``: per rater and ``human (any)``/``llm (any)`` (see ``_coverage``).

    Args:
        source: Release folder or hub id.
    """
    folder = _stage_dir(source, "stage2")
    rows = []
    for path, line, rec, index, j, attr in _entries([folder / "items.jsonl"], "stage-2 item"):
        proposed = {_attr_text(a, f"{path}:{line}: items[]") for a in rec.get("items") or []}
        text = _attr_text(attr, f"{path}:{line}: profile_attributes[{j}]")
        truth = attr.get("ground_truth") if isinstance(attr, dict) else None
        fields = [rec.get(k) for k in ("prompt_index", "prompt_text", "user_id")]
        rows.append([index, *fields, text, truth, text in proposed])
    columns = "item_index prompt_index prompt_text user_id attribute ground_truth coarse_filter"
    items = pd.DataFrame(rows, columns=columns.split())
    ann = []
    for path, line, _, index, _, judg in _entries(_files(folder / "annotations"), "stage-2 annotation"):
        ann.append((path.stem, index, *_judgment_label(judg, f"{path}:{line}")))
    ann = pd.DataFrame(ann, columns=["annotator", "item_index", "attribute", "label", "relevant"])
    jud = []
    for path, line, rec, index, _, judg in _entries(_files(folder / "llm_judgments"), "stage-2 LLM judgment"):
        expected = "an LLM judgment {attribute, relevant, raw_answer}"
        judg = _entry(judg, f"{path}:{line}", expected, "relevant")
        relevant = relevance_label(judg.get("relevant"), where=f"{path}:{line}")
        jud.append((path.stem, rec.get("model"), index, judg["attribute"], relevant, judg.get("raw_answer")))
    judgments = pd.DataFrame(jud, columns="model model_name item_index attribute relevant raw_answer".split())
    annotations = ann.dropna(subset=["relevant"]).astype({"relevant": bool}).reset_index(drop=True)
    return Stage2Data(items, annotations, judgments, _coverage(items, _by_rater(ann, judgments), "relevant"))


def stage2_labels(data: Stage2Data) -> pd.DataFrame:
    """Human majority per (item, attribute), ties -> relevant: the items, ``n_ratings, n_relevant, human``.

    ``human`` is a nullable boolean, NA for a pair no annotator rated (e.g. an attribute text the tool showed
    under another user's item of the prompt).
    """
    votes = data.annotations.groupby(_KEY)["relevant"].agg(n_ratings="size", n_relevant="sum")
    out = data.items.merge(votes.reset_index(), on=_KEY, how="left")
    out[["n_ratings", "n_relevant"]] = out[["n_ratings", "n_relevant"]].fillna(0).astype(int)
    out["human"] = (2 * out["n_relevant"] >= out["n_ratings"]).astype("boolean").mask(out["n_ratings"] == 0)
    return out


def stage2_yes_rates(data: Stage2Data) -> pd.DataFrame:
    """Share of pairs each rater marked relevant (the authors' "YES rate"), plus an ``llm (mean)`` row.

    Returns ``kind`` (human | llm), ``rater, n`` (pairs with a label), ``n_yes, yes_rate``.
    """
    votes = _by_rater(data.annotations, data.judgments).dropna(subset=["relevant"])
    grouped = votes["relevant"].astype(bool).groupby([votes["kind"], votes["rater"]])
    out = grouped.agg(n="size", n_yes="sum").reset_index()
    out["yes_rate"] = out["n_yes"] / out["n"]
    llm = out[out["kind"] == "llm"]
    if len(llm):
        out.loc[len(out)] = ["llm", "llm (mean)", llm["n"].sum(), llm["n_yes"].sum(), llm["yes_rate"].mean()]
    return out


def choose_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """The threshold maximising F1 of ``score >= threshold`` (ties: the highest such threshold)."""
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    best, best_f1 = float("inf"), -1.0
    for t in np.unique(scores)[::-1]:
        pred = scores >= t
        denominator = pred.sum() + labels.sum()
        f1 = 2 * int((pred & labels).sum()) / denominator if denominator else 0.0
        if f1 > best_f1 + 1e-12:
            best, best_f1 = float(t), f1
    return best


def stage2_predictions(
    data: Stage2Data,
    *,
    embedder: Any = "minilm",
    cache: Any = True,
    seed: int = 0,
    tune_fraction: float = 0.5,
) -> pd.DataFrame:
    """Relevance predictions of every method for the pairs with a human label (:func:`stage2_labels`).

    The embedding and BM25 thresholds are the F1-best on the ``tune`` prompts. An LLM without a judgment for a
    pair predicts "not relevant", flagged ``missing``. Returns ``method, item_index, prompt_index, attribute,
    split, score, threshold, pred, human, missing``.

    Args:
        data: :func:`load_stage2`'s.
        embedder: The embedding baseline's embedder (see ``pv4kit.related._common.encode``).
        cache: The embedding cache (see ``pv4kit.related._common.encode``).
        seed: Seed of the tune/test split of prompts.
        tune_fraction: The share of prompts that tune the thresholds; the rest are ``test``.
    """
    check_number(tune_fraction, "tune_fraction", gt=0, lt=1)
    labels = stage2_labels(data)
    labels = labels[labels["human"].notna()].reset_index(drop=True).astype({"human": bool})
    base = labels[["item_index", "prompt_index", "attribute", "human"]].copy()
    prompts = np.array(sorted(labels["prompt_index"].dropna().unique()))
    n_tune = min(max(int(round(len(prompts) * tune_fraction)), 1), max(len(prompts) - 1, 1))
    tune_prompts = set(np.random.default_rng(seed).permutation(prompts)[:n_tune].tolist())
    base["split"] = labels["prompt_index"].map(lambda p: "tune" if p in tune_prompts else "test").to_numpy()
    frames = []
    for model, part in data.judgments.groupby("model", sort=True):
        merged = base.merge(part[[*_KEY, "relevant"]], on=_KEY, how="left")
        relevant = merged.pop("relevant")
        pred = relevant.fillna(False).astype(bool)
        columns = {"score": pred * 1.0, "threshold": np.nan, "pred": pred, "missing": relevant.isna()}
        frames.append(merged.assign(method=model, **columns))
    scored: dict[str, np.ndarray] = {}  # the coarse filter's 0/1, then similarities thresholded on tune
    if labels["coarse_filter"].any():
        scored["coarse_filter"] = labels["coarse_filter"].to_numpy() * 1.0
    texts = labels["prompt_text"].astype(str).tolist() + labels["attribute"].tolist()
    g, a = np.split(encode(texts, embedder=embedder, cache=cache), 2)
    scored["embedding"] = np.einsum("ij,ij->i", g, a).astype(float)
    attrs = sorted(set(labels["attribute"]))  # BM25 of each prompt over the attribute texts
    position, corpus = {a: i for i, a in enumerate(attrs)}, [tokenize(a) for a in attrs]
    by_prompt = {p: bm25_scores(tokenize(p), corpus) for p in labels["prompt_text"].astype(str).unique()}
    pairs = zip(labels["prompt_text"], labels["attribute"], strict=True)
    scored["bm25"] = np.array([by_prompt[str(p)][position[a]] for p, a in pairs])
    tune = (base["split"] == "tune").to_numpy()
    for method, score in scored.items():
        fixed = method == "coarse_filter"
        threshold = np.nan if fixed else choose_threshold(score[tune], base["human"].to_numpy()[tune])
        pred = score > 0 if fixed else score >= threshold
        frames.append(base.assign(method=method, score=score, threshold=threshold, pred=pred, missing=False))
    columns = "method item_index prompt_index attribute split score threshold pred human missing"
    return pd.concat(frames, ignore_index=True)[columns.split()]


def stage2_metrics(predictions: pd.DataFrame, *, subset: str | Sequence[str] = "test") -> pd.DataFrame:
    """Precision, recall, F1 and accuracy per method against the human majority.

    ``subset``: ``"test"`` (held-out prompts), ``"tune"``, ``"all"``, or a list of them (rows in turn).
    Returns ``method, subset, n, n_missing, tp, fp, fn, tn, precision, recall, f1, accuracy, positive_rate,
    human_positive_rate, threshold``.
    """
    if not isinstance(subset, str):
        return pd.concat([stage2_metrics(predictions, subset=s) for s in subset], ignore_index=True)
    check_choice(subset, "subset", ("test", "tune", "all"))
    frame = predictions if subset == "all" else predictions[predictions["split"] == subset]
    p, h = frame["pred"].astype(bool), frame["human"].astype(bool)
    cells = frame.assign(tp=p & h, fp=p & ~h, fn=~p & h, tn=~p & ~h, positive_rate=p, human_positive_rate=h)
    out = cells.groupby("method", sort=False).agg(
        n=("pred", "size"),
        n_missing=("missing", "sum"),
        **{c: (c, "sum") for c in ("tp", "fp", "fn", "tn")},
        **{c: (c, "mean") for c in ("positive_rate", "human_positive_rate")},
        threshold=("threshold", "first"),
    )
    tp, fp, fn = out["tp"], out["fp"], out["fn"]
    f1, accuracy = 2 * tp / (2 * tp + fp + fn), (tp + out["tn"]) / out["n"]
    out = out.assign(subset=subset, precision=tp / (tp + fp), recall=tp / (tp + fn), f1=f1, accuracy=accuracy)
    columns = (
        "method subset n n_missing tp fp fn tn precision recall f1 accuracy positive_rate human_positive_rate"
    )
    return out.reset_index()[[*columns.split(), "threshold"]]


def stage2_agreement(data: Stage2Data) -> pd.DataFrame:
    """Agreement on binary relevance between humans, LLMs and the human majority.

    Returns ``group`` (``human-human``, ``llm-llm``, ``llm-human``, ``llm-majority``: Cohen's kappa per pair;
    ``human (all)``, ``llm (all)``: Fleiss' kappa, Krippendorff's alpha), ``statistic, rater_a, rater_b,
    value, n, agreement`` (raw agreement, Cohen rows only).
    """
    cols = ["group", "statistic", "rater_a", "rater_b", "value", "n", "agreement"]
    humans = data.annotations.pivot_table(index=_KEY, columns="annotator", values="relevant", aggfunc="first")
    judged = data.judgments.dropna(subset=["relevant"])
    llms = judged.pivot_table(index=_KEY, columns="model", values="relevant", aggfunc="first")
    labels = stage2_labels(data).set_index(_KEY)["human"].astype(object).rename("majority")
    wide = humans.join(llms, how="outer").join(labels, how="left").astype(object)
    wide = wide.where(wide.notna(), None)
    h, m = list(humans.columns), list(llms.columns)
    groups = {
        "human-human": list(itertools.combinations(h, 2)),
        "llm-llm": list(itertools.combinations(m, 2)),
        "llm-human": list(itertools.product(m, h)),
        "llm-majority": [(a, "majority") for a in m],
    }
    cohen = [pairwise_cohen(wide, pairs=pairs).assign(group=g) for g, pairs in groups.items() if pairs]
    frames = [f.rename(columns={"kappa": "value"}).assign(statistic="cohen_kappa") for f in cohen]
    multi = [
        {"group": f"{family} (all)", "statistic": stat, "value": value, "n": n}
        for family, raters in (("human", h), ("llm", m))
        if len(raters) >= 2
        for stat, value, n in _multi_rater(wide[raters], [False, True])
    ]
    frames = [f.reindex(columns=cols) for f in [*frames, pd.DataFrame(multi, columns=cols)] if len(f)]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
    return out.astype({"n": int})


def agreement_summary(agreement: pd.DataFrame) -> pd.DataFrame:
    """``group, agreement, cohen_kappa``: the means over :func:`stage2_agreement`'s pairs per group."""
    pairs = agreement[agreement["statistic"] == "cohen_kappa"]
    summary = pairs.groupby("group", sort=False)[["agreement", "value"]].mean().reset_index()
    return summary.rename(columns={"value": "cohen_kappa"})


# -------------------------------------------------------------------------------------------- stage 3

# generation conditions, as file-name prefixes (longest first: "gt_attributes" before "attributes")
CONDITIONS = ("gt_attributes", "no_context", "attributes")
# <condition>_<model tag>, optionally after the annotation tool's prefix for the same files
_GEN_NAME = re.compile(rf"(?:eval_results_task5_)?({'|'.join(CONDITIONS)})_(.+)")
_GENERIC_SIDE = ("no_context", "generic", "baseline", "no_profile")
_PERSONAL_SIDE = ("personalized", "personalised", "gt_attributes", "attributes", "personal")
_S3_GEN = "{user_id, prompt_id, prompt_text, profile_attributes, items, mode, model, response}"
_S3_ITEM_COLUMNS = (
    "item_index prompt_id user_id model_tag prompt_text attribute is_relevant response_no_context "
    "response_personalized"
).split()
_GEN_COLUMNS = (
    "condition model_tag model_name prompt_id user_id prompt_text response item_index matches_item file line"
)


@dataclass
class Stage3Data(Stage2Data):
    """Stage 3 frames (see :func:`load_stage3`)."""

    generations: pd.DataFrame


def personalised_side(value: Any, *, where: str = "") -> str | None:
    """The side (``"A"``/``"B"``) that showed the personalised response, from a ``display_assignment``.

    Accepted: ``None`` (not recorded), sides to conditions (``{"A": "no_context", "B": "personalized"}``),
    conditions to sides (``{"personalized": "B", "no_context": "A"}``) or ``[condition on A, condition on
    B]``, with one generic (``no_context``, ``generic``, ...) and one personalised condition
    (``personalized``, ``gt_attributes``, ...). Anything else raises ``ValueError`` naming ``where``.
    """
    if value is None:
        return None
    by_side = {"A": value[0], "B": value[1]} if isinstance(value, list | tuple) and len(value) == 2 else value
    if isinstance(by_side, dict) and len(by_side) == 2:
        sides = {str(k).strip().upper(): v for k, v in by_side.items()}
        if set(sides) != {"A", "B"}:  # conditions to sides
            sides = {str(v).strip().upper(): k for k, v in by_side.items()}
        roles = {s: str(c).strip().lower().replace("-", "_").replace(" ", "_") for s, c in sides.items()}
        personal = [s for s, r in roles.items() if r in _PERSONAL_SIDE]
        if set(roles) == {"A", "B"} and len(personal) == 1 and set(roles.values()) & set(_GENERIC_SIDE):
            return personal[0]
    raise ValueError(
        f"{where}: display_assignment {value!r} not understood: expected the sides A and B mapped to one "
        f"generic ({', '.join(_GENERIC_SIDE)}) and one personalised ({', '.join(_PERSONAL_SIDE)}) response"
    )


def _ratings(folder: Path, who: str) -> pd.DataFrame:
    """``who, item_index, attribute, rating`` (NaN: left unrated) ``, personalised_side`` per rating."""
    rows = []
    for path, line, rec, index, attr, rating in _entries(_files(folder), "stage-3 rating"):
        side = personalised_side(rec.get("display_assignment"), where=f"{path}:{line}")
        value = None if rating == "" else _float_or_none(rating, f"{path}:{line}: rating of {attr!r}")
        if value is not None and not 1 <= value <= 5:
            raise ValueError(f"{path}:{line}: rating {rating!r} for {attr!r} is outside 1-5")
        rows.append((path.stem, index, attr, value, side))
    return pd.DataFrame(rows, columns=[who, "item_index", "attribute", "rating", "personalised_side"])


def same_model(tag: str, name: str) -> bool:
    """Whether a file name's model tag and a record's ``model`` name the same generator.

    Lower-cased, the tag must equal the name, its part after the last ``/``, that part without an
    ``-instruct`` suffix, or the name must end with ``.<tag>`` (a Bedrock inference-profile id).
    """
    tag, name = str(tag).strip().lower(), str(name).strip().lower()
    tail = name.rsplit("/", 1)[-1]
    return tag in (name, tail, tail.removesuffix("-instruct")) or name.endswith(f".{tag}")


def _read_generations(folder: Path, items: pd.DataFrame, items_path: Path) -> pd.DataFrame:
    """Generation records, checked against their file names and joined to items by (prompt_id, model_tag)."""
    keyed = items.drop_duplicates("item_index").dropna(subset=["prompt_id"])
    dupes = keyed[keyed.duplicated(["prompt_id", "model_tag"], keep=False)]
    if len(dupes):
        raise ValueError(
            f"{items_path}: items {sorted(dupes['item_index'].tolist())[:10]} share a (prompt_id, model_tag)"
        )
    lookup = {
        (r.prompt_id, r.model_tag): (r.item_index, r.response_no_context, r.response_personalized)
        for r in keyed.itertuples(index=False)
    }
    rows, seen = [], {}
    for path in _files(folder):
        if (match := _GEN_NAME.fullmatch(path.stem)) is None:
            raise ValueError(
                f"{path}: file name is not <condition>_<model>.jsonl with condition in {list(CONDITIONS)}"
            )
        condition, tag = match.groups()
        for line, rec in iter_jsonl(path):
            if rec.get("prompt_id") is None or "response" not in rec:
                raise _shape_error(path, line, "stage-3 generation", _S3_GEN, rec)
            mode, name = rec.get("mode"), rec.get("model")
            if mode is not None and mode != condition:
                raise ValueError(f"{path}:{line}: record mode {mode!r} but the file name says {condition!r}")
            if name is not None and not same_model(tag, name):
                raise ValueError(f"{path}:{line}: record model {name!r} but the file name says {tag!r}")
            key = (rec["prompt_id"], condition, tag)
            if key in seen:
                raise ValueError(f"{path}:{line}: prompt_id {rec['prompt_id']!r} repeats line {seen[key]}")
            seen[key] = line
            item, no_context, personal = lookup.get((rec["prompt_id"], tag), (pd.NA, None, None))
            expected = {"no_context": no_context, "gt_attributes": personal}.get(condition)
            matches = pd.NA if expected is None else rec["response"] == expected
            fields = [rec["prompt_id"], rec.get("user_id"), rec.get("prompt_text"), rec["response"]]
            rows.append([condition, tag, name, *fields, item, matches, path.name, line])
    out = pd.DataFrame(rows, columns=_GEN_COLUMNS.split())
    if len(out) and keyed.empty:
        logger.warning("%s: no item has a prompt_id; %d generations join no item", items_path, len(out))
    return out.astype({"item_index": "Int64", "matches_item": "boolean"})


def load_stage3(source: str | os.PathLike[str] = HUB_ID) -> Stage3Data:
    """Load ``stage3/items.jsonl``, annotations, LLM judgments and ``generations/<condition>_<model>.jsonl``.

    Returns ``items``; ``annotations``/``judgments``: ``annotator``/``model, item_index, attribute, rating,
    personalised_side``; ``generations``: ``condition, model_tag`` (file name), ``model_name``, ...,
    ``item_index`` (joined by prompt id and model tag), ``matches_item``; ``coverage``.

    Args:
        source: Release folder or hub id.
    """
    folder = _stage_dir(source, "stage3")
    rows = []
    for path, line, rec, index, j, attr in _entries([folder / "items.jsonl"], "stage-3 item"):
        text = _attr_text(attr, f"{path}:{line}: attributes[{j}]")
        relevant = attr.get("is_relevant") if isinstance(attr, dict) else None
        fields = {k: rec.get(k) for k in _S3_ITEM_COLUMNS}
        rows.append({**fields, "item_index": index, "attribute": text, "is_relevant": relevant})
    items = pd.DataFrame(rows, columns=_S3_ITEM_COLUMNS)
    ann, jud = _ratings(folder / "annotations", "annotator"), _ratings(folder / "llm_judgments", "model")
    coverage = _coverage(items, _by_rater(ann, jud), "rating")
    annotations, judgments = (f.dropna(subset=["rating"]).reset_index(drop=True) for f in (ann, jud))
    generations = _read_generations(folder / "generations", items, folder / "items.jsonl")
    return Stage3Data(items, annotations, judgments, coverage, generations)


def stage3_ratings(data: Stage3Data) -> pd.DataFrame:
    """All stage-3 ratings in one long frame.

    Returns ``kind`` (human | llm), ``rater, item_index, attribute, model_tag, is_relevant, rating,
    personalised_side``.
    """
    info = data.items[[*_KEY, "model_tag", "is_relevant"]].drop_duplicates(_KEY)
    out = _by_rater(data.annotations, data.judgments).merge(info, on=_KEY, how="left")
    columns = "kind rater item_index attribute model_tag is_relevant rating personalised_side"
    return out[columns.split()]


def stage3_pairs(data: Stage3Data) -> pd.DataFrame:
    """Every (item, attribute) pair of the items, ``n_human, human_mean, n_llm, llm_mean`` (0/NA: unrated)."""
    out = data.items[["item_index", "prompt_id", "model_tag", "attribute", "is_relevant"]]
    for frame, n, mean in (
        (data.annotations, "n_human", "human_mean"),
        (data.judgments, "n_llm", "llm_mean"),
    ):
        summary = frame.groupby(_KEY)["rating"].agg(**{n: "size", mean: "mean"}).reset_index()
        out = out.merge(summary, on=_KEY, how="left")
        out[n] = out[n].fillna(0).astype(int)
    return out


def stage3_orientation(ratings: pd.DataFrame) -> pd.DataFrame:
    """Ratings by the side that showed the personalised response (``"?"``: not recorded).

    Ratings are stored canonically; stored as seen, the two sides would mirror each other (``6 - mean``).
    Returns ``kind, personalised_side, n, mean_rating, share_prefer_personalised, share_prefer_generic``.
    """
    require_columns(ratings, ["kind", "personalised_side", "rating"], name="ratings (from stage3_ratings)")
    frame = ratings.assign(personalised_side=ratings["personalised_side"].fillna("?"))
    shares = ("share_prefer_personalised", "share_prefer_generic")
    return _rating_stats(frame, ["kind", "personalised_side"], *shares, sort=True)


_SHARES = {
    "share_not_preferred": lambda r: float((r <= 3).mean()),
    "share_prefer_personalised": lambda r: float((r >= 4).mean()),
    "share_prefer_generic": lambda r: float((r <= 2).mean()),
}


def _rating_stats(frame: pd.DataFrame, by: list[str], *shares: str, sort: bool = False) -> pd.DataFrame:
    """``n, mean_rating`` and the named ``_SHARES`` of the ratings per ``by`` group."""
    grouped = frame.groupby(by, sort=sort)["rating"]
    return grouped.agg(n="size", mean_rating="mean", **{s: _SHARES[s] for s in shares}).reset_index()


def _with_pooled(ratings: pd.DataFrame) -> pd.DataFrame:
    """``ratings`` after a copy of the human ratings under the rater ``humans (pooled)``."""
    return pd.concat(
        [ratings[ratings["kind"] == "human"].assign(rater="humans (pooled)"), ratings], ignore_index=True
    )


def stage3_distribution(ratings: pd.DataFrame) -> pd.DataFrame:
    """Rating distribution per rater and for all humans pooled: ``kind, rater, rating, count, share``."""
    counts = _with_pooled(ratings).groupby(["kind", "rater", "rating"]).size().rename("count")
    full = counts.unstack("rating", fill_value=0).reindex(columns=[1.0, 2.0, 3.0, 4.0, 5.0], fill_value=0)
    out = full.stack().rename("count").reset_index()
    out["share"] = out["count"] / out.groupby(["kind", "rater"])["count"].transform("sum")
    return out


def stage3_summary(ratings: pd.DataFrame) -> pd.DataFrame:
    """Mean rating and shares not preferred (<= 3) and preferring personalised (>= 4) per rater.

    Rows for all humans pooled and for the human mean per pair. Returns ``kind, rater, n, mean_rating,
    share_not_preferred, share_prefer_personalised``.
    """
    human = ratings[ratings["kind"] == "human"]
    mean = human.groupby(_KEY)["rating"].mean().reset_index()
    frame = pd.concat(
        [mean.assign(kind="human", rater="human mean per pair"), _with_pooled(ratings)], ignore_index=True
    )
    return _rating_stats(frame, ["kind", "rater"], "share_not_preferred", "share_prefer_personalised")


def stage3_correlation(ratings: pd.DataFrame) -> pd.DataFrame:
    """Spearman correlation of each rater with the human mean per (item, attribute).

    Each human is compared with the other humans' mean (leave-one-out). Returns ``kind, rater, n,
    spearman_rho, p_value``.
    """
    from scipy.stats import spearmanr

    human = ratings[ratings["kind"] == "human"]
    rows = []
    for (kind, rater), part in ratings.groupby(["kind", "rater"], sort=True):
        ref = human[human["rater"] != rater] if kind == "human" else human
        target = ref.groupby(_KEY)["rating"].mean().rename("human_mean")
        joined = part.set_index(_KEY)[["rating"]].join(target, how="inner").dropna()
        rho = p = float("nan")
        if len(joined) >= 3 and joined["rating"].nunique() > 1 and joined["human_mean"].nunique() > 1:
            res = spearmanr(joined["rating"], joined["human_mean"])
            rho, p = float(res.statistic), float(res.pvalue)
        rows.append((kind, rater, len(joined), rho, p))
    return pd.DataFrame(rows, columns=["kind", "rater", "n", "spearman_rho", "p_value"])

"""How far the static embedder can be trusted: every audit figure under MiniLM and under ``static``.

For the sample (``raw/``) and the grown release-size tree (:mod:`grow`, 149 users, 20,860 questions), runs
:func:`pv4kit.analysis.audit.run_audit` with MiniLM and with ``static`` (distilled from MiniLM) and
prints, side by side, the candidate-only solvers' accuracies with their user-bootstrap intervals, the flag
counts, the duplicate question pairs and the category groups, then the agreement of the per-question
verdicts (same predicted letter, same flag) and of the underlying scores (Spearman of the closest-pair
cosine, adjusted Rand index of the category groups). MiniLM costs ~30+ min of CPU at release size, so on
the grown tree the MiniLM side (and the comparison) is a seeded random subsample of ``--minilm-users``
users; ``static`` also runs on every user (its figures are printed as a third column).

``--calibrate`` prints the static cut-offs of :data:`pv4kit.analysis.audit.CUTOFFS`: for each
MiniLM cut-off, the static value that flags the same share of the sample's pairs (every candidate pair
within a question; every question pair within a user; every pair of category names), or, where MiniLM
flags fewer than ten pairs of the sample (too few to match a share), of the grown subsample's pairs (its
variant-tagged copies of a question are near-duplicates both embedders see). It also prints the value as
many standard deviations from the static pairs' mean as MiniLM's cut-off is from MiniLM's, for reference.

    .venv/bin/python benchmarks/bench_static_audit.py [--workdir DIR] [--minilm-users 10] [--calibrate]
    .venv/bin/python benchmarks/bench_static_audit.py --sample-only
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

SOLVERS = ("nearest_to_question", "nearest_to_centroid", "rationale_as_generation", "longest", "shortest")
MIN_FLAGGED = 10  # MiniLM-flagged pairs below which the share is too noisy to match
FLAGS = ("near_duplicate_candidates", "ref_near_duplicate", "duplicate_question", "rationale_misses")


def subsample(data, n_users: int, *, seed: int = 0):
    """``data`` restricted to ``n_users`` users drawn at random (seeded); questions and users alike."""
    users = np.sort(data.questions["user_id"].unique())
    keep = set(
        np.random.default_rng(seed).choice(users, size=min(n_users, len(users)), replace=False).tolist()
    )
    return SimpleNamespace(
        questions=data.questions[data.questions["user_id"].isin(keep)].reset_index(drop=True),
        users=data.users[data.users["user_id"].isin(keep)].reset_index(drop=True),
        fingerprint=None,
    )


def audit(data, embedder, cache: Path):
    from pv4kit.analysis.audit import run_audit

    t0 = time.perf_counter()
    result = run_audit(data, embedder=embedder, cache=cache, n_boot=1000)
    return result, time.perf_counter() - t0


def figures(result) -> dict[str, str]:
    """The audit figures of one result, as printable strings, in a fixed order."""
    out = {}
    acc = result["solver_accuracy"].set_index("solver")
    for s in SOLVERS:
        if s in acc.index:
            r = acc.loc[s]
            out[f"solver {s}"] = f"{100 * r.accuracy:.1f}% [{100 * r.ci_low:.1f}, {100 * r.ci_high:.1f}]"
    flags = result["flags"]
    for f in FLAGS:
        if f in flags:
            out[f"flag {f}"] = f"{int(flags[f].sum())} ({100 * flags[f].mean():.1f}%)"
    out["questions with >= 1 embedding flag"] = str(
        int(flags[[f for f in FLAGS if f in flags]].any(axis=1).sum())
    )
    sim = result["similarity"]
    out["median ref-nearest-distractor cosine"] = f"{sim['ref_nearest_distractor'].median():.3f}"
    out["duplicate question pairs"] = str(len(result["duplicates"]))
    cats = result["categories"]
    multi = cats.groupby("group")["user_id"].nunique()
    out["category groups (names)"] = f"{cats['group'].nunique()} ({len(cats)})"
    out["groups shared by >= 2 users"] = str(int((multi >= 2).sum()))
    return out


def agreement(a, b) -> dict[str, str]:
    """Agreement of the per-question verdicts of two results on the same questions."""
    from scipy.stats import spearmanr
    from sklearn.metrics import adjusted_rand_score

    key = ["user_id", "question_index"]
    out = {}
    pa, pb = a["solver_predictions"], b["solver_predictions"]
    for s in SOLVERS:
        m = pa[pa["solver"] == s].merge(pb[pb["solver"] == s], on=key, suffixes=("_a", "_b"))
        if len(m):
            same = (m["predicted_letter_a"] == m["predicted_letter_b"]).mean()
            both = (m["correct_a"] == m["correct_b"]).mean()
            out[f"solver {s}: same pick / same verdict"] = f"{100 * same:.1f}% / {100 * both:.1f}%"
    fa, fb = a["flags"], b["flags"]
    m = fa.merge(fb, on=key, suffixes=("_a", "_b"))
    for f in FLAGS:
        if f"{f}_a" in m:
            x, y = m[f"{f}_a"].astype(bool), m[f"{f}_b"].astype(bool)
            union = (x | y).sum()
            jac = f"{(x & y).sum()}/{union}" if union else "0/0"
            out[f"flag {f}: same / both of either"] = f"{100 * (x == y).mean():.1f}% / {jac}"
    sa = a["similarity"].merge(b["similarity"], on=key, suffixes=("_a", "_b"))
    rho = spearmanr(sa["max_pair_a"], sa["max_pair_b"]).statistic
    out["Spearman of the closest-pair cosine"] = f"{rho:.3f}"
    rho = spearmanr(sa["ref_nearest_distractor_a"], sa["ref_nearest_distractor_b"]).statistic
    out["Spearman of the ref-nearest-distractor cosine"] = f"{rho:.3f}"
    da = set(
        zip(
            a["duplicates"]["user_id"],
            a["duplicates"]["question_index_a"],
            a["duplicates"]["question_index_b"],
            strict=True,
        )
    )
    db = set(
        zip(
            b["duplicates"]["user_id"],
            b["duplicates"]["question_index_a"],
            b["duplicates"]["question_index_b"],
            strict=True,
        )
    )
    out["duplicate pairs in both / in either"] = f"{len(da & db)}/{len(da | db)}"
    ca, cb = a["categories"], b["categories"]
    cm = ca.merge(cb, on=["user_id", "category"], suffixes=("_a", "_b"))
    out["category groups: adjusted Rand index"] = f"{adjusted_rand_score(cm['group_a'], cm['group_b']):.3f}"
    return out


def side_by_side(title: str, columns: dict[str, dict[str, str]]) -> None:
    names = list(columns)
    rows = list(dict.fromkeys(k for col in columns.values() for k in col))
    width = max(len(r) for r in rows) + 2
    print(f"\n== {title}")
    print(f"{'':{width}s}" + "".join(f"{n:>34s}" for n in names))
    for r in rows:
        print(f"{r:{width}s}" + "".join(f"{columns[n].get(r, ''):>34s}" for n in names))


def calibrate(data, minilm, static, cache: Path, *, label: str) -> dict[str, tuple[int, float]]:
    """Per cut-off: how many pairs MiniLM's flags, and the static cut-off flagging the same share."""
    from pv4kit.analysis.audit import CUTOFFS, _candidate_vectors
    from pv4kit.embeddings.models import MINILM, embed_texts
    from pv4kit.vectors import unit_rows

    q = data.questions.reset_index(drop=True)
    iu = np.triu_indices(5, k=1)

    def candidate_pairs(emb):
        c = _candidate_vectors(q, embedder=emb, cache=cache)
        sims = np.einsum("nkd,njd->nkj", c, c)[:, iu[0], iu[1]]
        present = np.any(c != 0, axis=2)
        ok = (present[:, iu[0]] & present[:, iu[1]]).ravel()
        return sims.ravel()[ok]

    def question_pairs(emb):
        v = unit_rows(embed_texts(list(q["question"]), embedder=emb, cache=cache, progress=False))
        out = []
        for _, pos in q.groupby("user_id").indices.items():
            s = v[pos] @ v[pos].T
            out.append(s[np.triu_indices(len(pos), k=1)])
        return np.concatenate(out)

    def category_distances(emb):
        names = q.dropna(subset=["category_name"]).drop_duplicates(["user_id", "category_name"])
        v = unit_rows(embed_texts(list(names["category_name"]), embedder=emb, cache=cache, progress=False))
        return 1.0 - (v @ v.T)[np.triu_indices(len(v), k=1)]

    ref = CUTOFFS[MINILM]
    print(
        f"\n== calibration on {label} ({len(q)} questions): the static cut-off that flags the same share of"
    )
    print("   pairs as MiniLM's (quantile), and the one as many standard deviations from the mean (z)")
    found = {}
    for name, pairs, above in (
        ("near_duplicate", candidate_pairs, True),
        ("duplicate_question", question_pairs, True),
        ("category_distance", category_distances, False),
    ):
        m, s = pairs(minilm), pairs(static)
        flagged = int(np.sum(m >= ref[name])) if above else int(np.sum(m < ref[name]))
        share = flagged / len(m)
        quantile = float(np.quantile(s, 1.0 - share)) if above else float(np.quantile(s, share))
        z = (ref[name] - m.mean()) / m.std()
        affine = float(s.mean() + z * s.std())
        found[name] = (flagged, round(quantile, 3))
        print(
            f"  {name:20s} MiniLM {ref[name]} flags {flagged} of {len(m)} pairs ({share:.2%}; z {z:.2f}) -> "
            f"static quantile {quantile:.3f}, z {affine:.3f} "
            f"(mean +- sd: MiniLM {m.mean():.3f} +- {m.std():.3f}, static {s.mean():.3f} +- {s.std():.3f})"
        )
    return found


def grown_data(work: Path):
    from grow import grow_tree

    import pv4kit

    raw = work / "raw"
    if not (raw / "users").is_dir():
        grow_tree(ROOT / "raw", raw)
        subprocess.run(
            [sys.executable, "-m", "pv4kit", "qa-table", "--users-dir", str(raw / "users")], check=True
        )
    return pv4kit.load(raw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/pv4kit-bench-static", help="grown tree, caches [%(default)s]")
    ap.add_argument(
        "--static-dir", default=None, help="where the static model is kept [WORKDIR/cache/static]"
    )
    ap.add_argument("--minilm-users", type=int, default=10, help="users in the grown tree's MiniLM subsample")
    ap.add_argument("--seed", type=int, default=0, help="seed of the user subsample")
    ap.add_argument("--sample-only", action="store_true")
    ap.add_argument("--calibrate", action="store_true", help="print the static cut-offs (sample)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    import pv4kit
    from pv4kit.embeddings.models import get_embedder

    work = Path(args.workdir)
    cache = work / "cache" / "embeddings"
    t0 = time.perf_counter()
    static = get_embedder("static", export_dir=args.static_dir or work / "cache" / "static")
    print(f"static embedder {static.name} ready in {time.perf_counter() - t0:.1f} s ({static.folder})")
    minilm = get_embedder("minilm", device="cpu")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    sample = pv4kit.load(ROOT / "raw")
    calibration = [calibrate(sample, minilm, static, cache, label="the sample")] if args.calibrate else []
    (ra, ta), (rb, tb) = audit(sample, minilm, cache), audit(sample, static, cache)
    title = f"sample ({len(sample.questions)} questions, {sample.questions['user_id'].nunique()} users)"
    side_by_side(
        f"{title}: MiniLM {ta:.0f} s, static {tb:.0f} s",
        {"MiniLM": figures(ra), "static": figures(rb)},
    )
    side_by_side(f"{title}: agreement, MiniLM vs static", {"": agreement(ra, rb)})
    if args.sample_only:
        return
    grown = grown_data(work)
    part = subsample(grown, args.minilm_users, seed=args.seed)
    users = sorted(part.questions["user_id"].unique().tolist())
    if args.calibrate:
        calibration.append(calibrate(part, minilm, static, cache, label="the grown subsample"))
        chosen = {}
        for name in calibration[0]:
            usable = [c[name] for c in calibration if c[name][0] >= MIN_FLAGGED]
            chosen[name] = usable[0][1] if usable else None
        print(f"  the first with >= {MIN_FLAGGED} MiniLM-flagged pairs: CUTOFFS[{static.name!r}] = {chosen}")
    (ra, ta), (rb, tb), (rc, tc) = (
        audit(part, minilm, cache),
        audit(part, static, cache),
        audit(grown, static, cache),
    )
    title = (
        f"grown tree: {len(part.questions)} questions of {len(users)} users drawn with seed {args.seed} "
        f"({users}); static also on all {len(grown.questions)} questions"
    )
    side_by_side(
        f"{title}: MiniLM {ta:.0f} s, static {tb:.0f} s (all: {tc:.0f} s)",
        {
            "MiniLM (subsample)": figures(ra),
            "static (subsample)": figures(rb),
            "static (all users)": figures(rc),
        },
    )
    side_by_side("grown subsample: agreement, MiniLM vs static", {"": agreement(ra, rb)})
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

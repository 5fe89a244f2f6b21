"""Dataset commands: ``validate``, ``qa-table`` (step 5), ``build`` (step 6) and ``info``."""

from __future__ import annotations

import argparse

from pv4kit.cli._args import (
    add_user_ranges,
    check_output_dir,
    nonnegative_int,
    pick,
    user_ranges,
    validation_fraction,
)


def _validate(args: argparse.Namespace) -> int:
    from pv4kit.dataset.validate import format_report, validate_raw

    report = validate_raw(args.raw_dir, **user_ranges(args))
    if args.errors_only:
        report = report[report["severity"] == "error"]
    print(format_report(report))
    return 1 if (report["severity"] == "error").any() else 0


def _qa_table(args: argparse.Namespace) -> int:
    from pv4kit.dataset.questions import write_qa_tables
    from pv4kit.dataset.tree import users_dir_of

    report = write_qa_tables(users_dir_of(args.users_dir), **pick(args, "seed", "overwrite", "force"))
    summary, flagged = report.attrs["summary"], report["reason"] == "malformed_tags"
    print(summary.to_string(index=False))
    titles = [
        "dropped blocks (and untagged first questions kept, as the reference keeps them)",
        "malformed tags (parsed as the reference parses them; fix each, rerun with --overwrite)",
    ]
    for rows, title in zip((report[~flagged], report[flagged]), titles, strict=True):
        if len(rows):
            print(f"\n{title}:")
            for r in rows.itertuples(index=False):
                print(f"  {r.file}:{r.line}: {r.detail or r.reason.replace('_', ' ')}")
    if len(report):
        print("\nper reason:", report["reason"].value_counts().to_dict())
    print(
        f"\n{int(summary['kept'].sum())} questions kept, {int(summary['dropped'].sum())} dropped, "
        f"{int(flagged.sum())} tag problem(s), {int(summary['written'].sum())} qa.csv written"
    )
    return 0


def _build(args: argparse.Namespace) -> int:
    from pv4kit.dataset.splits import build_dataset

    check_output_dir(args.output_dir, option="--output-dir")
    frame = build_dataset(
        args.users_dir,
        args.output_dir,
        **user_ranges(args),
        **pick(args, "hard_subset", "validation_fraction", "seed", "id_column"),
        progress=not args.quiet,
    )
    print(frame.to_string(index=False))
    totals = {s: int(frame[s].sum()) for s in ("train", "validation", "test", "hard")}
    print(f"\nwrote {args.output_dir}: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    return 0


def _info(args: argparse.Namespace) -> int:
    from pv4kit.dataset.load import load

    data = load(args.source)
    print(repr(data))
    print(data.summary().to_string(index=False))
    if data.users_outside:
        n = len(data.users_outside)
        print(f"left out {n} user(s) outside the id ranges of train and test users: {data.users_outside}")
    print("\nper user:\n" + data.per_user().to_string())
    print("\ncorrect letters:", data.questions["answer_letter"].value_counts().sort_index().to_dict())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the dataset subcommands."""
    p = sub.add_parser("validate", help="check a raw tree and list every problem with file and line")
    p.add_argument("raw_dir", help="raw tree (holding users/) or a users folder")
    p.add_argument("--errors-only", action="store_true", help="hide warnings")
    add_user_ranges(
        p,
        train_help="training users, as `build` takes them",
        test_help="evaluation users, as `build` takes them",
    )
    p.set_defaults(func=_validate)

    p = sub.add_parser("qa-table", help="step 5: parse qa/{i}.txt into qa.csv for every user")
    p.add_argument("--users-dir", required=True, help="raw/users (or the raw tree)")
    p.add_argument("--seed", type=nonnegative_int, default=42, help="seed of the answer shuffle (default 42)")
    p.add_argument("--overwrite", action="store_true", help="rewrite existing qa.csv files")
    p.add_argument(
        "--force", action="store_true", help="with --overwrite: write tables with fewer questions too"
    )
    p.set_defaults(func=_qa_table)

    p = sub.add_parser("build", help="step 6: per-user splits -> {train,validation,test}.parquet")
    p.add_argument("--users-dir", required=True, help="raw/users (or the raw tree)")
    p.add_argument("--output-dir", required=True, help="where the parquet files go (e.g. data)")
    p.add_argument("--hard-subset", default=None, help="hard_subset.csv (user_id,question_index)")
    add_user_ranges(
        p,
        train_help="inclusive id range of training users",
        test_help="inclusive id range of evaluation users",
    )
    p.add_argument("--validation-fraction", type=validation_fraction, default=0.1)
    p.add_argument("--seed", type=nonnegative_int, default=23)
    p.add_argument("--id-column", default="user_id", choices=["user_id", "collection_id"])
    p.set_defaults(func=_build)

    p = sub.add_parser("info", help="load a dataset (data/, raw tree or hub id) and summarise it")
    p.add_argument("source", nargs="?", default="data")
    p.set_defaults(func=_info)

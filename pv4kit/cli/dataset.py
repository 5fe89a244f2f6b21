"""Dataset commands: ``validate``, ``qa-table`` (step 5), ``build`` (step 6) and ``info``."""

from __future__ import annotations

import argparse

from pv4kit.cli._args import add_options, add_user_ranges, check_output_dir, command, pick, user_ranges

QA_OPTIONS = ("seed", "overwrite", "force")
BUILD_OPTIONS = ("hard_subset", "validation_fraction", "seed", "id_column")


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

    report = write_qa_tables(users_dir_of(args.users_dir), **pick(args, *QA_OPTIONS))
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
    settings = {**user_ranges(args), **pick(args, *BUILD_OPTIONS)}
    frame = build_dataset(args.users_dir, args.output_dir, **settings, progress=not args.quiet)
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
    from pv4kit.dataset.questions import write_qa_tables
    from pv4kit.dataset.splits import build_dataset

    p = command(sub, "validate", _validate)
    p.add_argument("raw_dir", help="raw tree (holding users/) or a users folder")
    p.add_argument("--errors-only", action="store_true", help="hide warnings")
    add_user_ranges(p, how="as `build` takes them")

    p = command(sub, "qa-table", _qa_table)
    p.add_argument("--users-dir", required=True, help="raw/users (or the raw tree)")
    add_options(p, write_qa_tables, *QA_OPTIONS)

    p = command(sub, "build", _build)
    p.add_argument("--users-dir", required=True, help="raw/users (or the raw tree)")
    p.add_argument("--output-dir", required=True, help="where the parquet files go (e.g. data)")
    add_user_ranges(p, how="an inclusive id range")
    add_options(p, build_dataset, *BUILD_OPTIONS, id_column={"choices": ["user_id", "collection_id"]})

    p = command(sub, "info", _info)
    p.add_argument("source", nargs="?", default="data")

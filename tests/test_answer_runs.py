"""Run files stay what they were: every case of :mod:`tests.answer_cases` against the files written before.

``tests/fixtures/answer_runs/`` was written by the ``answer`` that branched on the method name (commit
ade72a7) through the same fake loopback server; today's method table must write the same
``config.json`` and ``context.json`` bytes and the same ``generations.parquet`` (every cell, dtype and
column; the file's bytes too with the pyarrow version the fixtures were written with). One line was
added to each ``config.json`` since: ``served_model`` (issue 23.7).
"""

from __future__ import annotations

import json

import pyarrow
import pytest

from tests.answer_cases import CASES, FIXTURES, parquet_digests, run_case

MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))


def test_every_case_has_its_fixture():
    assert set(MANIFEST["cases"]) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_run_files_are_unchanged(name, tmp_path):
    run_dir = run_case(name, tmp_path)
    for file in ("config.json", "context.json"):
        got = (run_dir / file).read_text(encoding="utf-8")
        assert got == (FIXTURES / name / file).read_text(encoding="utf-8"), f"{name}/{file}"
    want = MANIFEST["cases"][name]
    got = parquet_digests(run_dir / "generations.parquet")
    assert got["content_sha256"] == want["content_sha256"], f"{name}: generations.parquet content changed"
    if pyarrow.__version__ == MANIFEST["pyarrow"]:
        assert got["file_sha256"] == want["file_sha256"], f"{name}: generations.parquet bytes changed"

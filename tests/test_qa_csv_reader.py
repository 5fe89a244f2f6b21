"""``read_qa_csv``'s standard-library path gives pandas' frame, and leaves every irregular file to pandas."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pv4kit.dataset import formats
from pv4kit.dataset.formats import format_qa_csv, read_qa_csv
from pv4kit.schema import QA_COLUMNS

RAW = Path(__file__).resolve().parents[1] / "raw"

# pieces that trip CSV readers: separators, quotes, every line end, blanks, NA-like words, unicode
PIECES = [
    "plain",
    "a, b",
    'say "hi"',
    '"',
    '""',
    "line\nbreak",
    "crlf\r\nend",
    "cr\ronly",
    " lead",
    "trail ",
    "\ttab",
    "",
    "NA",
    "nan",
    "null",
    "None",
    "#hash",
    "é ü 漢字 🙂",
    'a,\n"b",\r\n',
    "\n",
    ",",
]


def _random_table(rng: np.random.Generator, rows: int, *, bare_cr: bool) -> pd.DataFrame:
    pieces = PIECES if bare_cr else [p for p in PIECES if p != "cr\ronly"]

    def text() -> str:
        return "".join(rng.choice(pieces, size=int(rng.integers(1, 4))))

    return pd.DataFrame(
        {
            "index": np.arange(rows),
            "category": rng.integers(0, 12, size=rows),
            "question": [text() for _ in range(rows)],
            **{f"choice_{x}": [text() for _ in range(rows)] for x in "abcde"},
            "correct_choice": rng.choice(list("ABCDE"), size=rows),
            "rationale": [text() for _ in range(rows)],
        }
    )[QA_COLUMNS]


def _both(path: Path) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    return formats._read_plain_qa_csv(path), formats._read_qa_csv_pandas(path)


def test_the_sample_reads_the_same_through_both_paths():
    files = sorted(RAW.glob("users/user_*/qa.csv"))
    assert files
    for path in files:
        plain, by_pandas = _both(path)
        assert plain is not None, path  # the sample is plain: the fast path is the one taken
        pd.testing.assert_frame_equal(plain, by_pandas, check_dtype=True)
        pd.testing.assert_frame_equal(read_qa_csv(path), by_pandas, check_dtype=True)


@pytest.mark.parametrize("writer", ["pv4kit", "quote_all", "pandas", "crlf", "reordered"])
def test_tricky_text_reads_the_same_through_both_paths(tmp_path, writer):
    rng = np.random.default_rng(len(writer))
    for trial in range(25):
        # csv.writer's and pandas' minimal quoting leave a lone "\r" unquoted, which no reader can
        # read back (a line end); only QUOTE_ALL writes it readably (see IRREGULAR["bare_cr"])
        table = _random_table(rng, int(rng.integers(1, 30)), bare_cr=writer == "quote_all")
        path = tmp_path / f"{trial}.csv"
        if writer == "pv4kit":
            path.write_text(format_qa_csv(table), encoding="utf-8", newline="")
        elif writer == "quote_all":
            buf = io.StringIO()
            csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(
                [QA_COLUMNS, *table.astype(str).itertuples(index=False)]
            )
            path.write_text(buf.getvalue(), encoding="utf-8", newline="")
        elif writer == "pandas":
            table.to_csv(path, index=False)
        elif writer == "crlf":
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\r\n").writerows([QA_COLUMNS, *table.itertuples(index=False)])
            path.write_text(buf.getvalue(), encoding="utf-8", newline="")
        else:  # other column order and one extra column: both keep QA_COLUMNS in order
            table.assign(extra="x")[["rationale", "extra", *QA_COLUMNS[:-1]]].to_csv(path, index=False)
        plain, by_pandas = _both(path)
        assert plain is not None, path.read_text()
        pd.testing.assert_frame_equal(plain, by_pandas, check_dtype=True)
        expected = table.astype({c: "str" for c in QA_COLUMNS if c not in ("index", "category")})
        pd.testing.assert_frame_equal(by_pandas, expected, check_dtype=False)  # exactly as written


HEADER = ",".join(QA_COLUMNS)
ROW = "0,1,Where?,a,b,c,d,e,A,why"

IRREGULAR = {
    "bom": "\ufeff" + HEADER + "\n" + ROW + "\n",
    "blank_line_inside": HEADER + "\n" + ROW + "\n\n" + ROW.replace("0,", "1,", 1) + "\n",
    "blank_lines_at_end": HEADER + "\n" + ROW + "\n\n\n",
    "short_row": HEADER + "\n" + ROW + "\n" + "1,1,Where?,a,b\n",
    "long_row": HEADER + "\n" + ROW + ",surplus\n",
    "duplicate_header": HEADER + ",question\n" + ROW + ",again\n",
    "unnamed_column": HEADER + ",\n" + ROW + ",x\n",
    "missing_column": HEADER.replace(",rationale", "") + "\n" + ROW.rsplit(",", 1)[0] + "\n",
    "header_only": HEADER + "\n",
    "empty": "",
    "bad_integer": HEADER + "\n" + ROW + "\n" + ROW.replace("0,", "x,", 1) + "\n",
    "negative": HEADER + "\n" + ROW.replace("0,", "-1,", 1) + "\n",
    "unicode_digit": HEADER + "\n" + ROW.replace("0,", "\u0661,", 1) + "\n",
    "huge_integer": HEADER + "\n" + ROW.replace("0,", "9" * 30 + ",", 1) + "\n",
    "stray_quote_after_field": HEADER + "\n" + ROW.replace("Where?", '"Where"?', 1) + "\n",
    "open_quote": HEADER + "\n" + ROW.replace("Where?", '"Where?', 1) + "\n",
    "bare_cr": HEADER + "\n" + ROW.replace("why", "wh\ry") + "\n",
    "nul": HEADER + "\n" + ROW.replace("why", "wh\x00y") + "\n",
}


@pytest.mark.parametrize("case", sorted(IRREGULAR))
def test_irregular_files_are_left_to_pandas(tmp_path, case):
    path = tmp_path / "qa.csv"
    path.write_text(IRREGULAR[case], encoding="utf-8", newline="")
    assert formats._read_plain_qa_csv(path) is None
    try:
        expected = formats._read_qa_csv_pandas(path)
    except Exception as exc:  # the same error, word for word
        with pytest.raises(type(exc)) as got:
            read_qa_csv(path)
        assert str(got.value) == str(exc)
    else:
        pd.testing.assert_frame_equal(read_qa_csv(path), expected, check_dtype=True)


def test_non_utf8_files_and_folders_are_left_to_pandas(tmp_path):
    latin = tmp_path / "latin.csv"
    latin.write_bytes((HEADER + "\n" + ROW.replace("why", "caf\xe9") + "\n").encode("latin-1"))
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    for path in (latin, folder, tmp_path / "absent.csv"):
        assert formats._read_plain_qa_csv(path) is None
        with pytest.raises(Exception) as plain:
            read_qa_csv(path)
        with pytest.raises(type(plain.value)) as by_pandas:
            formats._read_qa_csv_pandas(path)
        assert str(plain.value) == str(by_pandas.value) and path.name in str(plain.value)

"""``read_qa_csv`` reads text exactly as written, whatever quoting and line ends the writer used."""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest

from pv4kit.dataset.formats import format_qa_csv, read_qa_csv
from pv4kit.schema import QA_COLUMNS

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


@pytest.mark.parametrize("writer", ["pv4kit", "quote_all", "pandas", "crlf", "reordered"])
def test_tricky_text_reads_exactly_as_written(tmp_path, writer):
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
        expected = table.astype({c: "str" for c in QA_COLUMNS if c not in ("index", "category")})
        pd.testing.assert_frame_equal(read_qa_csv(path), expected, check_dtype=False)

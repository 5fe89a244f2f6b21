import subprocess
import sys

import pytest

import pv4kit


@pytest.mark.parametrize("name", pv4kit.__all__)
def test_every_export_resolves(name):
    assert getattr(pv4kit, name) is not None


def test_unknown_name_suggests():
    with pytest.raises(AttributeError, match="did you mean 'score_run'"):
        pv4kit.score_rum  # noqa: B018


def test_import_is_cheap():
    heavy = "('torch', 'sentence_transformers', 'plotly', 'umap', 'openai', 'pyarrow')"
    code = f"import sys, pv4kit; print([m for m in {heavy} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_lists_every_subcommand():
    out = subprocess.run(
        [sys.executable, "-m", "pv4kit", "--help"], capture_output=True, text=True, check=True
    )
    for cmd in [
        "validate",
        "qa-table",
        "build",
        "info",
        "generate",
        "usage",
        "score",
        "compare",
        "export",
        "import",
        "answer",
        "hard",
        "demo",
        "audit",
        "notebooks",
        "figures",
        "personafeedback",
        "recenter",
    ]:
        assert f"    {cmd}" in out.stdout, cmd

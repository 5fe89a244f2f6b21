"""The Qwen3-Embedding path of ``get_embedder`` on CPU, with a tiny randomly initialised Qwen3.

The folder is laid out as Qwen/Qwen3-Embedding-4B's is: a Qwen3 model, a byte-level BPE tokenizer whose
post-processor appends ``<|endoftext|>`` (also the pad token) with left padding, ``modules.json`` with
Transformer -> Pooling (last token) -> Normalize, and ``config_sentence_transformers.json`` with the
"query" instruction and an empty "document" prompt. Each vector pv4kit encodes in one padded batch is
compared with a plain transformers forward pass of that text alone (last position, L2-normalised).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tokenizers")

QUERY_PROMPT = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"
TEXTS = [
    "ok",
    "I weigh flour to the gram.",
    "Saving for my own pastry shop in Lyon, I count every euro and test each recipe three times.",
    "church band",
    "What would you bring on a two-day hike if you hate carrying a heavy pack and never cook outdoors?",
    "Bees.",
    "Night shifts in the ER, then an ultramarathon on Sunday: a week of mine, told without wellness fads.",
]


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(TEXTS * 3 + [QUERY_PROMPT], trainer=trainer)
    eot = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(
        single="$A <|endoftext|>",
        pair="$A <|endoftext|> $B:1 <|endoftext|>:1",
        special_tokens=[("<|endoftext|>", eot)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<|endoftext|>", eos_token="<|im_end|>", padding_side="left"
    )


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory):
    """A sentence-transformers folder of a tiny random Qwen3 in Qwen3-Embedding's layout."""
    import torch
    from transformers import Qwen3Config, Qwen3Model

    folder = tmp_path_factory.mktemp("tiny-qwen3-embedding")
    tokenizer = _tokenizer()
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        rope_theta=1_000_000.0,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = Qwen3Model(config).eval()
    with torch.no_grad():  # the default init (std 0.02) makes every text's vector nearly the same
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    pooling = {f"pooling_mode_{m}": False for m in ("cls_token", "mean_tokens", "max_tokens")}
    pooling.update(
        pooling_mode_mean_sqrt_len_tokens=False,
        pooling_mode_weightedmean_tokens=False,
        pooling_mode_lasttoken=True,
        include_prompt=True,
        word_embedding_dimension=64,
    )
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (folder / "2_Normalize").mkdir()
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 512, "do_lower_case": False})
    )
    _write_st_config(folder, default_prompt_name=None)
    return folder


def _write_st_config(folder, *, default_prompt_name):
    st_config = {
        "prompts": {"query": QUERY_PROMPT, "document": ""},
        "default_prompt_name": default_prompt_name,
        "similarity_fn_name": "cosine",
    }
    (folder / "config_sentence_transformers.json").write_text(json.dumps(st_config))


def _reference(folder, texts):
    """Each text alone through transformers: the last position's hidden state, L2-normalised."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, dtype=torch.float32).eval()
    out = []
    with torch.no_grad():
        for text in texts:
            ids = tok(text, return_tensors="pt")
            assert ids["input_ids"][0, -1].item() == tok.convert_tokens_to_ids("<|endoftext|>")
            hidden = model(**ids).last_hidden_state[0, -1]
            out.append(torch.nn.functional.normalize(hidden, dim=-1).numpy())
    return np.stack(out)


def _cosines(embedder, folder, texts, *, prefix=""):
    got = embedder.encode(texts, batch_size=len(texts))  # one batch: every shorter text is padded
    want = _reference(folder, [prefix + t for t in texts])
    got = got / np.linalg.norm(got, axis=1, keepdims=True)
    return np.sum(got * want, axis=1)


def test_tiny_qwen3_through_get_embedder_matches_a_per_text_forward(tiny_qwen3):
    from pv4kit.embeddings.models import get_embedder

    emb = get_embedder(str(tiny_qwen3), device="cpu")
    assert emb.dim == 64
    assert emb.model.tokenizer.padding_side == "left"  # pv4kit asks for it, as the model card does
    cos = _cosines(emb, tiny_qwen3, TEXTS)
    assert cos.min() >= 0.99999, cos


def test_right_padding_with_a_mask_blind_pooling_differs(tiny_qwen3):
    """The same check fails for a wrong recipe: right padding, then the last position whatever the mask."""
    import torch
    from sentence_transformers import SentenceTransformer

    from pv4kit.embeddings.models import SentenceTransformerEmbedder

    st = SentenceTransformer(
        str(tiny_qwen3),
        device="cpu",
        model_kwargs={"dtype": torch.float32, "attn_implementation": "sdpa"},
        processor_kwargs={"padding_side": "right"},
    )

    def last_position(features):
        features["sentence_embedding"] = features["token_embeddings"][:, -1]
        return features

    st[1].forward = last_position
    broken = SentenceTransformerEmbedder(st, name="broken")
    cos = _cosines(broken, tiny_qwen3, TEXTS)
    longest = int(np.argmax([len(ids) for ids in st.tokenizer(TEXTS)["input_ids"]]))
    assert cos[longest] >= 0.99999  # the unpadded text is still right ...
    assert cos.min() < 0.999, cos  # ... and the padded ones are not


def test_no_instruction_by_default_even_when_the_model_names_a_default_prompt(tiny_qwen3, tmp_path):
    """The reference embeds generations and candidates with no instruction; so does pv4kit's default."""
    import shutil

    from pv4kit.embeddings.models import get_embedder

    folder = tmp_path / "with-default-prompt"
    shutil.copytree(tiny_qwen3, folder)
    _write_st_config(folder, default_prompt_name="query")  # sentence-transformers would prepend it
    emb = get_embedder(str(folder), device="cpu")
    assert emb.model.default_prompt_name == "query"
    assert _cosines(emb, folder, TEXTS).min() >= 0.99999  # no prompt
    plain = emb.model.encode(TEXTS[:2], convert_to_numpy=True)  # sentence-transformers alone: prompted
    assert not np.allclose(plain, emb.encode(TEXTS[:2]), atol=1e-4)
    instructed = get_embedder(str(folder), device="cpu", instruction=QUERY_PROMPT)
    assert "instruction=" in instructed.cache_key and "instruction=" not in emb.cache_key
    assert _cosines(instructed, folder, TEXTS, prefix=QUERY_PROMPT).min() >= 0.99999


@pytest.mark.gpu
def test_tiny_qwen3_on_cuda_in_bf16_matches_the_fp32_forward(tiny_qwen3):
    """The GPU recipe (bf16, FlashAttention-2 when installed, else SDPA) against the fp32 CPU forward."""

    import torch

    from pv4kit.embeddings.models import get_embedder

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    emb = get_embedder(str(tiny_qwen3), device="cuda")
    assert emb.dtype == "bfloat16" and emb.devices == ["cuda:0"]
    try:  # the rule of get_embedder: FlashAttention-2 when flash-attn imports, else SDPA
        import flash_attn  # noqa: F401

        want = "flash_attention_2"
    except ImportError:
        want = "sdpa"
    assert emb.model[0].auto_model.config._attn_implementation == want
    cos = _cosines(emb, tiny_qwen3, TEXTS)
    assert cos.min() >= 0.999, cos  # bf16 rounding (0.9998 on CPU in bf16), not a wrong token or padding

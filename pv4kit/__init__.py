"""pv4kit: a notebook-first toolkit for the PersonalizationV4 (PV4) personalization benchmark.

``import pv4kit`` is cheap: the public functions below are resolved lazily from their modules on first
access, so heavy dependencies (torch, sentence-transformers, plotly, umap, openai) load only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (one module, one job; see docs/architecture.md)
_EXPORTS: dict[str, str] = {
    # raw tree, step 5, step 6, loader
    "read_user": "pv4kit.raw",
    "list_users": "pv4kit.raw",
    "read_chats": "pv4kit.raw",
    "validate_raw": "pv4kit.raw",
    "parse_qa_text": "pv4kit.questions",
    "build_question_table": "pv4kit.questions",
    "write_qa_tables": "pv4kit.questions",
    "split_indices": "pv4kit.splits",
    "build_dataset": "pv4kit.splits",
    "load": "pv4kit.data",
    "PV4Data": "pv4kit.data",
    # LLM client and generation (steps 1-4)
    "LLMConfig": "pv4kit.llm",
    "complete": "pv4kit.llm",
    "usage_frame": "pv4kit.llm",
    "GenerationConfig": "pv4kit.generate",
    "generate_users": "pv4kit.generate",
    "load_reference_prompts": "pv4kit.prompt_sets",
    "local_server": "pv4kit.localllm",
    # embeddings, runs, scoring, statistics
    "get_embedder": "pv4kit.embed",
    "embed_texts": "pv4kit.embed",
    "EmbeddingCache": "pv4kit.embcache",
    "write_generations": "pv4kit.runs",
    "read_generations": "pv4kit.runs",
    "read_run_config": "pv4kit.runs",
    "read_predictions": "pv4kit.runs",
    "read_metrics": "pv4kit.runs",
    "score_frame": "pv4kit.score",
    "score_run": "pv4kit.score",
    "compute_metrics": "pv4kit.score",
    "bootstrap_ci": "pv4kit.stats",
    "grouped_bootstrap_ci": "pv4kit.stats",
    "paired_bootstrap": "pv4kit.stats",
    "mcnemar_exact": "pv4kit.stats",
    "compare": "pv4kit.stats",
    "export_reference": "pv4kit.refformat",
    "import_reference": "pv4kit.refformat",
    # baselines and the hard subset
    "answer": "pv4kit.baselines",
    "retrieve": "pv4kit.retrieve",
    "build_messages": "pv4kit.prompting",
    "derive_hard_subset": "pv4kit.hard",
    "run_demo": "pv4kit.demo",
    # analysis
    "run_audit": "pv4kit.audit_report",
    "check_tags": "pv4kit.qatags",
    "write_audit": "pv4kit.audit_report",
    "letter_sequence_audit": "pv4kit.audit_sequence",
    "save_figure": "pv4kit.figures",
    "browser": "pv4kit.widgets",
    "execute_notebooks": "pv4kit.notebooks",
    "project_paths": "pv4kit.notebooks",
    # related benchmarks
    "bm25_scores": "pv4kit.bm25",
    "load_personafeedback": "pv4kit.related.personafeedback",
    "judge_pairs": "pv4kit.related.personafeedback",
    "judge_accuracy": "pv4kit.related.personafeedback",
    "reward_model_baseline": "pv4kit.related.reward_model",
    "pv4_pairs": "pv4kit.related.pv4_pairs",
    "cohen_kappa": "pv4kit.related.agreement",
    "fleiss_kappa": "pv4kit.related.agreement",
    "krippendorff_alpha": "pv4kit.related.agreement",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    """Resolve a public name lazily from the module that defines it."""
    module = _EXPORTS.get(name)
    if module is None:
        import difflib

        close = difflib.get_close_matches(name, list(_EXPORTS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise AttributeError(f"module 'pv4kit' has no attribute {name!r}{hint}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

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
    "read_user": "pv4kit.dataset.tree",
    "list_users": "pv4kit.dataset.tree",
    "read_chats": "pv4kit.dataset.tree",
    "validate_raw": "pv4kit.dataset.validate",
    "parse_qa_text": "pv4kit.dataset.questions",
    "build_question_table": "pv4kit.dataset.questions",
    "write_qa_tables": "pv4kit.dataset.questions",
    "split_indices": "pv4kit.dataset.splits",
    "build_dataset": "pv4kit.dataset.splits",
    "load": "pv4kit.dataset.load",
    "PV4Data": "pv4kit.dataset.load",
    # LLM client and generation (steps 1-4)
    "LLMConfig": "pv4kit.llm.client",
    "complete": "pv4kit.llm.client",
    "usage_frame": "pv4kit.llm.client",
    "GenerationConfig": "pv4kit.generation.steps",
    "generate_users": "pv4kit.generation.steps",
    "load_reference_prompts": "pv4kit.generation.prompt_sets",
    "local_server": "pv4kit.llm.local",
    # embeddings, runs, scoring, statistics
    "get_embedder": "pv4kit.embeddings.models",
    "get_audit_embedder": "pv4kit.embeddings.models",
    "embed_texts": "pv4kit.embeddings.models",
    "EmbeddingCache": "pv4kit.embeddings.cache",
    "write_generations": "pv4kit.scoring.runs",
    "read_generations": "pv4kit.scoring.runs",
    "read_run_config": "pv4kit.scoring.runs",
    "read_predictions": "pv4kit.scoring.runs",
    "read_metrics": "pv4kit.scoring.runs",
    "metrics_frame": "pv4kit.scoring.runs",
    "score_frame": "pv4kit.scoring.score",
    "score_run": "pv4kit.scoring.score",
    "compute_metrics": "pv4kit.scoring.score",
    "accuracy_table": "pv4kit.scoring.accuracy",
    "bootstrap_ci": "pv4kit.scoring.stats",
    "grouped_bootstrap_ci": "pv4kit.scoring.stats",
    "paired_bootstrap": "pv4kit.scoring.stats",
    "mcnemar_exact": "pv4kit.scoring.stats",
    "compare": "pv4kit.scoring.stats",
    "export_reference": "pv4kit.scoring.refformat",
    "import_reference": "pv4kit.scoring.refformat",
    # baselines and the hard subset
    "answer": "pv4kit.baselines.run",
    "AnswerOptions": "pv4kit.baselines.methods",
    "register_method": "pv4kit.baselines.methods",
    "retrieve": "pv4kit.baselines.retrieve",
    "build_messages": "pv4kit.baselines.prompting",
    "derive_hard_subset": "pv4kit.baselines.hard",
    "run_demo": "pv4kit.pipeline.demo",
    # analysis
    "run_audit": "pv4kit.analysis.audit_report",
    "check_tags": "pv4kit.dataset.qatags",
    "write_audit": "pv4kit.analysis.audit_report",
    "letter_sequence_audit": "pv4kit.analysis.audit_sequence",
    "save_figure": "pv4kit.analysis.figures",
    "save_figures": "pv4kit.analysis.figures",
    "browser": "pv4kit.analysis.widgets",
    "execute_notebooks": "pv4kit.analysis.notebooks",
    "project_paths": "pv4kit.analysis.notebooks",
    # related benchmarks
    "bm25_scores": "pv4kit.baselines.bm25",
    "load_personafeedback": "pv4kit.related.personafeedback.load",
    "judge_pairs": "pv4kit.related.personafeedback.judge",
    "judge_accuracy": "pv4kit.related.personafeedback.judge",
    "reward_model_baseline": "pv4kit.related.reward_model",
    "pv4_pairs": "pv4kit.related.pv4_pairs",
    "cohen_kappa": "pv4kit.related.agreement",
    "fleiss_kappa": "pv4kit.related.agreement",
    "krippendorff_alpha": "pv4kit.related.agreement",
}

__all__ = sorted([*_EXPORTS, "__version__"])

# the flat module names of pv4kit 0.1 -> where each module lives now; ``from pv4kit import plots`` still works
# (with a DeprecationWarning), ``import pv4kit.plots`` does not
_MOVED: dict[str, str] = {
    "attributes": "pv4kit.baselines.attributes",
    "audit": "pv4kit.analysis.audit",
    "audit_report": "pv4kit.analysis.audit_report",
    "audit_sequence": "pv4kit.analysis.audit_sequence",
    "bm25": "pv4kit.baselines.bm25",
    "chat_tokens": "pv4kit.baselines.tokens",
    "data": "pv4kit.dataset.load",
    "demo": "pv4kit.pipeline.demo",
    "embcache": "pv4kit.embeddings.cache",
    "embed": "pv4kit.embeddings.models",
    "embed_backends": "pv4kit.embeddings.backends",
    "embed_endpoint": "pv4kit.embeddings.endpoint",
    "failures": "pv4kit.scoring.failures",
    "figures": "pv4kit.analysis.figures",
    "gen_outputs": "pv4kit.generation.outputs",
    "generate": "pv4kit.generation.steps",
    "hard": "pv4kit.baselines.hard",
    "hub": "pv4kit.dataset.hub",
    "llm": "pv4kit.llm.client",
    "llm_store": "pv4kit.llm.store",
    "localllm": "pv4kit.llm.local",
    "notebooks": "pv4kit.analysis.notebooks",
    "numerics": "pv4kit.scoring.numerics",
    "plots": "pv4kit.analysis.plots",
    "prompt_sets": "pv4kit.generation.prompt_sets",
    "prompting": "pv4kit.baselines.prompting",
    "prompts": "pv4kit.generation.prompts",
    "qatags": "pv4kit.dataset.qatags",
    "questions": "pv4kit.dataset.questions",
    "raw": "pv4kit.dataset.raw",
    "refformat": "pv4kit.scoring.refformat",
    "retrieve": "pv4kit.baselines.retrieve",
    "runs": "pv4kit.scoring.runs",
    "samedata": "pv4kit.scoring.samedata",
    "score": "pv4kit.scoring.score",
    "splits": "pv4kit.dataset.splits",
    "stats": "pv4kit.scoring.stats",
    "truncation": "pv4kit.baselines.truncation",
    "widgets": "pv4kit.analysis.widgets",
}


def __getattr__(name: str) -> Any:
    """Resolve a public name lazily from the module that defines it."""
    module = _EXPORTS.get(name)
    if module is None and name in _MOVED:
        import warnings

        warnings.warn(
            f"pv4kit.{name} moved to {_MOVED[name]}; import it from there", DeprecationWarning, stacklevel=2
        )
        return importlib.import_module(_MOVED[name])
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

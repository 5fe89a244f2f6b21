"""pv4kit: a notebook-first toolkit for the PersonalizationV4 (PV4) personalization benchmark.

The public functions, imported plainly from their modules. ``import pv4kit`` loads pandas, numpy and pyarrow;
torch, sentence-transformers, plotly, umap and openai load inside the functions that use them;
:mod:`pv4kit.related` is not imported here.
"""

__version__ = "0.1.0"

from pv4kit.analysis import audit, plots
from pv4kit.analysis.audit import hard_subset_tables, letter_sequence_audit, run_audit, write_audit
from pv4kit.analysis.figures import browser_path, save_figure, save_figures
from pv4kit.analysis.notebooks import (
    execute_notebooks,
    load_notebook_data,
    load_scored_runs,
    project_paths,
    stack_runs,
)
from pv4kit.analysis.projection import with_category_umap, with_question_umap
from pv4kit.analysis.widgets import browser
from pv4kit.baselines.bm25 import bm25_scores
from pv4kit.baselines.hard import derive_hard_subset, with_fallback_subset
from pv4kit.baselines.methods import register_method
from pv4kit.baselines.prompting import build_messages
from pv4kit.baselines.retrieve import retrieve
from pv4kit.baselines.run import answer
from pv4kit.dataset.load import load
from pv4kit.dataset.qatags import check_tags
from pv4kit.dataset.questions import build_question_table, parse_qa_text, write_qa_tables
from pv4kit.dataset.splits import build_dataset, split_indices
from pv4kit.dataset.tree import list_users, read_chats, read_user
from pv4kit.dataset.validate import validate_raw
from pv4kit.embeddings.models import embed_texts, get_audit_embedder, get_embedder
from pv4kit.generation import prompts
from pv4kit.generation.defaults import estimate_user_cost
from pv4kit.generation.prompts import load_reference_prompts
from pv4kit.generation.steps import generate_users
from pv4kit.llm.client import complete
from pv4kit.llm.config import LLMConfig, endpoint_config
from pv4kit.llm.local import local_server
from pv4kit.llm.store import usage_frame, usage_summary
from pv4kit.pipeline.demo import run_demo
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.scoring.refformat import export_reference, import_reference
from pv4kit.scoring.runs import (
    metrics_frame,
    read_generations,
    read_metrics,
    read_predictions,
    read_run_config,
    write_generations,
)
from pv4kit.scoring.score import compute_metrics, score_frame, score_run
from pv4kit.scoring.stats import bootstrap_ci, compare, grouped_bootstrap_ci, mcnemar_exact, paired_bootstrap
from pv4kit.scoring.validity import read_validity, validity

__all__ = [
    "LLMConfig",
    "accuracy_table",
    "answer",
    "audit",
    "bm25_scores",
    "bootstrap_ci",
    "browser",
    "browser_path",
    "build_dataset",
    "build_messages",
    "build_question_table",
    "check_tags",
    "compare",
    "complete",
    "compute_metrics",
    "derive_hard_subset",
    "embed_texts",
    "endpoint_config",
    "estimate_user_cost",
    "execute_notebooks",
    "export_reference",
    "generate_users",
    "get_audit_embedder",
    "get_embedder",
    "grouped_bootstrap_ci",
    "hard_subset_tables",
    "import_reference",
    "letter_sequence_audit",
    "list_users",
    "load",
    "load_notebook_data",
    "load_reference_prompts",
    "load_scored_runs",
    "local_server",
    "mcnemar_exact",
    "metrics_frame",
    "paired_bootstrap",
    "parse_qa_text",
    "plots",
    "project_paths",
    "prompts",
    "read_chats",
    "read_generations",
    "read_metrics",
    "read_predictions",
    "read_run_config",
    "read_validity",
    "read_user",
    "register_method",
    "retrieve",
    "run_audit",
    "run_demo",
    "save_figure",
    "save_figures",
    "score_frame",
    "score_run",
    "split_indices",
    "stack_runs",
    "usage_frame",
    "usage_summary",
    "validate_raw",
    "validity",
    "with_category_umap",
    "with_fallback_subset",
    "with_question_umap",
    "write_audit",
    "write_generations",
    "write_qa_tables",
]

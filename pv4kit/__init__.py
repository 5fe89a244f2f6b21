"""pv4kit: a notebook-first toolkit for the PersonalizationV4 (PV4) personalization benchmark.

The functions the notebooks and docs call as ``pv4kit.<name>``. ``import pv4kit`` loads pandas, numpy and
pyarrow; torch, sentence-transformers, plotly, umap and openai load inside the functions that use them.
"""

__version__ = "0.1.0"

from pv4kit.analysis import audit, plots
from pv4kit.analysis.audit import hard_subset_tables, run_audit
from pv4kit.analysis.figures import browser_path, save_figures
from pv4kit.analysis.notebooks import load_notebook_data, load_scored_runs, project_paths, stack_runs
from pv4kit.analysis.projection import with_category_umap, with_question_umap
from pv4kit.analysis.widgets import browser
from pv4kit.baselines.hard import with_fallback_subset
from pv4kit.baselines.run import answer
from pv4kit.dataset.load import load
from pv4kit.dataset.splits import build_dataset
from pv4kit.embeddings.models import get_audit_embedder, get_embedder
from pv4kit.generation import prompts
from pv4kit.generation.defaults import estimate_user_cost
from pv4kit.generation.prompts import load_reference_prompts
from pv4kit.generation.steps import generate_users
from pv4kit.llm.config import LLMConfig, endpoint_config
from pv4kit.llm.store import usage_frame, usage_summary
from pv4kit.scoring.accuracy import accuracy_table
from pv4kit.scoring.runs import metrics_frame
from pv4kit.scoring.score import score_run
from pv4kit.scoring.stats import compare
from pv4kit.scoring.validity import read_validity, validity

__all__ = [
    "LLMConfig",
    "accuracy_table",
    "answer",
    "audit",
    "browser",
    "browser_path",
    "build_dataset",
    "compare",
    "endpoint_config",
    "estimate_user_cost",
    "generate_users",
    "get_audit_embedder",
    "get_embedder",
    "hard_subset_tables",
    "load",
    "load_notebook_data",
    "load_reference_prompts",
    "load_scored_runs",
    "metrics_frame",
    "plots",
    "project_paths",
    "prompts",
    "read_validity",
    "run_audit",
    "save_figures",
    "score_run",
    "stack_runs",
    "usage_frame",
    "usage_summary",
    "validity",
    "with_category_umap",
    "with_fallback_subset",
    "with_question_umap",
]

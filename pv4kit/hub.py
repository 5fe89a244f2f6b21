"""Getting datasets from the Hugging Face hub, with one clear error when that is impossible."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

_HUB_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def looks_like_hub_id(source: str | os.PathLike[str]) -> bool:
    """``True`` for ``owner/name`` strings that are not an existing local path."""
    text = str(source)
    return bool(_HUB_ID_RE.match(text)) and not Path(text).expanduser().exists()


def download_dataset(
    repo_id: str, *, allow_patterns: Sequence[str] | None = None, revision: str | None = None
) -> Path:
    """Download (or reuse the local snapshot of) a hub dataset and return its folder.

    Args:
        repo_id: The dataset id, ``owner/name``.
        allow_patterns: Only files matching these glob patterns (default: the whole repository).
        revision: Branch, tag or commit.

    Returns:
        The local snapshot folder.

    Raises:
        RuntimeError: When the download fails (offline, ``HF_HUB_OFFLINE=1``, gated, unknown id); the
            message says how to download by hand and pass the folder instead.
    """
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise RuntimeError("loading a hub id needs huggingface_hub: pip install huggingface-hub") from exc
    try:
        local = snapshot_download(
            repo_id, repo_type="dataset", revision=revision, allow_patterns=list(allow_patterns or []) or None
        )
    except Exception as exc:  # noqa: BLE001 - network, offline mode, auth, unknown repo: one clear error
        offline = (
            " (HF_HUB_OFFLINE is set)" if os.environ.get("HF_HUB_OFFLINE") not in (None, "", "0") else ""
        )
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise RuntimeError(
            f"could not get dataset {repo_id!r} from the Hugging Face hub{offline}: {type(exc).__name__}: "
            f"{first}. Offline or gated? Download it where the hub is reachable with `hf download {repo_id} "
            "--repo-type dataset --local-dir DIR` and pass DIR (a local folder) instead."
        ) from exc
    return Path(local)

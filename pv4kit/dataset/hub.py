"""Getting datasets from the Hugging Face hub, with one clear :class:`HubError` for each way that can fail."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

#: the id the PV4 dataset card loads (the default of :func:`pv4kit.load`)
PV4_HUB_ID = "MemoryAsModality/PersonalizationV4"
#: every known id of PV4: the card's, then the reference code's
PV4_HUB_IDS = (PV4_HUB_ID, "memorilla/PersonalizationV4")

# ``owner/name`` as huggingface_hub's validate_repo_id accepts it: word characters, '-' and '.', each
# part starting and ending with a word character, no '--' or '..', at most 96 characters, no '.git' end
_HUB_ID_RE = re.compile(r"^\w(?:[\w.-]*\w)?/\w(?:[\w.-]*\w)?$", re.ASCII)
# a name ending like a data file is a path the user meant, never a dataset id
_FILE_SUFFIXES = (".parquet", ".csv", ".tsv", ".json", ".jsonl", ".txt", ".arrow", ".gz", ".zip", ".sqlite")


class HubError(RuntimeError):
    """A hub dataset could not be downloaded (the subclasses say why)."""


class HubAccessError(HubError):
    """The dataset is gated (or private) and this machine's token has no access to it."""


class HubNotFoundError(HubError):
    """No dataset with this id (or revision) on the hub."""


class HubOfflineError(HubError):
    """``HF_HUB_OFFLINE`` is set and the dataset is not in the local hub cache."""


class HubUnreachableError(HubError):
    """The hub endpoint could not be reached (no network, refused connection, timeout)."""


def looks_like_hub_id(source: str | os.PathLike[str]) -> bool:
    """Whether ``source`` names a hub dataset (``owner/name``) rather than a local path.

    True for a ``str`` (never a ``Path``) that is a valid hub id, does not end like a data file
    (``.parquet``, ``.csv``, ...) and is not an existing local path.
    """
    if not isinstance(source, str):
        return False
    if len(source) > 96 or not _HUB_ID_RE.match(source) or "--" in source or ".." in source:
        return False
    return not source.lower().endswith((".git", *_FILE_SUFFIXES)) and not Path(source).expanduser().exists()


def _explain(repo_id: str, exc: BaseException, *, revision: str | None) -> HubError:
    """The one error that says what went wrong and what to do."""
    from huggingface_hub import HfApi, constants, errors
    from huggingface_hub.utils import OfflineModeIsEnabled

    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]

    def first(*types: type) -> BaseException | None:
        return next((e for e in chain if isinstance(e, types)), None)

    endpoint = constants.ENDPOINT.rstrip("/")
    head = f"could not get dataset {repo_id!r} from the Hugging Face hub"
    manual = (
        f"or download it where the hub is reachable with `hf download {repo_id} --repo-type dataset "
        "--local-dir DIR` and pass DIR (a local folder) instead"
    )
    if gated := first(errors.GatedRepoError):
        status = getattr(getattr(gated, "response", None), "status_code", None)
        why = (
            "HTTP 403: a token was sent but it has no access to it yet (access not requested, still "
            "pending, or the token is another account's)"
            if status == 403
            else f"HTTP {status or 401}: no token was sent (not logged in)"
        )
        return HubAccessError(
            f"{head}: it is gated ({why}). Request access on its page {endpoint}/datasets/{repo_id} (log in "
            "there and accept the terms), then authenticate here with `hf auth login` (or set HF_TOKEN to a "
            "token of that account) and run again."
        )
    if first(errors.RevisionNotFoundError):
        return HubNotFoundError(f"{head}: it has no revision {revision!r} on {endpoint}")
    if first(errors.RepositoryNotFoundError):
        found = None
        for other in PV4_HUB_IDS if repo_id.lower() in {i.lower() for i in PV4_HUB_IDS} else ():
            with contextlib.suppress(Exception):  # the other id of the same dataset: only a hint
                if other.lower() != repo_id.lower() and HfApi().repo_exists(other, repo_type="dataset"):
                    found = other
        hint = f' The same dataset exists as {found!r}: pv4kit.load("{found}").' if found else ""
        return HubNotFoundError(
            f"{head}: {repo_id!r} was not found on {endpoint} (or it is private and this machine's token "
            f"has no access; log in with `hf auth login`).{hint}"
        )
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    if offline or first(OfflineModeIsEnabled):
        return HubOfflineError(
            f"{head}: HF_HUB_OFFLINE is set and it is not in the local hub cache; unset "
            f"HF_HUB_OFFLINE where the hub is reachable, {manual}."
        )
    names = ("ConnectError", "ConnectTimeout", "ReadTimeout", "TimeoutException")
    unreachable = [
        e for e in chain if isinstance(e, (ConnectionError, TimeoutError)) or type(e).__name__ in names
    ]
    if unreachable or first(errors.LocalEntryNotFoundError):
        cause = (unreachable or chain)[0]
        return HubUnreachableError(
            f"{head}: cannot reach {endpoint} ({type(cause).__name__}: {_first_line(cause, 160)}); check the "
            f"network (and HF_ENDPOINT), {manual}."
        )
    exc = chain[0]
    return HubError(
        f"{head} at {endpoint}: {type(exc).__name__}: {_first_line(exc, 200)}. Try again, {manual}."
    )


def _first_line(exc: BaseException, width: int) -> str:
    return str(exc).splitlines()[0][:width] if str(exc) else ""


def download_dataset(
    repo_id: str,
    *,
    allow_patterns: Sequence[str] | None = None,
    revision: str | None = None,
) -> Path:
    """Download (or reuse the local snapshot of) a hub dataset and return its folder.

    When one of :data:`PV4_HUB_IDS` is not found, the message names the other if it exists.

    Raises:
        HubError: ``HubAccessError`` (gated or private), ``HubNotFoundError`` (id or revision),
            ``HubOfflineError``, ``HubUnreachableError`` or ``HubError``; each message says what to do.
    """
    from huggingface_hub import snapshot_download

    try:
        patterns = list(allow_patterns or []) or None
        local = snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=patterns)
    except Exception as exc:  # noqa: BLE001 - network, offline mode, auth, unknown repo: one clear error
        raise _explain(repo_id, exc, revision=revision) from exc
    return Path(local)

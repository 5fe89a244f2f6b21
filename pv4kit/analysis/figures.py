"""Write plotly figures into ``figures/``: interactive HTML always, static PNG/PDF through kaleido.

kaleido drives Debian's ``chromium`` (``make browser``; ``$BROWSER_PATH`` overrides); without one only HTML
is written, with one warning. MathJax is off unless a local copy exists (:func:`fetch_mathjax`). HTML pages
load one ``plotly.min.js`` from beside them. See docs/analysis.md.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tarfile
import uuid
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pv4kit._io import atomic_path, atomic_write_json, cache_root
from pv4kit.analysis.projection import package_version

logger = logging.getLogger(__name__)

FORMATS = ("html", "png", "pdf", "svg")
MATHJAX_VERSION = "3.2.2"
#: the record of each static file's inputs in a figures folder (see :func:`save_figures`)
STAMPS = ".pv4kit-figures.json"
_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def browser_path() -> str | None:
    """The Chromium executable kaleido will use: ``$BROWSER_PATH``, else the first on ``PATH``."""
    env = os.environ.get("BROWSER_PATH")
    if env and Path(env).exists():
        return env
    return next((found for name in _BROWSERS if (found := shutil.which(name))), None)


def static_export_available() -> bool:
    """Whether PNG/PDF export can work here (kaleido importable and a Chromium found)."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False
    return browser_path() is not None


def mathjax_path(cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """A local ``tex-svg.js``: ``$PV4KIT_MATHJAX``, else under ``cache_dir`` (``cache_root()/mathjax``)."""
    env = os.environ.get("PV4KIT_MATHJAX")
    if env and Path(env).is_file():
        return Path(env)
    roots = [Path(cache_dir) if cache_dir else cache_root() / "mathjax"]
    if cache_dir is None and not os.environ.get("PV4KIT_CACHE"):  # notebooks run in notebooks/
        roots.append(Path.cwd().parent / ".cache" / "pv4kit" / "mathjax")
    return next((p for r in roots if (p := r / "package" / "es5" / "tex-svg.js").is_file()), None)


def fetch_mathjax(cache_dir: str | os.PathLike[str] | None = None, *, timeout: float = 120.0) -> Path | None:
    """Vendor MathJax 3 for offline LaTeX in static exports (``npm pack mathjax@3.2.2`` into ``cache_dir``).

    Returns the path of ``tex-svg.js``, or ``None`` when npm is missing or the registry is unreachable.
    """
    if found := mathjax_path(cache_dir):
        return found
    if (npm := shutil.which("npm")) is None:
        logger.warning("npm not found; MathJax stays off (LaTeX in titles renders as raw text)")
        return None
    root = Path(cache_dir) if cache_dir else cache_root() / "mathjax"
    root.mkdir(parents=True, exist_ok=True)
    command = [npm, "pack", f"mathjax@{MATHJAX_VERSION}", "--silent"]
    try:
        out = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=timeout, check=True)
    except (OSError, subprocess.SubprocessError) as exc:  # no registry
        logger.warning("npm pack mathjax@%s failed (%s); MathJax stays off", MATHJAX_VERSION, exc)
        return None
    tgz = root / out.stdout.strip().splitlines()[-1]
    with tarfile.open(tgz) as tar:
        tar.extractall(root, filter="data")
    tgz.unlink(missing_ok=True)
    return mathjax_path(root)


def start_export_server(*, mathjax: str | os.PathLike[str] | bool | None = None) -> bool:
    """Start kaleido's persistent export server (idempotent); ``False`` when no browser is available.

    ``mathjax``: a local script, ``False`` for none, or ``None`` for :func:`mathjax_path`'s (never a CDN).
    """
    if not static_export_available():
        return False
    import kaleido

    if mathjax is None or mathjax is True:
        mathjax = mathjax_path() or False
    if not os.environ.get("BROWSER_PATH"):
        os.environ["BROWSER_PATH"] = browser_path() or ""
    # two tabs: a batch renders in parallel on two cores
    kaleido.start_sync_server(n=2, mathjax=str(mathjax) if mathjax else False, silence_warnings=True)
    return True


@functools.lru_cache(maxsize=1)
def _warn_html_only(reason: str) -> None:
    warnings.warn(
        f"static figure export is unavailable ({reason}); writing HTML only. Install Debian's chromium "
        "(`make browser` or `apt-get install chromium`) or set BROWSER_PATH for PNG/PDF.",
        RuntimeWarning,
        stacklevel=4,
    )


def save_figure(
    fig: Any,
    name: str,
    *,
    figures_dir: str | os.PathLike[str] = "figures",
    formats: Sequence[str] = ("html", "png", "pdf"),
    width: int | None = None,
    height: int | None = None,
    scale: float = 2.0,
) -> list[Path]:
    """Write the plotly ``fig`` as ``figures_dir/name.{html,png,pdf}`` (``name`` without extension).

    ``formats``: any of ``html``, ``png``, ``pdf``, ``svg`` (without kaleido and Chromium only HTML, with a
    warning). ``width``/``height``: static export size in px (default: the figure's layout, else 900 x 500);
    ``scale``: PNG pixel scale.
    """
    return _save({name: fig}, figures_dir, formats, width=width, height=height, scale=scale, force=None)


def save_figures(
    figures: Mapping[str, Any],
    *,
    figures_dir: str | os.PathLike[str] = "figures",
    formats: Sequence[str] = ("html", "png", "pdf"),
    scale: float = 2.0,
    force: bool = False,
) -> list[Path]:
    """Write every figure of ``figures`` (name -> ``Figure``) as :func:`save_figure` does, in one batch.

    A static file is rendered again only when its inputs (figure, options, plotly, kaleido, browser) or the
    file changed (``figures_dir/.pv4kit-figures.json``); ``force=True`` renders them all. This saves 27 s in
    notebook 07 at release size on 2 cores (``benchmarks/bench_notebooks.py``). A failed render is logged and
    left out; HTML is always written. Returns the paths written or up to date, in the order of ``figures``.
    """
    return _save(figures, figures_dir, formats, width=None, height=None, scale=scale, force=force)


def _save(
    figures: Mapping[str, Any],
    figures_dir: Any,
    formats: Sequence[str],
    *,
    width: int | None,
    height: int | None,
    scale: float,
    force: bool | None,
) -> list[Path]:
    """Both savers; ``force=None``: no record of what the files were made from (:func:`save_figure`)."""
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"formats: unknown format(s) {bad}; allowed {FORMATS}")
    for name in figures:
        if not name or "/" in name or name.endswith(tuple(f".{f}" for f in FORMATS)):
            raise ValueError(f"name: expected a file stem without folder or extension, got {name!r}")
    out_dir = Path(figures_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    targets = {(name, fmt): out_dir / f"{name}.{fmt}" for name in figures for fmt in formats}
    for name, fig in figures.items() if "html" in formats else ():
        with atomic_path(targets[name, "html"]) as tmp:
            fig.write_html(tmp, include_plotlyjs="directory", full_html=True)
    keep = force is not None and set(formats) != {"html"}  # save_figures records what files were made from
    stamps = _read_stamps(out_dir) if keep else {}
    jsons = {name: fig.to_json() for name, fig in figures.items()} if keep else {}
    jobs = []
    for (name, fmt), final in targets.items():
        if fmt == "html":
            continue
        fig = figures[name]
        w, h = width or fig.layout.width or 900, height or fig.layout.height or 500
        opts = {"format": fmt, "width": w, "height": h, "scale": scale if fmt == "png" else 1}
        key = _stamp_key(jsons[name], opts) if keep else ""
        if force is not False or not (final.is_file() and stamps.get(final.name) == _stamp(final, key)):
            jobs.append((name, final, key, fig, opts))
    made: set[Path] = set()
    if jobs and not static_export_available():
        _warn_html_only("no Chromium found" if browser_path() is None else "kaleido is not installed")
    elif jobs and start_export_server():
        made = _render(jobs, out_dir=out_dir)
        if made and keep:
            stamps |= {final.name: _stamp(final, key) for _, final, key, *_ in jobs if final in made}
            atomic_write_json(out_dir / STAMPS, stamps)
    missing = {final for _, final, *_ in jobs} - made
    paths = [p for p in targets.values() if p not in missing]
    logger.info(
        "%d files for %d figure(s) in %s (%d static rendered)", len(paths), len(figures), out_dir, len(jobs)
    )
    return paths


def _read_stamps(out_dir: Path) -> dict[str, Any]:
    try:
        stamps = json.loads((out_dir / STAMPS).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("%s unreadable (%s); every static figure is rendered again", out_dir / STAMPS, exc)
        return {}
    return stamps if isinstance(stamps, dict) else {}


def _stamp_key(fig_json: str, opts: dict[str, Any]) -> str:
    meta = {"opts": opts, **{d: package_version(d) for d in ("plotly", "kaleido")}, "browser": browser_path()}
    digest = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    digest.update(fig_json.encode())
    return digest.hexdigest()


def _stamp(final: Path, key: str) -> dict[str, Any]:
    """What :func:`save_figures` records of a static file: the hash of its inputs, its size and time."""
    st = final.stat()
    return {"key": key, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _render(jobs: list[tuple], *, out_dir: Path) -> set[Path]:
    """Render every job in one kaleido call into temporary files, then rename them; the files made."""
    import kaleido

    token = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    dicts: dict[str, Any] = {}
    temps = [out_dir / f".{final.stem}.{token}{final.suffix}" for _, final, *_ in jobs]
    specs = [
        {"fig": dicts.setdefault(name, fig.to_dict()), "path": str(tmp), "opts": opts}
        for (name, _, _, fig, opts), tmp in zip(jobs, temps, strict=True)
    ]
    try:
        errors = kaleido.write_fig_from_object_sync(specs, cancel_on_error=False)
    except Exception as exc:  # noqa: BLE001 - a broken browser must not lose the HTML
        errors = (exc,)
    made = set()
    for (_, final, *_), tmp in zip(jobs, temps, strict=True):
        if tmp.is_file() and tmp.stat().st_size > 0:
            os.replace(tmp, final)
            made.add(final)
        else:
            tmp.unlink(missing_ok=True)
            logger.warning("static export of %s failed; its HTML is kept", final.name)
    if errors:
        _warn_html_only(f"kaleido failed: {type(errors[0]).__name__}: {str(errors[0])[:200]}")
    return made

"""Write plotly figures into ``figures/``: interactive HTML always, static PNG and PDF through kaleido.

The recipe that works offline (see ``docs/analysis.md``):

* **Browser.** kaleido 1.x drives a headless Chromium through choreographer. pv4kit uses Debian's
  ``chromium`` (``apt-get install chromium``; ``make browser``); ``$BROWSER_PATH`` overrides the lookup.
  kaleido's ``get_chrome`` (a download) is never called. Without a browser :func:`save_figure` writes
  HTML only and warns once per process.
* **One export server per process.** The first static export starts ``kaleido.start_sync_server`` (about
  2-3 s); later exports take about 0.2 s each. The server is kaleido's own singleton, closed at exit
  (or by :func:`stop_export_server`).
* **MathJax.** kaleido loads MathJax from a CDN by default, which stalls offline. pv4kit's figures use
  no LaTeX, so MathJax is **off** unless a local copy exists: :func:`fetch_mathjax` runs
  ``npm pack mathjax@3.2.2`` into ``mathjax/`` under pv4kit's cache root (``$PV4KIT_CACHE``, else
  ``.cache/pv4kit/``, git-ignored) when npm is available, and :func:`mathjax_path` finds it there (or
  at ``$PV4KIT_MATHJAX``).
* **HTML** is written with ``include_plotlyjs="directory"``: one ``plotly.min.js`` beside the pages, so
  every page works offline and stays small.
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
from pv4kit.analysis.fitcache import package_version

logger = logging.getLogger(__name__)

FORMATS = ("html", "png", "pdf", "svg")
MATHJAX_VERSION = "3.2.2"
_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def browser_path() -> str | None:
    """The Chromium executable kaleido will use: ``$BROWSER_PATH``, else the first on ``PATH``."""
    env = os.environ.get("BROWSER_PATH")
    if env and Path(env).exists():
        return env
    for name in _BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def static_export_available() -> bool:
    """Whether PNG/PDF export can work here (kaleido importable and a Chromium found)."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False
    return browser_path() is not None


def _default_mathjax_dir() -> Path:
    """``mathjax/`` under pv4kit's one cache root (:func:`pv4kit._io.cache_root`)."""
    return cache_root() / "mathjax"


def mathjax_path(cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """A local ``tex-svg.js`` (``$PV4KIT_MATHJAX``, else under ``cache_dir``), or ``None``."""
    env = os.environ.get("PV4KIT_MATHJAX")
    if env and Path(env).is_file():
        return Path(env)
    roots = [Path(cache_dir)] if cache_dir else [_default_mathjax_dir()]
    # notebooks run with cwd = notebooks/: look one folder up as well
    if cache_dir is None and not os.environ.get("PV4KIT_CACHE"):
        roots.append(Path.cwd().parent / ".cache" / "pv4kit" / "mathjax")
    for root in roots:
        candidate = root / "package" / "es5" / "tex-svg.js"
        if candidate.is_file():
            return candidate
    return None


def fetch_mathjax(cache_dir: str | os.PathLike[str] | None = None, *, timeout: float = 120.0) -> Path | None:
    """Vendor MathJax 3 for offline LaTeX in static exports (``npm pack mathjax@3.2.2``).

    Args:
        cache_dir: Where to unpack (default ``mathjax/`` under :func:`pv4kit._io.cache_root`).
        timeout: Seconds for ``npm pack``.

    Returns:
        The path of ``tex-svg.js``, or ``None`` when npm is missing or the registry is unreachable.
    """
    found = mathjax_path(cache_dir)
    if found:
        return found
    npm = shutil.which("npm")
    if npm is None:
        logger.warning("npm not found; MathJax stays off (LaTeX in titles renders as raw text)")
        return None
    root = Path(cache_dir) if cache_dir else _default_mathjax_dir()
    root.mkdir(parents=True, exist_ok=True)
    try:
        out = subprocess.run(
            [npm, "pack", f"mathjax@{MATHJAX_VERSION}", "--silent"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        logger.warning("npm pack mathjax@%s failed (%s); MathJax stays off", MATHJAX_VERSION, exc)
        return None
    tgz = root / out.stdout.strip().splitlines()[-1]
    with tarfile.open(tgz) as tar:
        tar.extractall(root, filter="data")
    tgz.unlink(missing_ok=True)
    return mathjax_path(root)


def start_export_server(*, mathjax: str | os.PathLike[str] | bool | None = None) -> bool:
    """Start kaleido's persistent export server (idempotent); ``False`` when no browser is available.

    Args:
        mathjax: A local MathJax script, ``False`` for none, or ``None`` to use :func:`mathjax_path`
            when it finds one (else none). A CDN is never used.
    """
    if not static_export_available():
        return False
    import kaleido

    if mathjax is None or mathjax is True:
        mathjax = mathjax_path() or False
    # two tabs: save_figures renders its batch in parallel on two cores; single calls are unchanged
    kwargs: dict[str, Any] = {"n": 2, "mathjax": str(mathjax) if mathjax else False}
    if browser_path() and not os.environ.get("BROWSER_PATH"):
        os.environ["BROWSER_PATH"] = browser_path() or ""
    kaleido.start_sync_server(silence_warnings=True, **kwargs)
    return True


def stop_export_server() -> None:
    """Stop kaleido's export server if it runs (it is also stopped at interpreter exit)."""
    try:
        import kaleido
    except ImportError:
        return
    kaleido.stop_sync_server(silence_warnings=True)


@functools.lru_cache(maxsize=1)
def _warn_html_only(reason: str) -> None:
    warnings.warn(
        f"static figure export is unavailable ({reason}); writing HTML only. Install Debian's chromium "
        "(`make browser` or `apt-get install chromium`) or set BROWSER_PATH for PNG/PDF.",
        RuntimeWarning,
        stacklevel=3,
    )


def _check_figure_args(name: str, formats: Sequence[str]) -> None:
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"formats: unknown format(s) {bad}; allowed {FORMATS}")
    if not name or "/" in name or name.endswith(tuple(f".{f}" for f in FORMATS)):
        raise ValueError(f"name: expected a file stem without folder or extension, got {name!r}")


def _write_html(fig: Any, path: Path) -> Path:
    with atomic_path(path) as tmp:
        # "directory" makes the page load plotly.min.js from beside it; write it there once
        fig.write_html(tmp, include_plotlyjs="directory", full_html=True)
    return path


def _static_opts(
    fig: Any, fmt: str, *, width: int | None, height: int | None, scale: float
) -> dict[str, Any]:
    layout = fig.layout
    w = width or layout.width or 900
    h = height or layout.height or 500
    return {"format": fmt, "width": w, "height": h, "scale": scale if fmt == "png" else 1}


def _static_ready(static: Sequence[str]) -> bool:
    """Whether static formats can be written now (starting the export server); warns once if not."""
    if not static:
        return False
    if not static_export_available():
        _warn_html_only("no Chromium found" if browser_path() is None else "kaleido is not installed")
        return False
    start_export_server()
    return True


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
    """Write ``fig`` as ``figures_dir/name.{html,png,pdf}``.

    Args:
        fig: A plotly ``Figure``.
        name: File stem (no extension), e.g. ``"category_balance"``.
        figures_dir: Output folder (created if needed).
        formats: Any of ``html``, ``png``, ``pdf``, ``svg``. Static formats need kaleido and Chromium;
            without them only HTML is written and one warning is issued per process.
        width: Static export width in px (default: the figure's layout width, else 900).
        height: Static export height in px (default: the figure's layout height, else 500).
        scale: PNG pixel scale.

    Returns:
        The paths written.
    """
    _check_figure_args(name, formats)
    out_dir = Path(figures_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if "html" in formats:
        written.append(_write_html(fig, out_dir / f"{name}.html"))
    static = [f for f in formats if f != "html"]
    if not _static_ready(static):
        return written
    import kaleido

    fig_dict = fig.to_dict()
    for fmt in static:
        path = out_dir / f"{name}.{fmt}"
        try:
            data = kaleido.calc_fig_sync(
                fig_dict, opts=_static_opts(fig, fmt, width=width, height=height, scale=scale)
            )
        except Exception as exc:  # noqa: BLE001 - a broken browser must not lose the HTML
            _warn_html_only(f"kaleido failed: {type(exc).__name__}: {str(exc)[:200]}")
            return written
        with atomic_path(path) as tmp:
            tmp.write_bytes(data)
        written.append(path)
    logger.info("wrote %s", ", ".join(p.name for p in written))
    return written


def save_figures(
    figures: Mapping[str, Any],
    *,
    figures_dir: str | os.PathLike[str] = "figures",
    formats: Sequence[str] = ("html", "png", "pdf"),
    scale: float = 2.0,
    force: bool = False,
) -> list[Path]:
    """Write every figure of ``figures`` (name -> plotly ``Figure``) as :func:`save_figure` does, at once.

    The static files are rendered in one batch through kaleido's export server (its tabs work in
    parallel), not one call per file: 17 figures as PNG and PDF took 35 s one by one at release size on
    two cores, 27 s in one batch. Each file is written under a temporary name and renamed when complete;
    a render that fails is logged and its file left out, with the figure's other files and every HTML
    page kept.

    A static file is only rendered again when it would change: ``figures_dir/.pv4kit-figures.json``
    records, per file, the SHA-256 of the figure's JSON, its export options and the plotly, kaleido and
    browser it was made with, and the file's size and modification time. A file whose record matches
    is kept as it is (and no browser is started when every file is up to date); ``force=True``
    renders them all. HTML pages are always written.

    Returns:
        The paths written or found up to date, figure by figure in the order of ``figures``.
    """
    for name in figures:
        _check_figure_args(name, formats)
    out_dir = Path(figures_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[Path]] = {name: [] for name in figures}
    if "html" in formats:
        for name, fig in figures.items():
            written[name].append(_write_html(fig, out_dir / f"{name}.html"))
    static = [f for f in formats if f != "html"]
    stamps = _read_stamps(out_dir)
    jobs = []
    for name, fig in figures.items():
        if not static:
            break
        fig_json = fig.to_json()
        for fmt in static:
            final = out_dir / f"{name}.{fmt}"
            opts = _static_opts(fig, fmt, width=None, height=None, scale=scale)
            key = _stamp_key(fig_json, opts)
            if not force and _up_to_date(final, stamps.get(final.name), key):
                written[name].append(final)
            else:
                jobs.append((name, final, key, fig, opts))
    if jobs and _static_ready(static):
        keys = {final.name: key for _, final, key, _, _ in jobs}
        made = _render_static_batch(jobs, out_dir=out_dir, written=written)
        for final in made:
            st = final.stat()
            stamps[final.name] = {"key": keys[final.name], "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if made:
            atomic_write_json(out_dir / STAMPS, stamps)
    paths = [p for name in figures for p in sorted(written[name], key=lambda p: _order(p, formats))]
    logger.info(
        "%d files for %d figures in %s (%d static rendered)", len(paths), len(figures), out_dir, len(jobs)
    )
    return paths


#: the record of each static file's inputs in a figures folder (see :func:`save_figures`)
STAMPS = ".pv4kit-figures.json"


def _order(path: Path, formats: Sequence[str]) -> int:
    return list(formats).index(path.suffix.lstrip("."))


def _read_stamps(out_dir: Path) -> dict[str, Any]:
    path = out_dir / STAMPS
    try:
        stamps = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("%s unreadable (%s); every static figure is rendered again", path, exc)
        return {}
    return stamps if isinstance(stamps, dict) else {}


def _stamp_key(fig_json: str, opts: dict[str, Any]) -> str:
    versions = {d: package_version(d) for d in ("plotly", "kaleido")}
    meta = {"opts": opts, **versions, "browser": browser_path()}
    digest = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    digest.update(fig_json.encode())
    return digest.hexdigest()


def _up_to_date(final: Path, stamp: Any, key: str) -> bool:
    if not isinstance(stamp, dict) or stamp.get("key") != key:
        return False
    try:
        st = final.stat()
    except OSError:
        return False
    return stamp.get("size") == st.st_size and stamp.get("mtime_ns") == st.st_mtime_ns


def _render_static_batch(jobs: list[tuple], *, out_dir: Path, written: dict[str, list[Path]]) -> list[Path]:
    """Render every job in one kaleido call into temporary files, then rename them; the files made."""
    import kaleido

    token = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    specs, temps = [], []
    dicts: dict[str, Any] = {}
    for name, final, _key, fig, opts in jobs:
        fig_dict = dicts.setdefault(name, fig.to_dict())
        tmp = out_dir / f".{final.stem}.{token}{final.suffix}"
        specs.append({"fig": fig_dict, "path": str(tmp), "opts": opts})
        temps.append(tmp)
    try:
        errors = kaleido.write_fig_from_object_sync(specs, cancel_on_error=False)
    except Exception as exc:  # noqa: BLE001 - a broken browser must not lose the HTML
        errors = (exc,)
    made = []
    for (name, final, *_), tmp in zip(jobs, temps, strict=True):
        if tmp.is_file() and tmp.stat().st_size > 0:
            os.replace(tmp, final)
            written[name].append(final)
            made.append(final)
        else:
            tmp.unlink(missing_ok=True)
            logger.warning("static export of %s failed; its HTML is kept", final.name)
    if errors:
        first = errors[0]
        _warn_html_only(f"kaleido failed: {type(first).__name__}: {str(first)[:200]}")
    return made

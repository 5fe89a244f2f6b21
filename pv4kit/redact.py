"""Credentials out of URLs: the one helper pv4kit uses wherever it writes or prints an endpoint.

A base URL may carry a secret: user info (``http://user:secret@host/v1``) or a key-like query parameter
(``?api_key=...``, ``?token=...``, ``?sig=...``). :func:`redact_url` replaces both by ``***`` and keeps the
rest (scheme, host, port, path, other parameters) as given; :func:`redact_text` does the same for every
URL inside a message. Run configs, manifests, logs and error messages hold only the redacted form; the
request itself still uses the URL as given. The LLM cache key never holds the URL at all.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
#: query parameter names whose value is a secret (matched case-insensitively, anywhere in the name)
_SECRET_PARAM = re.compile(
    r"key|token|secret|passw|pwd|auth|sig|signature|credential|session|code", re.IGNORECASE
)
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]{}]+")


def _redact_query(query: str) -> str:
    parts = []
    for item in query.split("&"):
        name, sep, value = item.partition("=")
        parts.append(f"{name}={MASK}" if sep and value and _SECRET_PARAM.search(name) else item)
    return "&".join(parts)


def redact_url(url: str | None) -> str | None:
    """``url`` without user info and without the values of key-like query parameters.

    Args:
        url: A URL (``None`` passes through; a string that is not a URL comes back unchanged).

    Returns:
        The URL with ``user:password@`` replaced by ``***@`` and each secret-looking query value by ``***``.

    Example:
        >>> redact_url("http://me:pw@127.0.0.1:8000/v1?api_key=abc&x=1")
        'http://***@127.0.0.1:8000/v1?api_key=***&x=1'
    """
    if url is None:
        return None
    text = str(url)
    try:
        parts = urlsplit(text)
    except ValueError:  # e.g. an invalid IPv6 literal: hide everything between :// and the path
        return re.sub(r"(://)[^/]*@", rf"\1{MASK}@", text)
    if not parts.scheme or not parts.netloc:
        return text
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = _redact_query(parts.query) if parts.query else parts.query
    if netloc == parts.netloc and query == parts.query:
        return text
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """``text`` with every URL in it passed through :func:`redact_url`."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)) or "", text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts URLs in every record's message (attached by the command line)."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102 - see the class docstring
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken record is logging's problem, not ours
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True

"""Credentials out of URLs wherever pv4kit writes or prints an endpoint (requests use the URL as given)."""

from __future__ import annotations

import contextlib
import logging
import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
#: query parameter names whose value is a secret (matched case-insensitively, anywhere in the name)
_SECRET_PARAM = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session|code", re.IGNORECASE)
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]{}]+")


def redact_url(url: str | None) -> str | None:
    """``url`` with ``***`` for its user info and the values of key-like query parameters.

    ``None`` passes through; a string that is not a URL comes back unchanged.

    Example:
        >>> redact_url("http://me:pw@127.0.0.1:8000/v1?api_key=abc&x=1")
        'http://***@127.0.0.1:8000/v1?api_key=***&x=1'
    """
    if url is None:
        return None
    try:
        parts = urlsplit(str(url))
    except ValueError:  # e.g. an invalid IPv6 literal: hide everything between :// and the path
        return re.sub(r"(://)[^/]*@", rf"\1{MASK}@", str(url))
    if not parts.scheme or not parts.netloc:
        return str(url)
    netloc = f"{MASK}@{parts.netloc.rpartition('@')[2]}" if "@" in parts.netloc else parts.netloc
    query = "&".join(
        f"{name}={MASK}" if sep and value and _SECRET_PARAM.search(name) else f"{name}{sep}{value}"
        for name, sep, value in (item.partition("=") for item in parts.query.split("&"))
    )
    if netloc == parts.netloc and query == parts.query:
        return str(url)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """``text`` with every URL in it passed through :func:`redact_url`."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)) or "", text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts URLs in every record's message (attached by the command line)."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102 - see the class docstring
        with contextlib.suppress(Exception):  # a broken record is logging's problem, not ours
            message = record.getMessage()
            if redact_text(message) != message:
                record.msg, record.args = redact_text(message), None
        return True

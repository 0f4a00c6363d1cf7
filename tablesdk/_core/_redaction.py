"""Keeping secrets out of logs, reprs and errors.

The secrets are the account key's signature in ``Authorization``, a bearer token, and
the ``sig`` of a SAS. :func:`redact_url` and :func:`redact_text` hide them in URLs and
free text; :func:`attempt_secrets` gathers one attempt's secrets into a pattern that
:func:`scrub`, :func:`scrub_error` and :func:`scrub_headers` remove from what a server
echoes back, however it re-escapes them; :func:`install_log_filter` makes urllib3's
DEBUG lines (which carry the request's path and query) pass through the same redaction.

It imports nothing above the exception hierarchy, so every layer that writes a URL,
a header or a message where a person may read it (the transport, :mod:`tablesdk._pipeline._http`'s
reprs, the command line) uses these and no copy of them.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from ._patterns import pattern_on_first_use

if TYPE_CHECKING:
    import logging

__all__ = [
    "SecretPattern",
    "attempt_secrets",
    "install_log_filter",
    "library_logger",
    "redact_text",
    "redact_url",
    "redact_userinfo",
    "scrub",
    "scrub_error",
    "scrub_headers",
    "shorten",
    "strip_query",
]


_sig_in_url = pattern_on_first_use(r"([?&]sig=)[^&#]*", re.IGNORECASE)
_query_in_text = pattern_on_first_use(r"((?:https?://|/)[^\s?'\"]*)\?[^\s'\")]*")

_REDACTED = "REDACTED"
#: The user information of a URL (``http://user:password@proxy:3128``): a proxy's credentials.
_userinfo_in_url = pattern_on_first_use(r"([a-z][a-z0-9+.-]*://)[^/\s@'\"<>]+@", re.IGNORECASE)


def _letter(ch: str) -> str:
    """A letter of a marker's name in either case, or percent-escaped (once or more: ``%73``,
    ``%2573``), or as a JSON ``\\u0073`` escape. The pattern is compiled case-insensitively."""
    codes = "|".join(sorted({f"{ord(ch.lower()):02x}", f"{ord(ch.upper()):02x}"}))
    return rf"(?:{re.escape(ch)}|%(?:25)*(?:{codes})|\\u00(?:{codes}))"


# Where a marker's name may start: not inside a word, or right after an escape (``%26sig=``,
# ``\u0026sig=``: an ampersand of a percent-encoded URL or of a JSON string).
_START = r"(?:(?<![a-z0-9_])|(?<=%[0-9a-f]{2})|(?<=%25[0-9a-f]{2})|(?<=%2525[0-9a-f]{2})|(?<=\\u[0-9a-f]{4}))"
_EQUALS = r"(?:=|%(?:25)*3d|\\u003d)"
_SPACE = r"(?:[ \t]|\+|%(?:25)*20)"
_SIG = "".join(_letter(c) for c in "sig")
_AUTHORIZATION = rf"{_START}authorization[\"']?\s*(?::|=|%(?:25)*3a|%(?:25)*3d)\s*[\"']?"
# A character reference, as XML or HTML may write a reserved character (``&#43;``, ``&#x2B;``).
_CHAR_REF = r"&#(?:[0-9]{1,7}|x[0-9a-f]{1,6});"
# A credential (bearer token, Shared Key ``account:signature``), escaped or not: never holds a
# space, a quote or markup.
_CREDENTIAL = rf"(?:[^\s'\"<>,;&]|{_CHAR_REF})+"
# A character of base64 in either alphabet ('+' and '/', or '-' and '_'), possibly escaped
# (percent, JSON's ``\/`` and ``\u002b``, a character reference), and its padding.
_BASE64_CHAR = r"(?:[a-z0-9+/_-]|%(?:25)*(?:2[bdf]|5f)|\\/|\\u00(?:2[bdf]|5f)|&#(?:0*(?:43|45|47|95)|x0*(?:2[bdf]|5f));)"
_BASE64_PAD = r"(?:=|%(?:25)*3d|\\u003d|&#(?:61|x3d);)"

# Every spelling of a secret that announces itself, each with the words (lower-cased, escapes
# undone) that a text holding it must hold. Each alternative's first group is what is kept; the rest
# of the match is the secret.
_MARKED_ALTERNATIVES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    # An Authorization header echoed with its name: the credential after a known scheme,
    # else the whole value (an unknown scheme and its credential).
    (("authorization",), (
        rf"({_AUTHORIZATION}(?:bearer|sharedkeylite|sharedkey){_SPACE}+){_CREDENTIAL}",
        rf"({_AUTHORIZATION})(?:[^\s'\"<>,;&]+{_SPACE}+)?{_CREDENTIAL}",
    )),
    # An Authorization value alone: the credential after its scheme.
    (("bearer", "sharedkey"), (rf"({_START}(?:bearer|sharedkeylite|sharedkey){_SPACE}+){_CREDENTIAL}",)),
    # A connection string's account key.
    (("accountkey",), (rf"({_START}accountkey\s*{_EQUALS})(?:[^\s'\"<>;&]|{_CHAR_REF})*",)),
    (("sig",), (
        # A SAS ``sig`` parameter, its name and '=' in any case and escaping, in a URL that may itself be escaped.
        rf"({_START}{_SIG}{_EQUALS})(?:[^&#\s'\"<>)]|{_CHAR_REF})*",
        # ``sig`` as a JSON member or an XML element.
        rf"(\"{_SIG}\"\s*:\s*\")[^\"]*",
        rf"(<{_SIG}>)[^<]*",
    )),
    # An account key alone: 64 bytes in base64 (86 characters and '=='), possibly escaped.
    (("==", "&#61;", "&#x3d;"), (rf"()(?<![a-z0-9+/%]){_BASE64_CHAR}{{86}}{_BASE64_PAD}{{2}}",)),
)
# A pattern of the alternatives a text may hold, by which of their words it holds (a bit each),
# compiled case-insensitively on first use: the alternatives cost time at every position of the
# text, and most texts that hold one word ("Authorization header", "signature") hold no other.
_marked_patterns: dict[int, re.Pattern[str]] = {}
#: Every alternative's words: a text that holds none of them (the common case, one test) holds no marked secret.
_MARKER_WORDS = tuple(word for words, _ in _MARKED_ALTERNATIVES for word in words)


def _marked_pattern(readings: list[str]) -> re.Pattern[str] | None:
    """The pattern of the announced secrets a text whose :func:`_readings` are ``readings`` may
    hold (a cheap first look: a few substring tests), or None when it holds none."""
    if not any(word in reading for reading in readings for word in _MARKER_WORDS):
        return None
    present = 0
    for bit, (words, _) in enumerate(_MARKED_ALTERNATIVES):
        if any(word in reading for reading in readings for word in words):
            present |= 1 << bit
    pattern = _marked_patterns.get(present)
    if pattern is None:
        chosen = [alt for bit, (_, alts) in enumerate(_MARKED_ALTERNATIVES) if present >> bit & 1 for alt in alts]
        pattern = _marked_patterns[present] = re.compile("|".join(chosen), re.IGNORECASE)
    return pattern
# An escaped letter, digit or '=' (or an escaped '%', the start of a second escape): only a
# text holding one can hide a word, or a secret's letters and digits, from a substring test.
# Two patterns, each starting with one literal character, which re scans for quickly. Applied to
# lower-cased text.
_percent_escaped_alnum = pattern_on_first_use(r"%(?:25|3[0-9d]|[4-7][0-9a-f])")
_unicode_escaped_alnum = pattern_on_first_use(r"\\u00[3-7][0-9a-f]")
_unicode_escape = pattern_on_first_use(r"\\u([0-9a-f]{4})")


def _has_escaped_alnum(lowered: str) -> bool:
    return _percent_escaped_alnum().search(lowered) is not None or (
        "\\u00" in lowered and _unicode_escaped_alnum().search(lowered) is not None
    )


def _readings(text: str) -> list[str]:
    """``text`` lower-cased, then with its escapes undone once, twice, three times (a URL quoted
    in another is escaped twice), as far as it holds an escaped letter, digit or '='."""
    lowered = text.lower()
    readings = [lowered]
    for _ in range(3):
        if not _has_escaped_alnum(lowered):
            break
        decoded = unquote(lowered) if "%" in lowered else lowered
        if "\\u" in decoded:
            decoded = _unicode_escape().sub(lambda m: chr(int(m.group(1), 16)), decoded)
        if decoded == lowered:
            break
        lowered = decoded.lower()
        readings.append(lowered)
    return readings


def _keep_marker(match: re.Match[str]) -> str:
    return next(group for group in match.groups() if group is not None) + _REDACTED


def redact_marked(text: str) -> str:
    """``text`` with every secret that announces itself replaced by ``REDACTED``.

    Such a secret follows ``sig=`` (a SAS signature), ``Bearer`` or ``SharedKey`` (an
    ``Authorization`` value), ``Authorization:`` or ``AccountKey=``, in any case, and with
    the name, the ``=`` and the value percent-escaped once or more (a URL quoted inside
    another URL) or JSON-escaped; an account key is also recognised alone (86 base64
    characters and ``==``). The name is kept, so the reader sees what was hidden.
    """
    pattern = _marked_pattern(_readings(text)) if text else None
    return text if pattern is None else pattern.sub(_keep_marker, text)


def redact_url(url: str) -> str:
    """Return ``url`` with the value of any ``sig`` query parameter replaced by ``REDACTED``.

    Use it wherever a URL may reach a log, a repr or an exception: a SAS
    signature is a bearer secret.
    """
    return _sig_in_url().sub(r"\1" + _REDACTED, url)


def redact_userinfo(text: str) -> str:
    """``text`` with the user information of every URL in it (a proxy's user name and password)
    replaced by ``REDACTED``: ``http://REDACTED@proxy:3128``."""
    if "@" not in text:
        return text
    return _userinfo_in_url().sub(rf"\1{_REDACTED}@", text)


def redact_text(text: str) -> str:
    """Redact marked secrets (:func:`redact_marked`), the user information of URLs (a proxy's
    credentials) and drop query strings of URLs found in free ``text``."""
    text = redact_userinfo(redact_marked(text))
    return _query_in_text().sub(r"\1?...", text)


def strip_query(url: str) -> str:
    """``url`` without its query and fragment: what an error message or a repr may show of it."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class _RedactingFilter:
    """Rewrites third-party log records (urllib3 logs request paths) to hide SAS signatures.

    A plain object with ``filter``, which logging accepts as a filter: subclassing
    ``logging.Filter`` would import logging with ``import tablesdk`` (start-up)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is not ours to fix
            return True
        redacted = redact_userinfo(redact_marked(message))
        if redacted != message:
            record.msg = redacted
            record.args = ()
        return True


_THIRD_PARTY_LOGGERS = ("urllib3.connectionpool", "urllib3.util.retry", "urllib3.connection", "urllib3.poolmanager")
_FILTER = _RedactingFilter()


def install_log_filter() -> None:
    """Put the redacting filter on urllib3's loggers (once; every transport calls this)."""
    import logging

    for name in _THIRD_PARTY_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


_null_handler_added = False


def library_logger(name: str) -> logging.Logger:
    """The logger ``name`` (``tablesdk`` or below it) for the code that logs.

    ``import tablesdk`` does not import logging (start-up): the loggers are made by
    the code that logs, when it is first used (the transport, the emulator), and the
    first of them puts a ``NullHandler`` on ``tablesdk``, as a library should: nothing
    reaches stderr unless the application configures logging. Every record of the
    package goes through a logger made here, so it finds that handler in place.
    """
    global _null_handler_added
    import logging

    if not _null_handler_added:
        logging.getLogger("tablesdk").addHandler(logging.NullHandler())
        _null_handler_added = True
    return logging.getLogger(name)


def _get_header(headers: dict[str, str], name: str) -> str | None:
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return value
    return None


def attempt_secrets(headers: dict[str, str], url: str) -> SecretPattern | None:
    """One pattern matching every secret of this attempt, however a server re-escapes it.

    The secrets are the ``Authorization`` value and its signature and the SAS
    ``sig``; a server may echo them decoded, as sent, or with its own
    percent-escapes (``%2b`` for ``%2B``, or every character escaped: ``%61`` for
    ``a``), so each character matches itself or its escape in either case.
    """
    found: list[str] = []
    auth = _get_header(headers, "Authorization")
    if auth:
        found.append(auth)
        credential = auth.split(" ", 1)[-1]
        found.append(credential)
        if ":" in credential:
            found.append(credential.rsplit(":", 1)[1])
    for param in urlsplit(url).query.split("&"):
        name, _, value = param.partition("=")
        if name.lower() == "sig" and value:
            found.append(unquote(value))
    # Longest first, so a whole header is replaced before its parts; skip tiny values.
    secrets = sorted({s for s in found if len(s) >= 8}, key=len, reverse=True)
    if not secrets:
        return None
    return SecretPattern(secrets)


_alnum_run = pattern_on_first_use(r"[A-Za-z0-9]+")


class SecretPattern:
    """The secrets of one attempt as a pattern, compiled only for a text that may hold one.

    Compiling costs about a millisecond and is needed per attempt (signatures
    differ), while answers almost never echo a secret. ASCII letters and digits
    match only themselves in every escaping, so a text can hold a secret only if
    it holds that secret's longest run of them, in some case, once its escapes are
    undone: that substring test comes first. The pattern ignores case: a secret a
    server echoes upper- or lower-cased leaks nearly all of it.
    """

    __slots__ = ("_secrets", "_needles", "_pattern")

    def __init__(self, secrets: list[str]) -> None:
        self._secrets = secrets
        self._needles = [max(_alnum_run().findall(secret) or [""], key=len).lower() for secret in secrets]
        self._pattern: re.Pattern[str] | None = None

    def _holds_needle(self, readings: list[str]) -> bool:
        # A server may percent-encode every character, letters and digits too (%61 for 'a'),
        # and a URL quoted in another is escaped twice (%2561): the readings undo that.
        return any(needle in reading for reading in readings for needle in self._needles)

    def _compiled(self, text: str) -> re.Pattern[str] | None:
        if not self._holds_needle(_readings(text)):
            return None
        if self._pattern is None:
            self._pattern = re.compile("|".join(_any_escaping(secret) for secret in self._secrets), re.IGNORECASE)
        return self._pattern

    def may_hold(self, text: str) -> bool:
        """False when ``text`` cannot hold a secret (it lacks every secret's longest run of
        letters and digits, in any case and escaping)."""
        return self._holds_needle(_readings(text))

    def search(self, text: str) -> re.Match[str] | None:
        """Where a secret occurs in ``text``, or None."""
        pattern = self._compiled(text)
        return None if pattern is None else pattern.search(text)

    def sub(self, replacement: str, text: str) -> str:
        """``text`` with every secret replaced."""
        pattern = self._compiled(text)
        return text if pattern is None else pattern.sub(replacement, text)


def _hex_digit(digit: str) -> str:
    """A hex digit of an escape, in either case, or itself escaped (``%32`` for ``2``)."""
    forms = {digit.upper(), digit.lower()}
    return "(?:" + "|".join(sorted(f"{re.escape(f)}|%{ord(f):02X}|%{ord(f):02x}" for f in forms)) + ")"


def _escape_of(ch: str) -> str:
    """``ch`` percent-escaped, the escape's own characters possibly escaped again (``%2B``,
    ``%2b``, ``%252B``, ``%25%32%42``: a URL echoed with every character escaped)."""
    code = f"{ord(ch):02X}"
    high, low = code[0], code[1]
    return f"(?:%|%25)(?:{_hex_digit(high)})(?:{_hex_digit(low)})"


#: What else a server may write for these characters of a secret: form encoding's space for '+',
#: the URL-safe base64 alphabet ('-' and '_'), JSON's ``\/``.
_OTHER_SPELLINGS = {"+": ["-", " "], "/": ["_", r"\\/"]}


def _reserved_spellings(ch: str) -> str:
    """``ch`` (not a letter or digit) as itself, percent-escaped, JSON's ``\\u`` escape, a
    character reference in decimal or hex, or one of its :data:`_OTHER_SPELLINGS`."""
    forms = _escapings(ch)
    for other in _OTHER_SPELLINGS.get(ch, []):
        forms += _escapings(other) if len(other) == 1 else [other]
    return "(?:" + "|".join(forms) + ")"


def _escapings(ch: str) -> list[str]:
    code = ord(ch)
    return [re.escape(ch), _escape_of(ch), rf"\\u{code:04x}", rf"&#0*{code};", rf"&#x0*{code:x};"]


def _any_escaping(secret: str) -> str:
    # Base64's padding may be left off (the URL-safe alphabet often is).
    body = secret.rstrip("=")
    parts: list[str] = []
    for ch in body:
        if ord(ch) >= 256:
            parts.append(re.escape(ch))
        elif ch.isascii() and ch.isalnum():  # itself, or escaped by a server that escapes everything
            parts.append(f"(?:{ch}|{_escape_of(ch)})")
        else:
            parts.append(_reserved_spellings(ch))
    padding = len(secret) - len(body)
    if padding:
        parts.append(f"{_reserved_spellings('=')}{{0,{padding}}}")
    return "".join(parts)


def scrub(text: str, secrets: SecretPattern | None) -> str:
    """``text`` without the attempt's ``secrets`` and without any marked secret (:func:`redact_marked`)."""
    if secrets is not None:
        text = secrets.sub(_REDACTED, text)
    return redact_marked(text)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``...``, at a space.

    A cut inside a word is moved to the space before it: a server may echo a secret bare
    (no marker names it) and only a pattern of the whole secret finds it, so a cut through
    it would leave its start behind, out of reach of every pattern. Every secret is one word
    (none holds a space; a form-decoded ``+`` is a space, so redact before cutting where the
    attempt's secrets are known).
    """
    if len(text) <= limit:
        return text
    end = limit - 3
    if not text[end].isspace():
        while end > 0 and not text[end - 1].isspace():
            end -= 1
    return text[:end].rstrip() + "..."


def _scrubbed(value: object, secrets: SecretPattern | None) -> object:
    return scrub(value, secrets) if isinstance(value, str) else value


def scrub_error(error: BaseException, secrets: SecretPattern | None) -> None:
    """Scrub, in place, everything of ``error`` a server's answer filled in.

    A server may echo a secret in its error code (the body's code element or
    ``x-ms-error-code``), its message, its request id, or a batch's inner answer:
    the code, message, ids, a decode error's reason and excerpt, the arguments and the
    error a batch error wraps (``cause``) are all scrubbed. Every error built from a
    server's answer passes through here before anyone reads it.
    """
    for name in ("message", "error_code", "request_id", "client_request_id", "reason", "excerpt"):
        value = getattr(error, name, None)
        if isinstance(value, str):
            cleaned = scrub(value, secrets)
            if cleaned != value:
                setattr(error, name, cleaned)
    error.args = tuple(_scrubbed(a, secrets) for a in error.args)
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException) and cause is not error:
        scrub_error(cause, secrets)


def scrub_headers(headers: MutableMapping[str, str], secrets: SecretPattern | None) -> None:
    """Redact secrets a server echoed in any response header (request id, error code, ...).

    Everything downstream (request ids in errors, logs, recorded attempts and
    operation results) reads the headers, so the retry loop calls this on every answer.
    """
    # One look at all the values first: an answer almost never echoes a secret, and neither
    # a secret's letters-and-digits run nor a marker can span the line break between two values.
    readings = _readings("\n".join(headers.values()))
    if _marked_pattern(readings) is None and (secrets is None or not secrets._holds_needle(readings)):
        return
    for name, value in list(headers.items()):
        cleaned = scrub(value, secrets)
        if cleaned != value:
            headers[name] = cleaned

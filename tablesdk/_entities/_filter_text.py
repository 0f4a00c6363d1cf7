"""``$filter`` text checked on the client: which property names a filter can hold, and raw strings.

The Table service answers a malformed ``$filter`` with a bare ``400 InvalidInput``
that does not say where, and compares a property only with a literal of its own
EDM type: ``Priority gt '2'`` on an Int32 property is a valid query that silently
matches nothing. This module reads the subset of OData the service accepts so
that such filters fail before they are sent, with the position of the error:

    expr       := and_expr ( "or" and_expr )*
    and_expr   := unary ( "and" unary )*
    unary      := "not" unary | comparison
    comparison := operand ( ("eq"|"ne"|"gt"|"ge"|"lt"|"le") operand )?
    operand    := "(" expr ")" | literal | property

Literals: ``'text'`` (a quote inside doubled), ``42`` (Edm.Int32), ``42L``
(Edm.Int64), ``1.5``/``1e3``/``2d`` (Edm.Double), ``true``/``false``,
``datetime'2024-01-02T03:04:05Z'``, ``guid'...'``, ``X'0aff'``/``binary'0aff'``.
Literal keywords are lower case; operators are read in any case. Where parameters
are allowed (:func:`parameter_uses`), ``@name`` outside quotes is an operand too,
bound to a literal before the text is sent (:mod:`tablesdk._entities._filter_params`).
It is written for the client: the bundled emulator has its own parser
(``tablesdk/devstore/_filter.py``), which the tests use as an oracle; neither
imports the other.

A property name a filter can hold is an OData identifier: a letter (Unicode
categories L*, Nl) or ``_``, then letters, digits (Nd) or ``_``, and not a
keyword or literal of the filter language (``and``, ``eq``, ``true``, ``null``
...). The service stores other names (``and``, ``K`` followed by a combining
grave accent), but no filter can name them: ``true eq 1`` is read as the literal
``true``.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Mapping

from ._edm import EdmType
from .._core._errors import TableValidationError
from .._core._patterns import pattern_on_first_use

__all__ = [
    "FILTER_KEYWORDS", "ParameterUse", "filter_name_problem", "check_filter_text", "check_literal_type",
    "parameter_uses",
]

_COMPARISONS = frozenset({"eq", "ne", "gt", "ge", "lt", "le"})
#: Words the filter language reads as operators or literals, never as property names.
FILTER_KEYWORDS = frozenset(_COMPARISONS | {"and", "or", "not", "true", "false", "null"})
_LEADING = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nl"})
_FOLLOWING = _LEADING | {"Nd"}
_MAX_NESTING = 64
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _is_leading(char: str) -> bool:
    return char == "_" or unicodedata.category(char) in _LEADING


def _is_following(char: str) -> bool:
    return char == "_" or unicodedata.category(char) in _FOLLOWING


def filter_name_problem(name: str) -> str | None:
    """Why no ``$filter`` can name the property ``name``, or None when one can."""
    if not name:
        return "an empty name"
    if name in FILTER_KEYWORDS:
        return f"{name!r} is a keyword of the filter language"
    if not _is_leading(name[0]):
        return f"it starts with {name[0]!r} (U+{ord(name[0]):04X}), not a letter or '_'"
    if name.isascii():
        bad = next((c for c in name if not (c.isalnum() or c == "_")), None)
    else:
        bad = next((c for c in name[1:] if not _is_following(c)), None)
    if bad is not None:
        return (f"it holds {bad!r} (U+{ord(bad):04X}, {unicodedata.category(bad)}), "
                "not a letter, digit or '_' of an OData identifier")
    return None


# ---------------------------------------------------------------- raw text


class _Token:
    # A plain class, not a dataclass: each dataclass costs ``import tablesdk`` about 0.5 ms (start-up).

    __slots__ = ("kind", "text", "position", "edm_type")

    def __init__(self, kind: str, text: str, position: int, edm_type: EdmType | None = None) -> None:
        self.kind = kind  # "(" ")" "word" "literal" "parameter" "end"
        self.text = text
        self.position = position
        self.edm_type = edm_type


class _FilterSyntaxError(Exception):
    def __init__(self, reason: str, position: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.position = position


_number = pattern_on_first_use(r"-?(?:[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)([A-Za-z]?)")
_datetime = pattern_on_first_use(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,7})?)?(?:Z|[+-]\d{2}:\d{2})?\Z")
_hex = pattern_on_first_use(r"(?:[0-9A-Fa-f]{2})*\Z")


_TYPED = {"datetime": EdmType.DATETIME, "guid": EdmType.GUID, "X": EdmType.BINARY, "binary": EdmType.BINARY}


def _quoted(text: str, start: int) -> tuple[str, int]:
    """The content of the quoted literal opening at ``start`` and the index after it."""
    index, parts = start + 1, []
    while True:
        end = text.find("'", index)
        if end < 0:
            raise _FilterSyntaxError("a quoted literal is not closed", start)
        parts.append(text[index:end])
        if text.startswith("'", end + 1):
            parts.append("'")
            index = end + 2
            continue
        return "".join(parts), end + 1


def _typed_literal(prefix: str, content: str, position: int) -> EdmType:
    edm_type = _TYPED[prefix]
    valid = (
        _datetime().match(content) is not None if edm_type is EdmType.DATETIME
        else _hex().match(content) is not None if edm_type is EdmType.BINARY
        else _is_guid(content)
    )
    if not valid:
        raise _FilterSyntaxError(f"{prefix}'{content[:40]}' is not a valid {edm_type.value} literal", position)
    return edm_type


def _is_guid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return len(text) == 36


def _number_type(match: re.Match[str], position: int) -> EdmType:
    text, suffix = match.group(0), match.group(1)
    digits = text[: len(text) - len(suffix)]
    integral = not any(c in digits for c in ".eE")
    if suffix in ("L", "l"):
        if not integral or len(digits) > 21 or not _INT64_MIN <= int(digits) <= _INT64_MAX:
            raise _FilterSyntaxError(f"{text} is not an Edm.Int64 literal", position)
        return EdmType.INT64
    if suffix in ("D", "d") or (not suffix and not integral):
        return EdmType.DOUBLE
    if suffix:
        raise _FilterSyntaxError(f"{text}: the suffix {suffix!r} is no type of the Table service", position)
    if len(digits) > 12 or not _INT32_MIN <= int(digits) <= _INT32_MAX:
        raise _FilterSyntaxError(f"{text} does not fit Edm.Int32 (write {text}L for an Edm.Int64)", position)
    return EdmType.INT32


def _tokens(text: str, parameters: bool = False) -> list[_Token]:
    """The tokens of ``text``; ``@name`` outside quotes is a parameter token when ``parameters``."""
    tokens: list[_Token] = []
    index, length = 0, len(text)
    while index < length:
        char = text[index]
        if char in " \t\r\n":
            index += 1
        elif char in "()":
            tokens.append(_Token(char, char, index))
            index += 1
        elif char == "'":
            content, end = _quoted(text, index)
            tokens.append(_Token("literal", content, index, EdmType.STRING))
            index = end
        elif char.isdigit() or char == "." or (char == "-" and text[index + 1:index + 2].isdigit()):
            match = _number().match(text, index)
            if match is None or match.end() < length and _is_following(text[match.end()]):
                raise _FilterSyntaxError("a malformed number", index)
            tokens.append(_Token("literal", match.group(0), index, _number_type(match, index)))
            index = match.end()
        elif _is_leading(char):
            end = index + 1
            while end < length and _is_following(text[end]):
                end += 1
            word = text[index:end]
            if end < length and text[end] == "'":
                if word not in _TYPED:
                    raise _FilterSyntaxError(f"{word}'...' is no literal of the Table service", index)
                content, after = _quoted(text, end)
                tokens.append(_Token("literal", content, index, _typed_literal(word, content, index)))
                index = after
                continue
            if text[end:].lstrip(" \t\r\n").startswith("(") and word.lower() not in ("not", "and", "or"):
                raise _FilterSyntaxError(f"functions such as {word}() are not supported by the Table service", index)
            if word in ("true", "false"):
                tokens.append(_Token("literal", word, index, EdmType.BOOLEAN))
            else:
                tokens.append(_Token("word", word, index))
            index = end
        elif char == "@":
            end = index + 1
            if end < length and _is_leading(text[end]):
                end += 1
                while end < length and _is_following(text[end]):
                    end += 1
            if end == index + 1:
                raise _FilterSyntaxError("'@' starts a parameter, and a parameter is '@' then a name (an identifier)", index)
            if not parameters:
                name = text[index + 1:end]
                raise _FilterSyntaxError(
                    f"{text[index:end]} is a parameter and no parameters were given (pass parameters={{{name!r}: ...}})",
                    index,
                )
            tokens.append(_Token("parameter", text[index:end], index))
            index = end
        else:
            raise _FilterSyntaxError(f"unexpected character {char!r}", index)
    tokens.append(_Token("end", "", length))
    return tokens


class _Operand:
    __slots__ = ("token", "is_property")

    def __init__(self, token: _Token, is_property: bool) -> None:
        self.token = token
        self.is_property = is_property


class _Parser:
    """Recursive descent over the tokens; records each (property, literal type, position) compared."""

    def __init__(self, text: str, parameters: bool = False) -> None:
        self.tokens = _tokens(text, parameters)
        self.index = 0
        self.depth = 0
        self.compared: list[tuple[str, EdmType, int]] = []
        self.parameters: dict[int, ParameterUse] = {}  # by position

    def peek(self) -> _Token:
        return self.tokens[self.index]

    def take(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def is_word(self, word: str) -> bool:
        # Operators in any case: the comparison counter (_filter) has always read them so, and
        # a client-side check must never refuse a filter the service may accept.
        token = self.peek()
        return token.kind == "word" and token.text.lower() == word

    def parse(self) -> None:
        self.expr()
        token = self.peek()
        if token.kind != "end":
            raise _FilterSyntaxError(f"expected 'and', 'or' or the end, found {token.text!r}", token.position)

    def expr(self) -> None:
        self.and_expr()
        while self.is_word("or"):
            self.take()
            self.and_expr()

    def and_expr(self) -> None:
        self.unary()
        while self.is_word("and"):
            self.take()
            self.unary()

    def unary(self) -> None:
        if self.is_word("not"):
            token = self.take()
            self._nest(token.position)
            self.unary()
            self.depth -= 1
            return
        self.comparison()

    def comparison(self) -> None:
        left = self.operand()
        token = self.peek()
        if token.kind == "word" and token.text.lower() in _COMPARISONS:
            self.take()
            right = self.operand()
            if left is None or right is None:
                where = token.position
                raise _FilterSyntaxError(f"'{token.text}' compares a property with a literal, not an expression",
                                         where)
            self._compared(left, right, token)

    def _compared(self, left: _Operand, right: _Operand, operator: _Token) -> None:
        for one, other in ((left, right), (right, left)):
            if one.is_property and other.token.edm_type is not None:
                self.compared.append((one.token.text, other.token.edm_type, other.token.position))
            if one.is_property and other.token.kind == "parameter":
                use = self.parameters[other.token.position]
                use.property_name = one.token.text

    def operand(self) -> _Operand | None:
        """The operand read, or None for a parenthesized expression."""
        token = self.take()
        if token.kind == "(":
            self._nest(token.position)
            self.expr()
            closing = self.take()
            if closing.kind != ")":
                raise _FilterSyntaxError(f"expected ')', found {closing.text or 'the end'!r}", closing.position)
            self.depth -= 1
            return None
        if token.kind == "literal":
            return _Operand(token, False)
        if token.kind == "parameter":
            self.parameters[token.position] = ParameterUse(token.text[1:], token.position, None)
            return _Operand(token, False)
        if token.kind == "word":
            if token.text in FILTER_KEYWORDS:
                raise _FilterSyntaxError(f"expected a property or a literal, found the keyword {token.text!r}",
                                         token.position)
            if self.peek().kind == "(":
                raise _FilterSyntaxError(f"functions such as {token.text}() are not supported by the Table service",
                                         token.position)
            return _Operand(token, True)
        found = "the end" if token.kind == "end" else repr(token.text)
        raise _FilterSyntaxError(f"expected a property or a literal, found {found}", token.position)

    def _nest(self, position: int) -> None:
        self.depth += 1
        if self.depth > _MAX_NESTING:
            raise _FilterSyntaxError(f"nested deeper than {_MAX_NESTING}", position)


class ParameterUse:
    """Where raw ``$filter`` text names a parameter: ``@name`` at ``position``, compared with the
    property ``property_name`` (None when it stands alone or against a literal or a parameter)."""

    __slots__ = ("name", "position", "property_name")

    def __init__(self, name: str, position: int, property_name: str | None) -> None:
        self.name = name
        self.position = position
        self.property_name = property_name

    @property
    def end(self) -> int:
        """The index just after ``@name`` in the text."""
        return self.position + 1 + len(self.name)

    def __repr__(self) -> str:
        return f"ParameterUse({self.name!r}, {self.position}, {self.property_name!r})"


def parameter_uses(text: str) -> list[ParameterUse]:
    """Each ``@name`` of raw ``$filter`` text outside its quoted literals, in order of position.

    Raises :class:`~tablesdk._core._errors.TableValidationError` where the text (with its
    parameters read as literals) is no ``$filter``, as :func:`check_filter_text` does.
    """
    parser = _parsed(text, parameters=True)
    return [parser.parameters[position] for position in sorted(parser.parameters)]


def property_names_of(text: str) -> set[str]:
    """The property names raw ``$filter`` text compares (its words that are no keyword or operator);
    text that does not tokenize names none (:func:`check_filter_text` reports it)."""
    try:
        tokens = _tokens(text)
    except _FilterSyntaxError:
        return set()
    operators = {"and", "or", "not", *_COMPARISONS}
    return {t.text for t in tokens if t.kind == "word" and t.text.lower() not in operators and t.text not in FILTER_KEYWORDS}


def _pointing(text: str, position: int) -> str:
    """``text`` around ``position``, with a marker where the error is."""
    start = max(0, position - 30)
    before = ("..." if start else "") + text[start:position]
    after = text[position:position + 30] + ("..." if position + 30 < len(text) else "")
    return f"{before}<HERE>{after}"


def _parsed(text: str, parameters: bool = False) -> _Parser:
    """``text`` parsed, or :class:`TableValidationError` with the position of its syntax error."""
    try:
        parser = _Parser(text, parameters)
        parser.parse()
    except _FilterSyntaxError as exc:
        raise TableValidationError(
            "$filter", f"{exc.reason} at position {exc.position}", _pointing(text, exc.position)
        ) from None
    return parser


def check_filter_text(text: str, declared: Mapping[str, EdmType] | None = None) -> None:
    """Raise :class:`~tablesdk._core._errors.TableValidationError` if ``text`` is no ``$filter`` the
    service reads as meant: a syntax error (with its position), or, when ``declared`` maps
    property names to their declared types, a literal of another type than its property's."""
    parser = _parsed(text)
    for name, edm_type, position in parser.compared:
        expected = _declared_type(name, declared)
        if expected is not None and expected is not edm_type:
            raise TableValidationError(
                name,
                f"the property is {expected.value} and the literal at position {position} is {edm_type.value} "
                "(the service compares a property only with a literal of its type: this matches nothing)",
                _pointing(text, position),
            )


_SYSTEM = {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "Timestamp": EdmType.DATETIME}


def _declared_type(name: str, declared: Mapping[str, EdmType] | None) -> EdmType | None:
    if name in _SYSTEM:
        return _SYSTEM[name]
    return declared.get(name) if declared else None


def check_literal_type(name: str, literal_type: EdmType, declared: Mapping[str, EdmType] | None) -> None:
    """The declared-type check of :func:`check_filter_text` for one comparison the builder made."""
    expected = _declared_type(name, declared)
    if expected is not None and expected is not literal_type:
        raise TableValidationError(
            name,
            f"the property is {expected.value} and the literal is {literal_type.value} "
            "(the service compares a property only with a literal of its type: this matches nothing)",
        )

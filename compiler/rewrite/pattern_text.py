"""Op-tree patterns as text, in the spirit of GTT's OpTypePattern: `Mul(Conv2D(*, Const), Const)`.

Grammar (whitespace is free)::

    pattern := [NAME "="] term
    term    := "*"                          any value (as the root: any op, operands unchecked)
             | TYPES                        an op of these types, operands unchecked
             | TYPES "(" [pattern {"," pattern}] ")"   ... with exactly these operands, in order
    TYPES   := IDENT {"|" IDENT}            alternatives, e.g. BiasAdd|Add|AddV2

`Const` matches a constant value, looking through Identity ops (frozen Keras
graphs read every weight through one), and binds the Const op.  `NAME=`
binds what the term matched, for `Match[NAME]`, `Match.op(NAME)` and
`Match.value(NAME)`.  The text parses to the same `op`/`const`/`any_value`
objects the Python form builds, so both forms match identically.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from compiler.rewrite.pattern import AnyValue, ConstPattern, OpPattern, Pattern, any_value, const, op

_TOKEN = re.compile(r"\s*(?:(?P<ident>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>[*|()=,]))")


class PatternSyntaxError(ValueError):
    """A text pattern that does not parse; the message shows the pattern and the column."""


@dataclass(frozen=True)
class _Token:
    text: str
    column: int  # 1-based


def parse_pattern(text: str) -> OpPattern:
    """The pattern `text` describes; its root is always an op pattern."""
    parser = _Parser(text)
    root = parser.pattern()
    parser.expect_end()
    if isinstance(root, AnyValue):
        return op("*", name=root.name)
    if isinstance(root, ConstPattern):
        return op("Const", name=root.name)
    return root  # type: ignore[return-value]


def format_pattern(pattern: Pattern) -> str:
    """The text form of a pattern (the inverse of parse_pattern, for reports and error messages)."""
    prefix = f"{pattern.name}=" if getattr(pattern, "name", None) else ""
    if isinstance(pattern, AnyValue):
        return prefix + "*"
    if isinstance(pattern, ConstPattern):
        return prefix + "Const"
    assert isinstance(pattern, OpPattern)
    types = "*" if pattern.types is None else "|".join(sorted(pattern.types))
    if pattern.inputs is None:
        return prefix + types
    return prefix + types + "(" + ", ".join(format_pattern(p) for p in pattern.inputs) + ")"


class _Parser:
    """Recursive descent over the token list; every error names the column it stopped at."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = self._tokenize(text)
        self.pos = 0

    def _tokenize(self, text: str) -> list[_Token]:
        tokens, at = [], 0
        while at < len(text):
            found = _TOKEN.match(text, at)
            if found is None:
                if text[at:].strip() == "":
                    break
                column = at + len(text[at:]) - len(text[at:].lstrip()) + 1
                self._fail(f"unexpected character '{text[column - 1]}'", column)
            kind = "ident" if found.group("ident") else "punct"
            tokens.append(_Token(found.group(kind), found.start(kind) + 1))
            at = found.end()
        return tokens

    def _fail(self, message: str, column: Optional[int] = None) -> None:
        where = column if column is not None else self._column()
        raise PatternSyntaxError(f"pattern '{self.text}': {message} at column {where}")

    def _column(self) -> int:
        return self.tokens[self.pos].column if self.pos < len(self.tokens) else len(self.text) + 1

    def _peek(self) -> Optional[str]:
        return self.tokens[self.pos].text if self.pos < len(self.tokens) else None

    def _take(self) -> str:
        token = self._peek()
        if token is None:
            self._fail("unexpected end")
        self.pos += 1
        return token  # type: ignore[return-value]

    def expect_end(self) -> None:
        if self._peek() is not None:
            self._fail(f"unexpected '{self._peek()}'")

    def pattern(self) -> Pattern:
        name = None
        if self.pos + 1 < len(self.tokens) and self.tokens[self.pos + 1].text == "=":
            name = self._take()
            if not name.isidentifier():
                self._fail(f"'{name}' cannot be a binding name")
            self._take()
        return self.term(name)

    def term(self, name: Optional[str]) -> Pattern:
        if self._peek() == "*":
            self._take()
            if self._peek() == "(":
                return op("*", *self._operands(), name=name)
            return any_value(name)
        types = [self._type_name()]
        while self._peek() == "|":
            self._take()
            types.append(self._type_name())
        if types == ["Const"] and self._peek() != "(":
            return const(name)
        operands = self._operands() if self._peek() == "(" else None
        if operands is None:
            return op("|".join(types), name=name)
        return _exact(op("|".join(types), *operands, name=name))

    def _type_name(self) -> str:
        token = self._peek()
        if token is None or not token.isidentifier():
            self._fail("expected an op type")
        return self._take()

    def _operands(self) -> list[Pattern]:
        self._take()  # "("
        operands: list[Pattern] = []
        if self._peek() == ")":
            self._take()
            return operands
        while True:
            operands.append(self.pattern())
            token = self._take()
            if token == ")":
                return operands
            if token != ",":
                self.pos -= 1
                self._fail(f"expected ',' or ')' but found '{token}'")


def _exact(pattern: OpPattern) -> OpPattern:
    """`Type()` means no operands at all, where `op("Type")` alone leaves them unchecked."""
    if pattern.inputs is None:
        return OpPattern(pattern.types, (), pattern.name, pattern.where, pattern.commutative, pattern.port)
    return pattern


__all__ = ["PatternSyntaxError", "format_pattern", "parse_pattern"]

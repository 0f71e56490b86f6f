"""Diagnostics as `vt-opt` prints and checks them: mlir-opt's format (location, source line, caret)
and `--verify-diagnostics` (`expected-error @+1 {{...}}` directives and their matching, following
MLIR's own SourceMgrDiagnosticVerifierHandler)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# -- diagnostics -----------------------------------------------------------------------------------

_FILE_LOC = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_SEVERITY_NAMES = ("error", "warning", "note", "remark")
_SHOWN_LINE = 160  # longest source line a diagnostic quotes whole


@dataclass
class Diag:
    severity: str
    message: str
    location: str  # raw loc text
    file: str | None
    line: int
    col: int
    notes: list = field(default_factory=list)


def to_diag(d) -> Diag:
    from .errors import severity_name  # imports MLIR: only once diagnostics exist

    severity = severity_name(d)
    loc = str(d.location)
    m = _FILE_LOC.search(loc)
    file, line, col = (m.group(1), int(m.group(2)), int(m.group(3))) if m else (None, 0, 0)
    return Diag(severity, str(d.message), loc, file, line, col, [to_diag(n) for n in d.notes])


def format_plain(d: Diag, default_file: str) -> str:
    """`file:line:col: severity: message` (or `file: severity: message` without a location), notes
    indented below: a diagnostic as a `VtmlirError` message carries it."""
    where = f"{d.file}:{d.line}:{d.col}" if d.file else default_file
    return "\n".join([f"{where}: {d.severity}: {d.message}", *(format_plain(n, default_file) for n in d.notes)])


class Source:
    """The input buffer: its name (as diagnostics show it) and lines for caret printing."""

    def __init__(self, name: str, text: str):
        self.name = name
        self.text = text
        self.lines = text.split("\n")

    def render(self, severity: str, message: str, file: str | None, line: int, col: int, loc_text: str = "") -> str:
        if file is None:
            where = self.name if loc_text in ("", "loc(unknown)") else loc_text
            return f"{where}: {severity}: {message}"
        head = f"{file}:{line}:{col}: {severity}: {message}"
        if file == self.name and 1 <= line <= len(self.lines) and col >= 1:
            src = self.lines[line - 1].rstrip("\r")
            start = 0
            if len(src) > _SHOWN_LINE:  # a window of a very long line around the column
                start = max(0, min(col - 1 - _SHOWN_LINE // 2, len(src) - _SHOWN_LINE))
                src = src[start : start + _SHOWN_LINE]
            return f"{head}\n{src}\n{' ' * (col - 1 - start)}^"
        return head

    def render_diag(self, d: Diag) -> str:
        out = [self.render(d.severity, d.message, d.file, d.line, d.col, d.location)]
        previous = d.location
        for n in d.notes:
            note = self.render(n.severity, n.message, n.file, n.line, n.col, n.location)
            # Like mlir-opt, a note at the same place as what it annotates does not repeat the source.
            out.append(note.split("\n", 1)[0] if n.location == previous else note)
            previous = n.location
        return "\n".join(out)


# -- --verify-diagnostics -------------------------------------------------------------------------

_EXPECTED = re.compile(r"expected-(error|note|remark|warning)(-re)? *(@([+-][0-9]+|above|below))? *\{\{(.*)\}\}")


@dataclass
class Expected:
    severity: str
    text: str
    regex: re.Pattern | None
    line: int  # line the diagnostic must be on (1-based, original file)
    directive_line: int
    directive_col: int
    matched: bool = False

    def matches(self, message: str) -> bool:
        return bool(self.regex.search(message)) if self.regex is not None else self.text in message


def _regex_from(text: str) -> re.Pattern:
    """MLIR's `-re` form: literal text with `{{regex}}` pieces."""
    parts, pos = [], 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            parts.append(re.escape(text[pos:]))
            break
        end = text.find("}}", start + 2)
        if end < 0:
            parts.append(re.escape(text[pos:]))
            break
        parts.append(re.escape(text[pos:start]))
        parts.append("(?:" + text[start + 2 : end] + ")")
        pos = end + 2
    return re.compile("".join(parts))


def parse_expected(text: str) -> list[Expected]:
    """Scan `text` (a padded chunk: line numbers are the file's) for expected-* directives."""
    expected: list[Expected] = []
    below: list[Expected] = []
    last_plain = 0
    lines = text.split("\n")
    for index, line in enumerate(lines):
        lineno = index + 1
        m = _EXPECTED.search(line)
        if not m:
            if line.strip():
                for e in below:
                    e.line = lineno
                below.clear()
                last_plain = lineno
            elif below:
                # mlir-opt applies @below to the next line without a directive, blank or not.
                for e in below:
                    e.line = lineno
                below.clear()
                last_plain = lineno
            else:
                last_plain = lineno
            continue
        severity, is_re, _, offset, body = m.groups()
        try:
            regex = _regex_from(body) if is_re else None
        except re.error as err:
            raise DirectiveError(lineno, m.start() + 1, f"invalid regex in expected-{severity}-re: {err}") from None
        e = Expected(severity, body, regex, lineno, lineno, m.start() + 1)
        if offset:
            if offset[0] in "+-":
                e.line = lineno + int(offset)
            elif offset == "above":
                e.line = last_plain
            else:
                e.line = len(lines)
                below.append(e)
        expected.append(e)
    return expected


class DirectiveError(Exception):
    def __init__(self, line: int, col: int, message: str):
        super().__init__(message)
        self.line, self.col = line, col


def verify_diagnostics(diags: list[Diag], expected: list[Expected], source: Source) -> list[str]:
    """mlir-opt's -verify-diagnostics: the problems found (empty when everything matched)."""
    problems: list[str] = []

    def process(d: Diag):
        if d.file is None or d.file != source.name:
            problems.append(source.render("error", f"unexpected {d.severity}: {d.message}", d.file, d.line, d.col, d.location))
            return
        near = None
        for e in expected:
            if e.line != d.line or not e.matches(d.message):
                continue
            if e.severity != d.severity:
                near = e
                continue
            e.matched = True
            return
        if near is not None:
            problems.append(
                source.render(
                    "error",
                    f"'{d.severity}' diagnostic emitted when expecting a '{near.severity}'",
                    source.name,
                    near.directive_line,
                    near.directive_col,
                )
            )
        else:
            problems.append(source.render("error", f"unexpected {d.severity}: {d.message}", d.file, d.line, d.col))

    for d in diags:
        process(d)
        for n in d.notes:
            if not n.message.startswith("see current operation:"):
                process(n)
    for e in expected:
        if not e.matched:
            problems.append(
                source.render(
                    "error",
                    f'expected {e.severity} "{e.text}" was not produced',
                    source.name,
                    e.directive_line,
                    e.directive_col,
                )
            )
    return problems

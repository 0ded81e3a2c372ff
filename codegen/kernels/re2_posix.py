"""Translate an RE2 pattern (RegexFullMatch, com.microsoft Tokenizer) to a POSIX extended regular
expression for <regex.h>.

RegexFullMatch only asks whether a whole string matches, so RE2's leftmost-first preference and
POSIX's leftmost-longest rule give the same answer: only the language matters. Tokenizer searches
(``anchored=False``) with RE2's ``longest_match`` option, which is POSIX's leftmost-longest rule. The translation keeps
RE2's meaning where POSIX differs: ``\\d \\w \\s`` (and ``[[:alpha:]]``-style classes) are ASCII sets as
in RE2, ``.`` does not match a newline unless ``(?s)``, lazy quantifiers become greedy, ``(?:``
and named groups become plain groups, ``\\Q...\\E`` and ``\\x{...}`` become escaped literals, and
brackets are rebuilt from code point ranges (POSIX brackets have no escapes; non-ASCII characters are
listed one by one, since glibc's regcomp refuses ranges of them, up to MAX_LISTED). ``\\b`` and ``\\B``
map to the GNU operators of glibc's regcomp. The C kernel compiles the result under a C.UTF-8
locale, so ``.`` and negated brackets match whole UTF-8 characters as in RE2.

Constructs without a POSIX equivalent (Unicode classes ``\\pL``, flags other than a leading
``(?i)``/``(?s)``/``(?U)``, ``\\C``, backreference-like escapes) raise ValueError naming the
construct; invalid patterns raise ValueError too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPECIAL = set(".[]{}()\\*+?^$|")

# RE2's Perl and POSIX classes: code point ranges (ASCII only, as in RE2)
_PERL = {"d": [(48, 57)], "w": [(48, 57), (65, 90), (95, 95), (97, 122)], "s": [(9, 10), (12, 13), (32, 32)]}
_POSIX = {"alnum": [(48, 57), (65, 90), (97, 122)], "alpha": [(65, 90), (97, 122)], "ascii": [(0, 127)],
          "blank": [(9, 9), (32, 32)], "cntrl": [(0, 31), (127, 127)], "digit": [(48, 57)],
          "graph": [(33, 126)], "lower": [(97, 122)], "print": [(32, 126)],
          "punct": [(33, 47), (58, 64), (91, 96), (123, 126)], "space": [(9, 13), (32, 32)],
          "upper": [(65, 90)], "word": [(48, 57), (65, 90), (95, 95), (97, 122)],
          "xdigit": [(48, 57), (65, 70), (97, 102)]}
_CONTROL = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11, "a": 7}
MAX_LISTED = 4096  # non-ASCII characters a bracket may list (glibc compiles no non-ASCII ranges)
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")


@dataclass
class Translation:
    pattern: str          # the POSIX ERE: ^(...)$ for a full match, (...) for a search
    icase: bool           # compile with REG_ICASE
    gnu: bool             # uses GNU operators (\b, \B): needs glibc's regcomp


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _literal(cp: int) -> str:
    ch = chr(cp)
    if cp == 0:
        raise ValueError("a NUL character cannot appear in a pattern")
    return "\\" + ch if ch in _SPECIAL else ch


def bracket(ranges: list[tuple[int, int]], negate: bool = False) -> str:
    """A POSIX bracket expression matching the code point ``ranges`` (or, negated, everything else).

    POSIX brackets have no escapes: ``]`` goes first, ``[`` and ``^`` late, ``-`` last."""
    ranges = [(max(a, 1), b) for a, b in _merge(ranges) if b >= 1]  # NUL never occurs in C strings
    if not ranges:
        raise ValueError("an empty character class")
    specials = {cp for cp in (93, 45, 94, 91) if any(a <= cp <= b for a, b in ranges)}  # ] - ^ [
    pieces = [r for a, b in ranges for r in _split_out(a, b, specials)]
    wide = sum(hi - max(lo, 0x80) + 1 for lo, hi in pieces if hi >= 0x80)
    if wide > MAX_LISTED:
        raise ValueError(f"a character class with {wide} non-ASCII characters (at most {MAX_LISTED}: glibc's regex "
                         "cannot compile ranges of non-ASCII characters, so they are listed one by one)")
    body = "".join(_range(lo, hi) for lo, hi in pieces)
    parts = ("]" if 93 in specials else "") + body + ("[" if 91 in specials else "")
    tail = ("^" if 94 in specials else "") + ("-" if 45 in specials else "")
    if not parts and tail == "^":
        return "[^^]" if negate else "\\^"
    if not parts and tail == "^-":
        tail = "-^"
    return f"[{'^' if negate else ''}{parts}{tail}]"


def _range(lo: int, hi: int) -> str:
    """Bracket items for code points lo..hi: an ASCII range, then each non-ASCII character by itself."""
    out = "" if lo > 0x7F else (chr(lo) if lo == min(hi, 0x7F) else f"{chr(lo)}-{chr(min(hi, 0x7F))}")
    return out + "".join(chr(c) for c in range(max(lo, 0x80), hi + 1) if not 0xD800 <= c < 0xE000)


def _split_out(a: int, b: int, specials: set[int]) -> list[tuple[int, int]]:
    """Range a..b without the special code points (emitted separately)."""
    out, lo = [], a
    for cp in sorted(c for c in specials if a <= c <= b):
        if lo < cp:
            out.append((lo, cp - 1))
        lo = cp + 1
    if lo <= b:
        out.append((lo, b))
    return out


class _Parser:
    def __init__(self, pat: str):
        self.p = pat
        self.i = 0
        self.icase = self.dotall = self.gnu = False
        self.depth = 0

    def fail(self, what: str) -> ValueError:
        return ValueError(f"{what} at offset {self.i} of pattern {self.p!r}")

    def peek(self, k: int = 0) -> str:
        return self.p[self.i + k] if self.i + k < len(self.p) else ""

    def translate(self) -> str:
        out = []
        self.leading_flags()
        while self.i < len(self.p):
            out.append(self.atom())
        if self.depth:
            raise self.fail("missing ')'")
        return "".join(out)

    def leading_flags(self) -> None:
        m = re.match(r"\(\?([a-zA-Z]+)\)", self.p)
        if not m:
            return
        for f in m.group(1):
            if f == "i":
                self.icase = True
            elif f == "s":
                self.dotall = True
            elif f != "U":  # ungreedy: no effect on a full match
                raise ValueError(f"flag {f!r} of pattern {self.p!r} is not supported")
        self.i = m.end()

    def atom(self) -> str:
        c = self.p[self.i]
        if c == "\\":
            return self.escape()
        if c == "[":
            return self.bracket()
        if c == "(":
            return self.group()
        if c == ")":
            if not self.depth:
                raise self.fail("unmatched ')'")
            self.depth -= 1
            self.i += 1
            return ")"
        if c in "*+?":
            self.i += 1
            if self.peek() == "?":  # lazy: same language
                self.i += 1
            return c
        if c == "{":
            m = _REPEAT.match(self.p, self.i)
            if not m:
                self.i += 1
                return "\\{"
            lo, hi = int(m.group(1)), m.group(3)
            if lo > 1000 or (hi and (int(hi) > 1000 or int(hi) < lo)):
                raise self.fail(f"bad repetition {m.group(0)}")
            self.i = m.end()
            if self.peek() == "?":
                self.i += 1
            return m.group(0)
        if c == ".":
            self.i += 1
            return "." if self.dotall else "[^\n]"
        self.i += 1
        if c in "^$|":
            return c
        return _literal(ord(c))

    def group(self) -> str:
        self.i += 1
        self.depth += 1
        if self.peek() != "?":
            return "("
        m = re.match(r"\?(:|P?<[A-Za-z_][A-Za-z0-9_]*>)", self.p[self.i:])
        if not m:
            raise self.fail("group flags or look-around (not in RE2 or not supported)")
        self.i += m.end()
        return "("

    def escape(self) -> str:
        c = self.peek(1)
        if not c:
            raise self.fail("trailing backslash")
        self.i += 2
        if c in _PERL or c.lower() in _PERL:
            return bracket(_PERL[c.lower()], negate=c.isupper())
        if c in "bB":
            self.gnu = True
            return "\\" + c
        if c == "A":
            return "^"
        if c == "z":
            return "$"
        if c == "Q":
            end = self.p.find("\\E", self.i)
            end = len(self.p) if end < 0 else end
            lit = "".join(_literal(ord(ch)) for ch in self.p[self.i:end])
            self.i = min(len(self.p), end + 2)
            return lit
        cp = self.code_point(c)
        if cp is not None:
            return _literal(cp)
        if c.isalnum():
            raise self.fail(f"escape \\{c} (Unicode classes, \\C, back-references: not supported)")
        return _literal(ord(c))

    def code_point(self, c: str) -> int | None:
        """The code point of a character escape (\\n, \\x41, \\x{263a}) whose letter was consumed."""
        if c in _CONTROL:
            return _CONTROL[c]
        if c != "x":
            return None
        m = re.match(r"\{([0-9A-Fa-f]{1,6})\}|([0-9A-Fa-f]{2})", self.p[self.i:])
        if not m:
            raise self.fail("bad \\x escape")
        self.i += m.end()
        cp = int(m.group(1) or m.group(2), 16)
        if cp > 0x10FFFF:
            raise self.fail("code point out of range")
        return cp

    def bracket(self) -> str:
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            c = self.peek()
            if not c:
                raise self.fail("missing ']'")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[" and self.peek(1) == ":":
                m = re.match(r"\[:(\^?)([a-z]+):\]", self.p[self.i:])
                if not m or m.group(2) not in _POSIX:
                    raise self.fail("bad POSIX class")
                if m.group(1):
                    raise self.fail("negated POSIX class inside a bracket (not supported)")
                ranges += _POSIX[m.group(2)]
                self.i += m.end()
                continue
            lo = self.bracket_char()
            if isinstance(lo, list):
                ranges += lo
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.bracket_char()
                if isinstance(hi, list) or hi < lo:
                    raise self.fail("bad character range")
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        return bracket(ranges, negate)

    def bracket_char(self) -> int | list:
        """One bracket item: a code point, or a class's ranges (for \\d \\w \\s)."""
        c = self.p[self.i]
        self.i += 1
        if c != "\\":
            return ord(c)
        e = self.peek()
        if not e:
            raise self.fail("trailing backslash")
        self.i += 1
        if e in _PERL:
            return list(_PERL[e])
        if e.lower() in _PERL:
            raise self.fail(f"negated class \\{e} inside a bracket (not supported)")
        cp = self.code_point(e)
        if cp is not None:
            return cp
        if e.isalnum():
            raise self.fail(f"escape \\{e} inside a bracket (not supported)")
        return ord(e)


def translate(pattern: str, anchored: bool = True) -> Translation:
    """The POSIX ERE of RE2 ``pattern``, anchored for a full match or not for a search; ValueError when
    not expressible."""
    p = _Parser(pattern)
    body = p.translate()
    return Translation(f"^({body})$" if anchored else f"({body})", p.icase, p.gnu)

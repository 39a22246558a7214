"""Declared known failures (python/tests_torch/known_ops.toml): which (op, dtype, backend) is
expected to fail with which class, and why; and the check of a run against them."""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .settings import FAILURES


class KnownFileError(Exception):
    """The known-failures file is malformed; the message names the entry and the field."""


def any_matches(value: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(value, pattern) for pattern in patterns)


@dataclass
class Entry:
    op: tuple[str, ...]  # globs; a field matches when any of its globs does
    dtype: tuple[str, ...]
    backend: tuple[str, ...]
    expected: str
    reason: str
    number: int  # 1-based, in the file's order, for the messages
    matched: list = field(default_factory=list)  # (backend, op, dtype, class) of this run

    def matches(self, backend: str, name: str, key: str, dtype: str) -> bool:
        return (
            (any_matches(name, self.op) or any_matches(key, self.op))
            and any_matches(dtype, self.dtype)
            and any_matches(backend, self.backend)
        )

    def describe(self) -> str:
        def field(patterns: tuple[str, ...]) -> str:
            return repr(patterns[0]) if len(patterns) == 1 else repr(list(patterns))

        return (f"entry {self.number} (op {field(self.op)}, dtype {field(self.dtype)}, backend "
                f"{field(self.backend)}, class {self.expected!r})")


def load(path: Path) -> list[Entry]:
    try:
        document = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise KnownFileError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as error:
        raise KnownFileError(f"{path}: {error}") from None
    unknown_tables = set(document) - {"known"}
    if unknown_tables:
        raise KnownFileError(f"{path}: unknown table(s) {', '.join(sorted(unknown_tables))}; entries are [[known]]")
    entries = []
    for number, table in enumerate(document.get("known", []), start=1):
        where = f"{path}: [[known]] entry {number}"
        missing = [key for key in ("op", "class", "reason") if not table.get(key)]
        if missing:
            raise KnownFileError(f"{where} lacks {', '.join(missing)}")
        globs = {}
        for key in ("op", "dtype", "backend"):
            value = table.get(key, "*")
            value = [value] if isinstance(value, str) else value
            if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
                raise KnownFileError(f"{where}: {key} must be a glob or a list of globs (non-empty strings)")
            globs[key] = tuple(value)
        for key in ("class", "reason"):
            if not isinstance(table[key], str) or not table[key].strip():
                raise KnownFileError(f"{where}: {key} must be a non-empty string")
        extra = set(table) - {"op", "dtype", "backend", "class", "reason"}
        if extra:
            raise KnownFileError(f"{where} has unknown field(s) {', '.join(sorted(extra))}")
        if table["class"] not in FAILURES:
            raise KnownFileError(f"{where} declares class {table['class']!r}; a known failure is one of "
                                 + ", ".join(FAILURES))
        entries.append(Entry(globs["op"], globs["dtype"], globs["backend"], table["class"], table["reason"], number))
    return entries


@dataclass
class Verdict:
    undeclared: list[dict]  # failures no entry declares: {backend, op, dtype, class, message}
    stale: list[Entry]  # entries that matched cases of this run, none of which failed
    unknown: list[Entry]  # entries whose op pattern names no OpInfo


def judge(entries: list[Entry], runs: dict, catalogue: dict) -> Verdict:
    """`runs` maps each backend to its results ({op key: {dtype: result}}); `catalogue` maps
    every OpInfo key to its name."""
    for entry in entries:
        entry.matched = []
    undeclared = []
    for backend, results in sorted(runs.items()):
        for key, by_dtype in sorted(results.items()):
            name = catalogue[key]["name"]
            for dtype, result in by_dtype.items():
                matching = [e for e in entries if e.matches(backend, name, key, dtype)]
                for entry in matching:
                    entry.matched.append(result["class"])
                if result["class"] in FAILURES and not any(e.expected == result["class"] for e in matching):
                    undeclared.append({"backend": backend, "op": key, "dtype": dtype, "class": result["class"],
                                       "message": result.get("details", {}).get("message", "")})
    stale = [e for e in entries if e.matched and not any(c in FAILURES for c in e.matched)]
    unknown = [
        e for e in entries
        if not any(any_matches(key, e.op) or any_matches(info["name"], e.op) for key, info in catalogue.items())
    ]
    return Verdict(undeclared, stale, unknown)

"""Reading fields of the knowledge files: each failure is a KnowledgeError naming the file and
the field."""

from __future__ import annotations

from solver.vocabulary import parse_version


class KnowledgeError(ValueError):
    """A knowledge file is missing or malformed."""


def need(mapping: dict, key: str, where: str):
    """mapping[key], or KnowledgeError naming `where` and the missing field."""
    if not isinstance(mapping, dict) or key not in mapping:
        raise KnowledgeError(f"{where}: missing field '{key}'")
    return mapping[key]


def version_str(value, where: str) -> str:
    """A version number as a string ("12.9", "550.54.14"), checked."""
    text = str(value)
    try:
        parse_version(text)
    except ValueError:
        raise KnowledgeError(f"{where}: {text!r} is not a version number") from None
    return text

"""One JSON file per machine in a folder of the repository: how such files are named, read and listed.

The benchmark results (:mod:`gpukit.measuring.benchmark_records`, ``data/benchmarks/``) and the backend-support probe
(:mod:`gpukit.topics.backend_support`, ``data/backend-support/``) both keep their files this way. Both check a record
field by field with one :class:`RecordChecker`, each with its own schema and error class, so that a bad file is
reported in that module's terms.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Callable, ItemsView, Iterable, Mapping
from pathlib import Path
from typing import NoReturn

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
FIELD_KINDS = ("text", "count", "positive", "fraction", "object")  # RecordChecker.value's


def file_name(text: str) -> str:
    """``text`` as a file name of lower-case letters, digits, '.', '_' and '-' (other runs become '-')."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.")
    if not slug or not _NAME.match(slug):
        raise ValueError(f"cannot make a file name from {text!r}; use letters, digits, '.', '_' and '-'")
    return slug


def read_checked(path: str | Path, validate: Callable[[object, str], dict], error: type[Exception]) -> dict:
    """Read the JSON file at ``path`` and return ``validate(record, file name)``; a file that is not JSON
    raises ``error`` naming it (``validate`` raises its own for a bad record)."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as problem:
        raise error(f"{path.name}: not valid JSON ({problem})") from problem
    return validate(record, path.name)


def json_files(folder: Path, how_to_make: str) -> list[Path]:
    """The ``.json`` files in ``folder``, in name order. A missing or empty folder is an error that says how
    to make its files (``how_to_make``, a command)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"no folder {folder}: run `{how_to_make}` to create it")
    paths = sorted(folder.glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"{folder} holds no .json files: run `{how_to_make}`")
    return paths


class RecordChecker:
    """Checks one JSON record against its schema, field by field; each problem raises ``error`` naming the file
    (``where``) and the field's path (``devices.cuda:0.peaks``).

    A field's kind is one of "text" (a non-empty string), "count" (a whole number >= 1), "positive" (a finite
    number > 0), "fraction" (a finite number >= 0) or "object" (a JSON object); a trailing "?" allows null."""

    def __init__(self, where: str, error: type[Exception], schema: str):
        self.where, self.error, self.schema = where, error, schema

    def fail(self, field: str, problem: str) -> NoReturn:
        raise self.error(f"{self.where}: field {field!r} {problem}")

    def top(self, record, required: Iterable[str], optional: Iterable[str] = ()) -> None:
        """``record`` is an object with every required field, no field the schema lacks, and this schema."""
        if not isinstance(record, dict):
            raise self.error(f"{self.where}: expected a JSON object at the top level, got {type(record).__name__}")
        required = list(required)
        for field in required:
            if field not in record:
                self.fail(field, "is missing (a partial file)")
        extra = sorted(set(record) - set(required) - set(optional))
        if extra:
            self.fail(extra[0], f"is not part of the schema {self.schema}")
        if record["schema"] != self.schema:
            self.fail("schema", f"is {record['schema']!r}; this gpukit reads {self.schema!r}")

    def date(self, field: str, value) -> None:
        try:
            datetime.date.fromisoformat(value)
        except (TypeError, ValueError):
            self.fail(field, f"must be an ISO date such as 2026-05-01, not {value!r}")

    def value(self, field: str, value, kind: str) -> None:
        optional, kind = kind.endswith("?"), kind.rstrip("?")
        if kind not in FIELD_KINDS:
            raise ValueError(f"{kind!r} is not a field kind: one of {', '.join(FIELD_KINDS)}")  # a schema's typo
        if value is None:
            if not optional:
                self.fail(field, "must not be null")
            return
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if kind == "text" and not (isinstance(value, str) and value.strip()):
            self.fail(field, f"must be a non-empty string, not {value!r}")
        if kind == "count" and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            self.fail(field, f"must be a whole number >= 1, not {value!r}")
        if kind == "positive" and not (number and value > 0):
            self.fail(field, f"must be a positive number, not {value!r}")
        if kind == "fraction" and not (number and value >= 0):
            self.fail(field, f"must be a number >= 0 (or null where no peak is known), not {value!r}")
        if kind == "object" and not isinstance(value, dict):
            self.fail(field, f"must be a JSON object, not {type(value).__name__}")

    def entries(self, field: str, value, maps: str) -> ItemsView:
        """``value`` is an object with at least one entry (``maps``: "at least one operation to its results");
        its items, to check one by one."""
        if not isinstance(value, dict) or not value:
            self.fail(field, f"must map {maps}")
        return value.items()

    def fields(self, field: str, value, spec: Mapping[str, str], extra_allowed: bool = False) -> None:
        """``value`` is an object holding each key of ``spec`` with its kind (and, unless allowed, no other)."""
        if not isinstance(value, dict):
            self.fail(field, f"must be a JSON object, not {type(value).__name__}")
        for key, kind in spec.items():
            if key not in value:
                self.fail(f"{field}.{key}", "is missing (a partial file)")
            self.value(f"{field}.{key}", value[key], kind)
        if not extra_allowed:
            extra = sorted(set(value) - set(spec))
            if extra:
                self.fail(f"{field}.{extra[0]}", f"is not part of the schema {self.schema}")

"""Each chapter's exercise cases (``<chapter>.py``), and how a case module names one of its wrong answers.

``DEVICE_MISTAKES`` (see tests/exercises/test_planted_device_mistakes.py) names wrong answers by their
``__name__``. A wrong answer made by a factory (every one called ``train``, ``step`` or ``<lambda>``), or a value
(a tensor, a kernel's source), gets a name of its own with :func:`named`; :func:`name_of` reads it back.
"""

from __future__ import annotations

# Values that take no attribute (a str, a NumPy or JAX array), with the name each was given: held, and found by
# identity, for as long as this process runs (a few dozen small objects).
_NAMED_VALUES: list[tuple[object, str]] = []


def named(name: str, answer):
    """``answer`` under ``name``: its ``__name__`` (and ``__qualname__``) where it takes one, else remembered."""
    try:
        answer.__name__ = name
    except (AttributeError, TypeError):
        _NAMED_VALUES.append((answer, name))
        return answer
    if hasattr(answer, "__qualname__"):
        answer.__qualname__ = name
    return answer


def name_of(answer) -> str | None:
    """The name a wrong answer goes by in DEVICE_MISTAKES: the one :func:`named` gave it, else its ``__name__``."""
    for value, name in _NAMED_VALUES:
        if value is answer:
            return name
    name = getattr(answer, "__name__", None)
    return name if isinstance(name, str) else None


def wrong_answer_named(cases, label: str, name: str) -> tuple:
    """The wrong answer of ``cases.WRONG_ANSWERS[label]`` that goes by ``name``, with the word its message must
    contain: the one a DEVICE_MISTAKES entry names."""
    found = [(answer, word) for answer, word in cases.WRONG_ANSWERS[label]() if name_of(answer) == name]
    assert len(found) == 1, f"{label}: DEVICE_MISTAKES names {name}, which WRONG_ANSWERS does not hold once"
    return found[0]

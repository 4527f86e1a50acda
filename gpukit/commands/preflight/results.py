"""One preflight's lines: a :class:`Result` per check (ok, note, FAIL or skip, with the fix for a failure) and the
:class:`Preflight` that holds them and gives the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

OK, NOTE, FAIL, SKIP = "ok", "note", "FAIL", "skip"
STATUSES = (OK, NOTE, FAIL, SKIP)


@dataclass(frozen=True)
class Result:
    """One line of the preflight: ``status`` (ok, note, FAIL or skip), the check's ``name``, what was measured
    or found (``detail``) and, for a failure, the ``fix`` (a command or an action)."""

    name: str
    status: str
    detail: str
    fix: str | None = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"a preflight status is one of {STATUSES}, not {self.status!r}")
        if self.status == FAIL and not self.fix:
            raise ValueError(f"the FAIL line of {self.name!r} must say how to fix it")

    def line(self, width: int = 0) -> str:
        text = f"{self.status:<4}  {self.name:<{width}}  {self.detail}"
        return f"{text}  -> fix: {self.fix}" if self.fix else text


@dataclass
class Preflight:
    """Every line of one preflight run, on ``kind`` ("cuda", "mps", or None where no GPU was found)."""

    kind: str | None
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if r.status == FAIL]

    @property
    def passed(self) -> bool:
        """True only where a GPU was found and no check failed."""
        return self.kind is not None and not self.failures

    def summary(self) -> str:
        if self.kind is None:
            return ("FAILED: no GPU here, so nothing was checked. Run it on a GPU node: through Slurm, "
                    "`srun --gpus=1 python -m gpukit doctor --gpu`, or any GPU template in slurm_templates/, "
                    "which runs it first.")
        counts = f"{self.count(OK)} ok, {self.count(NOTE)} notes, {self.count(SKIP)} skipped"
        if self.failures:
            return (f"FAILED: {len(self.failures)} of {len(self.results)} checks failed (each FAIL line says how "
                    f"to fix it); {counts}; {self.seconds:.0f} s.")
        return f"Passed: {counts}; {self.seconds:.0f} s."

    def to_text(self) -> str:
        width = max((len(r.name) for r in self.results), default=0)
        return "\n".join([*(r.line(width) for r in self.results), self.summary()])

"""MARP against the fake-tensor trace over the validation matrix (frenzy.memory.validation).

Targets: allocated peak within 3% of the trace on every configuration; each breakdown term
within 5% (or 0.5% of the peak). Writes the table and the error distribution to docs/ACCURACY.md.
`--fast`: the two-layer cases; `--fsdp-mixed`: the fsdp2-param mixed-precision mode traced under
the real FSDP2 at dp 2 and 4 (its own section).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402

from frenzy.memory.validation import COMPARED_TERMS, compare, fast_cases, fsdp_mixed_cases, full_matrix  # noqa: E402


def main() -> None:
    flag = next((f for f in ("--fast", "--fsdp-mixed") if f in sys.argv), "")
    cases = {"--fast": fast_cases, "--fsdp-mixed": fsdp_mixed_cases}.get(flag, full_matrix)()
    rows, errors, failures = [], [], []
    started = time.perf_counter()
    for case in cases:
        try:
            c = compare(case)
        except Exception as exc:  # noqa: BLE001 - report the case, keep going
            failures.append(f"| {case.label} | trace failed: {type(exc).__name__}: {str(exc)[:120]} |")
            continue
        errors.append(c.peak_error)
        terms = c.term_errors()
        worst_term = max(terms, key=lambda t: abs(terms[t]))
        rows.append(f"| {case.label} | {c.traced.allocated_bytes / 2**30:.2f} | {c.formula.allocated_bytes / 2**30:.2f} | "
                    f"{c.peak_error:+.2%} | {worst_term} {terms[worst_term]:+.1%} | {c.traced.peak_phase.value} / "
                    f"{c.formula.peak_phase.value} | {c.traced.reserved_bytes / 2**30:.2f} | "
                    f"{c.formula.reserved_bytes / 2**30:.2f} | {c.trace_seconds:.1f} | {'ok' if c.ok else 'MISS'} |")
        print(rows[-1], flush=True)
    abs_err = [abs(e) for e in errors]
    ok = sum(1 for r in rows if r.endswith("ok |"))
    summary = (
        f"## MARP against the fake-tensor trace{' (fsdp2-param mode, FSDP2 on a fake process group)' if flag == '--fsdp-mixed' else ''}"
        f"\n\n{len(rows)} configurations traced "
        f"({len(failures)} failed to trace) in {time.perf_counter() - started:.0f} s. Allocated peak: median "
        f"abs error {statistics.median(abs_err):.2%}, worst {max(abs_err):.2%}; {ok}/{len(rows)} within targets "
        f"(peak ±3%, every term ±5% or ±0.5% of the peak; terms: {', '.join(COMPARED_TERMS)}).\n\n"
        "| configuration | traced GiB | MARP GiB | peak error | worst term | peak phase (trace / MARP) | "
        "traced reserved | MARP reserved | trace s | |\n|---|---:|---:|---:|---|---|---:|---:|---:|---|\n"
        + "\n".join(rows) + ("\n\nTrace failures:\n\n| configuration | error |\n|---|---|\n" + "\n".join(failures)
                             if failures else ""))
    write_section("trace-validation" + flag[1:].replace("--", "-"), summary, doc="docs/ACCURACY.md",
                  command="python bench/trace_validation.py" + (f" {flag}" if flag else ""))


if __name__ == "__main__":
    main()

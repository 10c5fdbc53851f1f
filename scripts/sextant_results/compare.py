"""Baseline vs candidate: match case instances, compare their performance
metrics with a direction, and decide the gate.

Cases match on (suite, case, params, parallel config, dtype, ranks, fault).
A metric's direction comes from its unit (GB/s, TFLOP/s, tokens/s, any */s:
higher is better; s: lower is better) or its name (mfu: higher; measured
bubble and load balance: lower). Everything else (busbw factors, byte counts,
model FLOPs, simulated bubbles, routing imbalance...) is a fact of the
configuration, not a performance: it is shown when it changes, never gated.

A gated metric that has a value in the baseline and null in the candidate (the
harness writes null where it measured NaN or Inf) is "lost" and fails the gate.
Documents must satisfy results/schema.json (schema.read_valid_document);
compare_docs refuses numbers that are not finite (NaN, Inf) in either, since
NaN compares false both ways and would pass the gate silently.
"""
import fnmatch
import json
from dataclasses import dataclass, field

from .load import ResultsError, json_path, non_json_problem, non_json_values, status

HIGHER, LOWER, INFO = "higher", "lower", "info"
HIGHER_NAMES = ("mfu", "overlap_efficiency")
LOWER_NAMES = ("bubble_measured_mean", "bubble_measured_max", "bubble_fraction", "load_balance")
INFO_NAMES = ("busbw_factor", "bytes_sent", "bytes_sent_formula", "activation_bytes", "layernorm_activation_bytes",
              "bubble_simulated", "bubble_closed_form", "peak_tflops", "flops_per_step", "peak_activations",
              "imbalance_expert", "imbalance_rank", "dropped_tokens", "compute_time_min_s", "a2a_share")
DEFAULT_THRESHOLD_PCT = 5.0


def direction(name, unit):
    """higher, lower or info for a metric name (time regions are 'time.<region>')."""
    if name.startswith("time."):
        return LOWER
    if any(name == n or name.startswith(n + "_per_rank") or name.startswith(n + "_") for n in INFO_NAMES):
        return INFO
    if name in HIGHER_NAMES:
        return HIGHER
    if name in LOWER_NAMES:
        return LOWER
    if unit == "s":
        return LOWER
    if isinstance(unit, str) and unit.endswith("/s"):
        return HIGHER
    return INFO


def match_key(case):
    return (case["suite"], case["case"], json.dumps(case.get("params", {}), sort_keys=True),
            json.dumps(case.get("parallel", {}), sort_keys=True), case.get("dtype"), case.get("ranks"),
            case.get("fault") or "")


def index_cases(doc):
    """{match key: case}; repeated keys (the same instance twice) get #2, #3..."""
    out = {}
    for c in doc.get("cases", []):
        key = match_key(c)
        n = 1
        while key + ((n,) if n > 1 else ()) in out:
            n += 1
        out[key + ((n,) if n > 1 else ())] = c
    return out


def values(case):
    """{name: (value, unit)}: median time per region and every measured metric."""
    out = {f"time.{region}": (stats.get("median"), "s")
           for region, stats in case.get("perf", {}).get("time", {}).items()}
    for name, m in case.get("perf", {}).get("metrics", {}).items():
        if isinstance(m, dict) and "value" in m and "unit" in m:
            out[name] = (m["value"], m["unit"])
    return out


@dataclass
class Change:
    case_id: str
    metric: str
    unit: str
    base: float
    cand: float
    direction: str
    threshold: float  # percent
    verdict: str      # regressed, improved, within, noise, lost (became null), changed (no percentage),
                      # same (info, equal)

    @property
    def change_pct(self):
        if self.base in (None, 0) or self.cand is None:
            return None
        return 100.0 * (self.cand - self.base) / abs(self.base)


@dataclass
class Comparison:
    matched: int = 0
    changes: list = field(default_factory=list)
    conformance: list = field(default_factory=list)   # (case id, reason)
    only_base: list = field(default_factory=list)     # case ids
    only_cand: list = field(default_factory=list)
    allow_missing: bool = False

    def of(self, verdict):
        return [c for c in self.changes if c.verdict == verdict]

    @property
    def failed(self):
        return bool(self.conformance or self.of("regressed") or self.of("lost")
                    or (self.only_base and not self.allow_missing))


class Thresholds:
    """Percent per metric: exact names or globs (time.*), else the default."""

    def __init__(self, default=DEFAULT_THRESHOLD_PCT, overrides=None):
        self.default = default
        self.overrides = dict(overrides or {})

    def __call__(self, name):
        if name in self.overrides:
            return self.overrides[name]
        for pattern, pct in self.overrides.items():
            if fnmatch.fnmatchcase(name, pattern):
                return pct
        return self.default


def judge(case_id, name, base, cand, thresholds, noisy=False):
    """One metric's verdict. noisy: the instance is too short to gate on."""
    (b, unit), (c, _) = base, cand
    d = direction(name, unit)
    change = Change(case_id, name, unit, b, c, d, thresholds(name), "same")
    if d == INFO:
        change.verdict = "same" if b == c else "changed"
    elif b == c:
        change.verdict = "within"
    elif c is None:
        change.verdict = "lost"  # measured before, not finite now
    elif b is None or b == 0:
        change.verdict = "changed"  # no percentage to judge (a value became finite, or was zero)
    else:
        worse = (c - b) / abs(b) * (1 if d == LOWER else -1) * 100.0  # percent, positive = worse
        t = change.threshold
        change.verdict = "regressed" if worse > t else "improved" if -worse > t else "within"
        if noisy and change.verdict != "within":
            change.verdict = "noise"
    return change


def primary_time(case):
    """Median seconds of the case's first timed region, or None."""
    times = case.get("perf", {}).get("time", {})
    return next(iter(times.values())).get("median") if times else None


def conformance_problem(base_case, cand_case):
    """Why the candidate's verdict fails the gate, or None."""
    s = status(cand_case)
    fault = cand_case.get("fault")
    if s == "error":
        return f"could not run: {cand_case['error']}"
    if fault:
        return None if s == "fail" else f"planted fault {fault!r} was not caught (status {s})"
    if s == "fail":
        lines = cand_case.get("conformance", {}).get("failures", [])
        return "conformance failed: " + ("; ".join(lines[:3]) or "no failure lines")
    if s == "skip" and base_case is not None and status(base_case) in ("pass", "fail"):
        return "not checked in the candidate, checked in the baseline"
    return None


def compare_docs(base_doc, cand_doc, thresholds=None, only=None, allow_missing=False, min_time=0.0):
    """The comparison; `only` (globs) limits which metrics are compared;
    instances whose baseline primary time is below min_time seconds are
    reported as noise instead of regressed/improved."""
    thresholds = thresholds or Thresholds()
    for role, doc in (("baseline", base_doc), ("candidate", cand_doc)):
        bad = next(non_json_values(doc), None)
        if bad:
            raise ResultsError(f"{role}: at {json_path(bad[0])}: {non_json_problem(bad[1])}")
    base, cand = index_cases(base_doc), index_cases(cand_doc)
    result = Comparison(allow_missing=allow_missing)
    result.only_base = [base[k]["id"] for k in base if k not in cand]
    result.only_cand = [cand[k]["id"] for k in cand if k not in base]
    for key, c in cand.items():
        problem = conformance_problem(base.get(key), c)
        if problem:
            result.conformance.append((c["id"], problem))
        if key not in base:
            continue
        result.matched += 1
        bv, cv = values(base[key]), values(c)
        noisy = (primary_time(base[key]) or 0.0) < min_time
        for name in sorted(set(bv) & set(cv)):
            if only and not any(fnmatch.fnmatchcase(name, p) for p in only):
                continue
            result.changes.append(judge(c["id"], name, bv[name], cv[name], thresholds, noisy))
    return result

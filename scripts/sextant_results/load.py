"""Results files as Python objects, and accessors that read a case record the
way results/METRICS.md describes it. Case records stay plain dicts: the JSON
is the contract, these helpers only name the paths into it."""
import json
import math
import os
import re
import reprlib
import sys
from dataclasses import dataclass, field

SCHEMA_ID = "sextant.result/1"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA_PATH = os.path.join(REPO_ROOT, "results", "schema.json")


class ResultsError(Exception):
    """A file that cannot be read as a sextant results document."""


@dataclass
class Run:
    path: str
    doc: dict
    index: int = 0               # position among the runs given to a tool
    label: str = ""              # short, unique among those runs
    cases: list = field(default_factory=list)

    @property
    def system(self):
        return self.doc.get("system", {})

    @property
    def run(self):
        return self.doc.get("run", {})

    def device_name(self):
        devices = self.system.get("devices") or [{}]
        return short_device_name(devices[0].get("name", "unknown device"))

    def describe(self):
        """The system in one line, for captions: device, ranks, hosts, backend."""
        s = self.system
        hosts = s.get("hosts") or []
        devices = s.get("devices") or [{}]
        count = f"{len(devices)} x " if len(devices) > 1 else ""
        peak_text = ""
        if devices[0].get("peak_tflops"):
            source = str(devices[0].get("peak_source", ""))
            kind = " f32, estimated" if source.startswith("estimate") else " dense bf16" if source.startswith(
                "table") else ""
            peak_text = f", peak {devices[0]['peak_tflops']:.3g} TFLOP/s{kind}"
        caveat = " (timings not representative of the hardware)" if not self.timings_representative() else ""
        return (f"{count}{self.device_name()} ({s.get('device_kind', '?')}{peak_text}); "
                f"world {s.get('world_size', '?')} ranks on "
                f"{len(hosts)} host{'s' if len(hosts) != 1 else ''}; backend {s.get('backend', '?')}{caveat}; "
                f"run {self.run.get('id', '?')}")

    def timings_representative(self):
        """False when a case says its communicator's timings do not represent
        the hardware (perf.metrics.comm, e.g. mpi-staged: ranks sharing a GPU)."""
        comms = [extra(c, "comm") for c in self.cases]
        return not any(isinstance(m, dict) and m.get("timings_representative") is False for m in comms)


def short_device_name(name):
    """'Intel(R) Xeon(R) Processor' -> 'Intel Xeon'; 'NVIDIA H200' stays."""
    name = re.sub(r"\((R|TM|tm|r)\)", "", name)
    name = re.sub(r"\b(Processor|CPU)\b", "", name)
    name = re.sub(r"@.*$", "", name)
    return " ".join(name.split()) or "unknown device"


def read_json(path):
    """The parsed JSON of path; ResultsError naming the file and the problem
    when it cannot be read, is not UTF-8, is not JSON, or holds a value only
    Python's json accepts (non_json_values): NaN and Infinity above all. JSON
    has no such numbers and the harness writes null for a value it could not
    compute, so such a token means the file did not come from it intact."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ResultsError(f"{path}: cannot read: {e.strerror or e}") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ResultsError(f"{path}: not UTF-8: byte 0x{data[e.start]:02x} at offset {e.start}") from e
    try:
        doc = json.loads(text, parse_constant=NonFiniteToken)
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
    except RecursionError as e:
        raise ResultsError(f"{path}: not JSON this tool can read: nested too deeply") from e
    except ValueError as e:  # e.g. an integer with more digits than Python converts
        raise ResultsError(f"{path}: not JSON this tool can read: {e}") from e
    first = next(non_json_values(doc), None)
    if first:
        parts, value = first
        raise ResultsError(f"{path}: not plain JSON at {json_path(parts)}: {non_json_problem(value)}")
    return doc


def read_document(path):
    """The parsed JSON of path (read_json); ResultsError also when it is not
    a sextant results document."""
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_ID:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ResultsError(f"{path}: not a {SCHEMA_ID} document (schema: {reprlib.repr(found)})")
    return doc


def load_runs(paths, read=read_document):
    """Runs in the order given, each with a short unique label. read(path)
    gives the document (schema.read_valid_document to refuse invalid ones)."""
    runs = []
    for i, path in enumerate(paths):
        doc = read(path)
        runs.append(Run(path=path, doc=doc, index=i, cases=list(doc.get("cases", []))))
    for run, label in zip(runs, run_labels(runs)):
        run.label = label
    return runs


def run_labels(runs):
    """'Intel Xeon x4' per run; the start time is added where two would clash."""
    base = [f"{r.device_name()} x{r.system.get('world_size', '?')}" for r in runs]
    labels = []
    for r, b in zip(runs, base):
        labels.append(b if base.count(b) == 1 else f"{b} {r.run.get('start', r.index)}")
    # Still equal (same machine, same second): number them.
    return [l if labels.count(l) == 1 else f"{l} #{i + 1}" for i, l in enumerate(labels)]


def expand_paths(paths):
    """Files as given; folders contribute their *.json files, searched
    recursively and sorted, except JSON documents with no "schema" at all
    (what benchmarks write beside results, e.g. in a device check's folder)
    and the schema itself. So `results/` and `results/*/*.json` both work; an
    unreadable file is kept, for the tool to report."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(os.path.join(d, f) for d, _, files in os.walk(p) for f in files if f.endswith(".json"))
            out += [f for f in found if not is_other_document(f)]
        else:
            out.append(p)
    return [p for p in out if os.path.basename(p) != "schema.json"]


def is_other_document(path):
    """Readable JSON that does not claim any schema: not a results file."""
    try:
        doc = read_json(path)
    except ResultsError:
        return False
    return not isinstance(doc, dict) or "schema" not in doc


# ---- values Python's json reads that JSON has no place for ----------------

class NonFiniteToken:
    """What json.loads gives for NaN, Infinity and -Infinity here (instead of
    a float), so that the error can quote the token as written."""

    def __init__(self, token):
        self.token = token

    def __repr__(self):
        return self.token


def is_non_json(value):
    """NaN or an infinity (token or float), an integer beyond a double's
    range (other languages' readers cannot keep it), or a string with an
    unpaired surrogate (a lone \\udXXX escape: not text, cannot be printed
    or written as UTF-8)."""
    if isinstance(value, NonFiniteToken):
        return True
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) > sys.float_info.max
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
    return False


def non_json_problem(value):
    """What is wrong with a value is_non_json accepts, for a message."""
    if isinstance(value, (NonFiniteToken, float)):  # a written 1e999 reads as the float inf
        return f"{value!r} is not a finite number (null stands for a value that could not be computed)"
    if isinstance(value, int):
        return f"an integer of {value.bit_length()} bits is beyond a double's range"
    return f"{reprlib.repr(value)} has an unpaired surrogate: not Unicode text"  # repr escapes it


def non_json_values(doc):
    """(path parts, value) of every value (and key) is_non_json accepts, in
    document order. Iterative, so any nesting depth is fine."""
    stack = [((), doc)]
    while stack:
        parts, value = stack.pop()
        if isinstance(value, dict):
            for k, v in reversed(list(value.items())):
                stack.append(((*parts, k), v))
                if is_non_json(k):
                    stack.append(((*parts, k), k))
        elif isinstance(value, list):
            stack.extend(((*parts, i), v) for i, v in reversed(list(enumerate(value))))
        elif is_non_json(value):
            yield parts, value


def json_path(parts):
    """['cases', 3, 'conformance'] -> '$.cases[3].conformance'. Keys that are
    not plain words are quoted (JSON escapes), so a path is always one line."""
    out = "$"
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and PLAIN_KEY.fullmatch(p):
            out += f".{p}"
        else:
            out += f"[{json.dumps(str(p))}]"
    return out


PLAIN_KEY = re.compile(r"[A-Za-z0-9_+-]+")


# ---- accessors for one case record ------------------------------------------

def metric(case, name):
    """perf.metrics.<name>.value as a float, or None when absent or null."""
    m = case.get("perf", {}).get("metrics", {}).get(name)
    if isinstance(m, dict):
        v = m.get("value")
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    return None


def metric_unit(case, name):
    m = case.get("perf", {}).get("metrics", {}).get(name)
    return m.get("unit") if isinstance(m, dict) else None


def extra(case, name):
    """A structured metric (timeline, time_split, losses, ...) or None."""
    return case.get("perf", {}).get("metrics", {}).get(name)


def median_time(case, region=None):
    """Median seconds of a region (the first one recorded when None)."""
    times = case.get("perf", {}).get("time", {})
    if not times:
        return None
    stats = times.get(region) if region else next(iter(times.values()))
    return stats.get("median") if stats else None


def param(case, key, default=None):
    return case.get("params", {}).get(key, default)


def par(case, dim):
    """Parallel size of one dimension (tp, cp, ep, ...)."""
    return case.get("parallel", {}).get(dim, 1)


def status(case):
    """pass, fail, skip, or error (the case could not run)."""
    if case.get("error"):
        return "error"
    return case.get("conformance", {}).get("status", "skip")


def parallel_text(case):
    """'tp2 cp2' : the dimensions above 1 (or 'tp1' when none is)."""
    p = case.get("parallel", {})
    shown = ["tp", "cp", "ep", "pp", "dp", "vpp"]
    if p.get("ep", 1) > 1 and p.get("etp", p.get("tp", 1)) != p.get("tp", 1):
        shown.insert(3, "etp")  # expert TP only where it differs from tp
    parts = [f"{d}{p[d]}" for d in shown if p.get(d, 1) > 1]
    if p.get("sp"):
        parts.append("sp")
    return " ".join(parts) or "tp1"


def cases_of(runs, suite):
    """(run, case) for every case of a suite, over all runs."""
    return [(r, c) for r in runs for c in r.cases if c.get("suite") == suite]


def distinguishing_params(cases, same_point, exclude=()):
    """Param names (and "dtype") that take several values among cases that
    would otherwise land on the same point (same_point(case) equal): these
    must go into series labels. A param that changes only along the x axis
    (e.g. seq scaled with cp) is not one of them."""
    values = {}
    for c in cases:
        fields = dict(c.get("params", {}), dtype=c.get("dtype"))
        for k, v in fields.items():
            if k not in exclude:
                values.setdefault((k, same_point(c)), set()).add(json.dumps(v, sort_keys=True))
    return sorted({k for (k, _), vals in values.items() if len(vals) > 1})


# ---- per-rank timings and suspects (the screen suite) ----------------------

STRAGGLER_LIMIT = 1.5  # a straggler_score above this (rank median / typical) is worth a look


def primary_region(case):
    """(region name, time_stats) of the case's first timed region, or (None, None)."""
    times = case.get("perf", {}).get("time", {})
    return next(iter(times.items())) if times else (None, None)


def per_rank(case):
    """time.<primary region>.per_rank (each rank's own figures), or None."""
    _, stats = primary_region(case)
    return stats.get("per_rank") if stats else None


def max_straggler(case):
    """(largest straggler_score, its rank) of the primary region, or (None, None)."""
    scores = (per_rank(case) or {}).get("straggler_score") or []
    if not scores:
        return None, None
    rank = max(range(len(scores)), key=lambda r: scores[r])
    return scores[rank], rank


def suspects(case):
    """perf.metrics.suspects: the ranks, links and nodes the case names ([] when none)."""
    found = extra(case, "suspects")
    return found if isinstance(found, list) else []


def suspect_where(s):
    """'rank 5 (nodeB)', 'ranks 1<->6 (nodeA<->nodeB)', 'node 1 (nodeB)': who a suspect names."""
    if s.get("kind") == "slow_link" and s.get("ranks"):
        who = "ranks " + "<->".join(str(r) for r in s["ranks"])
    elif s.get("kind") == "slow_node" or s.get("rank") is None:
        who = f"node {s.get('node', '?')}"
    else:
        who = f"rank {s['rank']}"
    gpu = f", gpu {s['gpu']}" if s.get("gpu") is not None else ""
    return f"{who} ({s.get('host', '?')}{gpu})"

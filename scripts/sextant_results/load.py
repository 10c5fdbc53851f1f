"""Results files as Python objects, and accessors that read a case record the
way results/METRICS.md describes it. Case records stay plain dicts: the JSON
is the contract, these helpers only name the paths into it."""
import json
import os
import re
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
        return all((extra(c, "comm") or {}).get("timings_representative", True) is not False for c in self.cases)


def short_device_name(name):
    """'Intel(R) Xeon(R) Processor' -> 'Intel Xeon'; 'NVIDIA H200' stays."""
    name = re.sub(r"\((R|TM|tm|r)\)", "", name)
    name = re.sub(r"\b(Processor|CPU)\b", "", name)
    name = re.sub(r"@.*$", "", name)
    return " ".join(name.split()) or "unknown device"


def read_document(path):
    """The parsed JSON of path; ResultsError when unreadable or not sextant's."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise ResultsError(f"{path}: cannot read: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_ID:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ResultsError(f"{path}: not a {SCHEMA_ID} document (schema: {found!r})")
    return doc


def load_runs(paths):
    """Runs in the order given, each with a short unique label."""
    runs = []
    for i, path in enumerate(paths):
        doc = read_document(path)
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
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return False
    return not isinstance(doc, dict) or "schema" not in doc


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

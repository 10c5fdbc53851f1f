"""Validation of results documents: results/schema.json (JSON Schema draft
2020-12), then the consistency rules a schema cannot state (ids unique, the
summary matches the cases, parallel sizes multiply to the rank count)."""
import json
import re

from .load import SCHEMA_PATH

try:
    import jsonschema
except ImportError as e:  # the caller prints this; pip install -r scripts/requirements.txt
    raise ImportError("validation needs jsonschema: python3 -m pip install -r scripts/requirements.txt") from e


def load_schema(path=SCHEMA_PATH):
    with open(path, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def json_path(parts):
    """['cases', 3, 'conformance'] -> '$.cases[3].conformance'."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _deepest(error):
    """The most specific error under an if/then or allOf (best_match stops early)."""
    while error.context:
        error = max(error.context, key=lambda e: len(e.absolute_path))
    return error


def schema_problems(doc, schema):
    """(json path, message) per violation, document order."""
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for error in validator.iter_errors(doc):
        error = _deepest(error)
        problems.append((json_path(error.absolute_path), error.message))
    return sorted(problems, key=lambda p: _path_key(p[0]))


def _path_key(path):
    # Numeric order for indices, so cases[10] sorts after cases[9].
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"[\[\].]+", path) if t]


def consistency_problems(doc):
    """Rules across fields. Call only on a schema-valid document."""
    problems = []
    cases = doc["cases"]
    seen = {}
    for i, c in enumerate(cases):
        if c["id"] in seen:
            problems.append((f"$.cases[{i}].id", f"duplicate id {c['id']!r} (also cases[{seen[c['id']]}])"))
        seen.setdefault(c["id"], i)
        p = c["parallel"]
        product = p["tp"] * p["cp"] * p["pp"] * p["dp"]
        if product != c["ranks"]:
            problems.append((f"$.cases[{i}].parallel",
                             f"tp*cp*pp*dp = {p['tp']}*{p['cp']}*{p['pp']}*{p['dp']} = {product} "
                             f"must equal ranks {c['ranks']}"))
        if c["ranks"] > doc["system"]["world_size"]:
            problems.append((f"$.cases[{i}].ranks",
                             f"ranks {c['ranks']} exceeds the world size {doc['system']['world_size']}"))
    problems += _summary_problems(doc)
    return problems


def _summary_problems(doc):
    counts = {"cases": len(doc["cases"]), "pass": 0, "fail": 0, "skip": 0, "error": 0}
    for c in doc["cases"]:
        counts["error" if c.get("error") else c["conformance"]["status"]] += 1
    summary = doc["run"]["summary"]
    return [(f"$.run.summary.{k}", f"says {summary[k]} but the cases give {v}")
            for k, v in counts.items() if summary[k] != v]


def validate_document(doc, schema):
    """All problems: schema first; consistency only when the schema holds."""
    problems = schema_problems(doc, schema)
    return problems if problems else consistency_problems(doc)

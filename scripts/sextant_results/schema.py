"""Validation of results documents: results/schema.json (JSON Schema draft
2020-12) with every number finite, then the consistency rules a schema
cannot state (ids unique, the summary matches the cases, parallel sizes
multiply to the rank count, per-rank figures have one entry per rank).

JSON Schema has no word for "finite": Python's json reads NaN and Infinity
and jsonschema counts them as numbers. So the schema check here also walks
the document for numbers that are not finite doubles (load.non_json_values;
read_document refuses them in files, this catches documents built in Python).
Where the schema allows null for a number, null stays allowed."""
import re
import reprlib

from .load import (SCHEMA_PATH, ResultsError, json_path, non_json_problem, non_json_values, read_document, read_json,
                   suspects)

try:
    import jsonschema
except ImportError as e:  # the caller prints this; pip install -r scripts/requirements.txt
    raise ImportError("validation needs jsonschema: python3 -m pip install -r scripts/requirements.txt") from e


def load_schema(path=SCHEMA_PATH):
    """The schema at path, checked against draft 2020-12; ResultsError otherwise."""
    schema = read_json(path)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        raise ResultsError(f"{path}: not a draft 2020-12 JSON Schema: {e.message}") from e
    return schema


def _deepest(error):
    """The most specific error under an if/then or allOf (best_match stops early)."""
    while error.context:
        error = max(error.context, key=lambda e: len(e.absolute_path))
    return error


def schema_problems(doc, schema):
    """(json path, message) per violation, document order: values JSON has
    no place for (non-finite numbers above all), and what the schema rejects."""
    problems = [(json_path(parts), non_json_problem(value)) for parts, value in non_json_values(doc)]
    validator = jsonschema.Draft202012Validator(schema)
    for error in validator.iter_errors(doc):
        error = _deepest(error)
        problems.append((json_path(error.absolute_path), _message(error)))
    return sorted(problems, key=lambda p: _path_key(p[0]))


MESSAGE_LIMIT = 200
SHORT = reprlib.Repr()
SHORT.maxstring, SHORT.maxother, SHORT.maxlevel = 60, 60, 2


def _message(error):
    """jsonschema's message on one short line: it quotes the offending value
    whole, which for a replaced case or list can run to megabytes."""
    message = error.message
    if len(message) > MESSAGE_LIMIT:
        message = message.replace(repr(error.instance), SHORT.repr(error.instance))
    if len(message) > 2 * MESSAGE_LIMIT:
        message = message[:2 * MESSAGE_LIMIT] + "..."
    return message


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
        problems += _timing_shape_problems(i, c) + _screen_shape_problems(i, c)
    problems += _summary_problems(doc)
    return problems


def _length_problem(parts, values, n, what):
    """[(path, message)] when the list at parts does not have n entries."""
    if len(values) == n:
        return []
    return [(json_path(parts), f"has {len(values)} entries but {what} {n}")]


def _timing_shape_problems(i, case):
    """per_rank arrays and per_iteration rows: one per rank of the group, each row one per iteration."""
    n, problems = case["ranks"], []
    for region, stats in case["perf"]["time"].items():
        at = ["cases", i, "perf", "time", region]
        for name, values in stats.get("per_rank", {}).items():
            problems += _length_problem(at + ["per_rank", name], values, n, "the case has ranks")
        per_iteration = stats.get("per_iteration")
        if per_iteration:
            iters = len(per_iteration["max"])
            problems += _length_problem(at + ["per_iteration", "max"], per_iteration["max"], stats["iters"],
                                        "the region has iters")
            problems += _length_problem(at + ["per_iteration", "by_rank"], per_iteration["by_rank"], n,
                                        "the case has ranks")
            for r, row in enumerate(per_iteration["by_rank"]):
                problems += _length_problem(at + ["per_iteration", "by_rank", r], row, iters,
                                            "per_iteration.max has")
    return problems


def _screen_shape_problems(i, case):
    """The screen's per-rank figures and the ranks its suspects name lie within the case's group."""
    n, problems = case["ranks"], []
    metrics = case["perf"]["metrics"]
    at = ["cases", i, "perf", "metrics"]
    for name in ("tflops_per_rank", "tflops_attention_per_rank", "output_hash_per_rank"):
        if case["suite"] == "screen" and isinstance(metrics.get(name), list):
            problems += _length_problem(at + [name], metrics[name], n, "the case has ranks")
    matrix = metrics.get("link_matrix") if case["suite"] == "screen" else None
    if matrix:
        if matrix["ranks"] != n:
            problems.append((json_path(at + ["link_matrix", "ranks"]),
                             f"is {matrix['ranks']} but the case has ranks {n}"))
        problems += _length_problem(at + ["link_matrix", "hosts"], matrix["hosts"], n, "the case has ranks")
        for name in ("bandwidth_GBps", "latency_us", "class"):
            problems += _length_problem(at + ["link_matrix", name], matrix[name], n, "the case has ranks")
            for r, row in enumerate(matrix[name]):
                problems += _length_problem(at + ["link_matrix", name, r], row, n, "the case has ranks")
    for k, s in enumerate(suspects(case)):
        named = ([s["rank"]] if "rank" in s else []) + s.get("ranks", [])
        if any(r >= n for r in named):
            problems.append((json_path(at + ["suspects", k]),
                             f"names rank {max(named)} but the case has ranks {n} (0 to {n - 1})"))
    return problems


def _summary_problems(doc):
    counts = {"cases": len(doc["cases"]), "pass": 0, "fail": 0, "skip": 0, "error": 0}
    for c in doc["cases"]:
        counts["error" if c.get("error") else c["conformance"]["status"]] += 1
    summary = doc["run"]["summary"]
    problems = [(f"$.run.summary.{k}", f"says {summary[k]} but the cases give {v}")
                for k, v in counts.items() if summary[k] != v]
    named = sum(len(suspects(c)) for c in doc["cases"])
    if "suspects" in summary and summary["suspects"] != named:
        problems.append(("$.run.summary.suspects", f"says {summary['suspects']} but the cases name {named} "
                                                   f"(perf.metrics.suspects)"))
    return problems


def validate_document(doc, schema):
    """All problems: schema first; consistency only when the schema holds."""
    problems = schema_problems(doc, schema)
    return problems if problems else consistency_problems(doc)


def first_problem_text(problems):
    """'at $.cases[3]: message (+2 more)': the first problem of several."""
    where, message = problems[0]
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"at {where}: {message}{more}"


def read_valid_document(path, schema):
    """The results document at path when the schema holds for it; else
    ResultsError with the first problem. What report.py and compare.py read:
    after this every field they use has its type. The consistency rules are
    left to validate.py: the tools do not depend on them."""
    doc = read_document(path)
    problems = schema_problems(doc, schema)
    if problems:
        raise ResultsError(f"{path}: invalid {first_problem_text(problems)} "
                           f"(scripts/validate.py --all lists every problem)")
    return doc

#!/usr/bin/env python3
"""Line and branch coverage of kernels/ and reference/ by the ci sweep alone.

Builds the host code with gcov instrumentation (CMake's Coverage build type,
CUDA off) into BUILD, runs `sextant run --profile ci --ranks 1,2,4,8` under
mpirun and nothing else, and reads the counters with gcovr. It prints per
file the line and branch coverage, the functions never entered, and every
line left unreached with its reason:

  error path     a statement that throws, or a block that only a refused
                 input or a failed invariant enters (bad-input tests reach
                 these, a passing sweep cannot);
  planted fault  a block entered only under --fault (a guard at any depth,
                 a variable set from a planted fault, a function every
                 caller in the project calls under one);
  device path    a block entered only when a tensor lives on a CUDA device
                 (a negated is_host() test, the else of one, or after an
                 is_host() test that returns; the host build cannot run it);
  scope end      a closing brace that every path leaves by an earlier
                 return, a return after a switch that returns for every
                 value, a type's declaration (gcov counts each as a line);
  not swept      anything else, with the reason from KNOWN below where one
                 is known.

The goal applies to the lines a passing host run can reach: all lines less
the error, fault and device paths. It fails (exit 1) when the covered share
of those in kernels/ is under --goal; the raw share of all lines is
printed beside it. --json writes every figure and every unreached line.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GATED = "kernels/"
# Measured and listed, outside the goal: the planner estimates configs for
# `sextant plan` and computes no result a conformance check could compare.
OUTSIDE_GOAL = {"kernels/planner/": "the planner (`sextant plan`): estimates, not kernel results"}
MEASURED = ("kernels/", "reference/")
EXCLUDED = (r".*_test\.cc$", r".*_bench\.cc$", r".*/testing/.*", r".*\.cu$", r".*\.cuh$")

# Unreached code with a reason the text of the line does not show: (file
# regex, function regex, kind, reason). A line matching none of these and no
# pattern below is "not swept, no reason known".
KNOWN = [
    (r"kernels/planner/planner(_presets)?\.cc", r".*", "not swept",
     "`sextant plan` (the planner's search over configs), not `sextant run`"),
    (r"kernels/planner/calibration\.cc", r".*(calibration_from_results|from_json|metric|median|usable).*",
     "not swept", "reads a stored results file (--set calibration=FILE, sextant plan --calibration)"),
    (r"kernels/pipeline/validate\.cc", r".*check_.*|.*fail.*|.*row_end.*|.*at\(.*", "error path",
     "a schedule that breaks a rule (validate_test builds one per rule)"),
    (r"kernels/pipeline/schedule\.cc", r".*format_grid.*|.*type_letter.*", "error path",
     "draws the grid of a schedule that failed validation, for its error message"),
    (r"kernels/pipeline/schedule\.h", r".*ScheduleError.*|<unknown function.*", "error path",
     "the error a schedule that failed validation throws"),
    (r"kernels/pipeline/(executor|p2p_order)\.cc", r".*(describe_tag|op_text|check_stream_order|check_plans_agree).*",
     "error path", "names the messages of a stuck or mismatched exchange, for its error"),
    (r"kernels/model/indexed_dataset\.cc", r".*(token_value|item_size_of).*", "not swept",
     "dataset dtypes other than the uint16 the sweep writes (the reader's unit test reads each)"),
    (r"kernels/ops/simd\.cc", r".*", "not swept",
     "SEXTANT_SIMD_LANES and the CPU's other vector widths: one per machine"),
    (r"kernels/ops/simd\.h", r".*", "not swept", "the vector widths this CPU does not select"),
    (r"kernels/ops/gemm\.cc", r".*gemm_host.*", "not swept", "gemm on f16 or f64 storage: no swept op multiplies in them"),
    (r"kernels/ops/vector_math\.h", r".*", "not swept", "f64 storage (--dtype f64): the swept ops run f32, bf16, f16"),
    (r"kernels/ops/attention_impl\.cc", r".*(attention_impl_name|fused_attention_supports).*", "device path",
     "the cuDNN choice, made only for CUDA tensors or a user's --set attention_impl"),
    (r"kernels/ops/attention_block\.cc", r".*fused_supports.*", "device path", "asked only for CUDA tensors"),
    (r"kernels/ops/fp8\.cc", r".*fp8_decode.*", "error path", "e5m2's infinity and NaN codes: a saturating encode "
     "never writes them"),
    (r"kernels/ops/fp8_recipe\.cc", r".*require_fp8_options_apply.*", "not swept",
     "checks a user's --set fp8_recipe; the sweeps' recipes come from the code"),
    (r"kernels/model/indexed_dataset\.cc", r".*write_indexed_dataset.*", "not swept",
     "token dtypes the sweep never writes: it writes uint16, or int32 past a vocab of 65536"),
    (r"kernels/model/split_linear\.cc", r".*", "not swept",
     "mixed or f64 storage: the step's operands are both f32 or both bf16"),
    (r"kernels/model/gpt_config\.cc", r".*moe_layer_pattern.*", "not swept",
     "a user's --set moe_pattern; the recipes place MoE layers by moe_every"),
    (r"kernels/pipeline/schedules\.cc", r".*find_schedule.*", "not swept",
     "a user's schedule file (--set schedule=csv)"),
    (r"reference/gpt\.cc", r".*(split_tokens|gpt_loss|gpt_forward_backward)\([^)]*span<long const, \d+ul>(, long)+\)",
     "not swept", "the token-stream overloads the reference's unit tests call"),
    (r"reference/gpt\.cc", r".*gpt_loss\(.*", "not swept", "the loss alone: the reference's unit tests call it"),
    (r"reference/(gpt|moe)\.cc", r".*(follows_within_band|gpt_forward_backward).*", "not swept",
     "only when a run routes a token to other experts than the reference at a near tie (suites/step/check.cc)"),
    (r"reference/packed_attention\.cc", r".*packed_attention_rows.*", "not swept",
     "the spot reference of packed streams: qualify's sizes, past the full reference's limit (attention/sweep.cc)"),
    # Called by unit tests only: helpers the library keeps beside what they test.
    (r"kernels/attention/packing\.cc", r".*causal_pairs\(.*", "not swept", "called by packing_test only"),
    (r"kernels/model/data\.cc", r".*global_tokens.*", "not swept", "called by the data and reference unit tests only"),
    (r"kernels/ops/attention_mask\.cc", r".*key_visible.*", "not swept", "called by the attention unit tests only"),
    (r"kernels/ops/random\.cc", r".*random_tensor.*", "device path", "called by the CUDA benches and tests only"),
    (r"kernels/pipeline/executor\.(cc|h)", r".*StageCompute::(backward|synchronize).*", "not swept",
     "StageCompute's defaults: the swept stages override them, the executor's test stages do not"),
    (r"kernels/.*_faults\.h", r".*rules::.*", "planted fault", "a fault's rule: asked only when the fault is planted"),
    (r"kernels/moe/permute\.cc", r".*slots_in_token_order.*", "planted fault",
     "the order a planted unpermute fault reads"),
    (r"kernels/tensor_parallel/shard\.cc", r".*swap_outer_and_parts.*", "device path",
     "called only for tensors off the host"),
    (r"kernels/attention/packing\.cc", r".*parse_integer.*", "error path",
     "text that is not a whole number: the caller refuses it"),
]

# Kinds a passing host run cannot reach; the goal counts the other lines.
UNREACHABLE_BY_DESIGN = ("error path", "planted fault", "device path", "scope end")
THROW = re.compile(r"\bthrow\b|\brequire\s*\(|\bcatch\s*\(|\bcheck_usage\s*\(|\bMPI_Abort\b")
FAULT = re.compile(r"(?<![a-z])fault", re.IGNORECASE)  # not "default"
DEVICE_CODE = re.compile(r"SEXTANT_CUDA_CALL|Device::cuda|\bcuda::|\bcuda_\w+\(")
DEVICE = re.compile(r"\bon_device\b|\bis_device\b|Device::cuda|\bcuda\b|\bCUDA\b|\bdevice_\w*\(|\bgpu\b")


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def build(build_dir):
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        run(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Coverage", "-DSEXTANT_CUDA=OFF",
             "-DCMAKE_CXX_FLAGS_COVERAGE=--coverage -O1 -DNDEBUG", "-DCMAKE_EXE_LINKER_FLAGS_COVERAGE=--coverage"])
    run(["cmake", "--build", build_dir, "--target", "sextant", "-j", str(os.cpu_count() or 2)])


def sweep(build_dir, ranks, np_):
    for dirpath, _, files in os.walk(build_dir):
        for f in files:
            if f.endswith(".gcda"):
                os.remove(os.path.join(dirpath, f))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    out = tempfile.mkdtemp(prefix="sextant-coverage-")
    try:
        cmd = ["bash", "-c", f'source "{ROOT}/scripts/openblas_coretype.sh" && exec mpirun --oversubscribe -np {np_} '
               f'"{build_dir}/sextant" run --profile ci --ranks {ranks} -q -o "{out}"']
        run(cmd, env=env)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def gcovr_json(build_dir):
    cmd = ["gcovr", "--root", ROOT, "--object-directory", build_dir, "--json", "-", "--merge-lines",
           "--gcov-ignore-parse-errors=negative_hits.warn_once_per_file"]
    for m in MEASURED:
        cmd += ["--filter", re.escape(os.path.join(ROOT, m))]
    for e in EXCLUDED:
        cmd += ["--exclude", e]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def statement(lines, i):
    """The text of the statement line i (0-based) belongs to."""
    lo = i
    while lo > 0 and not re.search(r"[;{}]\s*(//.*)?$", lines[lo - 1]):
        lo -= 1
    hi = i
    while hi + 1 < len(lines) and not re.search(r"[;{}]\s*(//.*)?$", lines[hi]):
        hi += 1
    return " ".join(lines[lo:hi + 1])


def indent(s):
    return len(s) - len(s.lstrip())


IF_LINE = re.compile(r"\s*(}\s*else\s+)?if\s*\(")  # a line that opens an if or an else-if


def enclosing(lines, i):
    """The indices of the lines that decide whether line i runs, nearest
    first: each enclosing line of smaller indentation up to the function (an
    if, a case, a loop)."""
    out, level = [], indent(lines[i])
    for j in range(i - 1, -1, -1):
        s = lines[j]
        if not s.strip() or s.strip().startswith("//"):
            continue
        if indent(s) < level:
            out.append(j)
            level = indent(s)
            if level == 0:
                break
    return out


def controls(lines, i):
    """The statements of enclosing(lines, i)."""
    return [statement(lines, j) for j in enclosing(lines, i)]


def short_name(function):
    """`ns::(anonymous namespace)::name(args) [clone .x]` -> name."""
    function = function.replace("(anonymous namespace)::", "")
    head = function.split("(")[0] if "(" in function else function
    m = re.search(r"(\w+)(<.*>)?$", head.replace("[abi:cxx11]", ""))
    return m.group(1) if m else ""


def under_fault(lines, i, line_counts=False):
    """Whether a planted fault guards line i: any guard around it (the
    function's own line only where it is the nearest), a variable set from a
    fault that the nearest guard, an if, tests, or (line_counts) the line."""
    guards = controls(lines, i)
    if (line_counts and FAULT.search(lines[i])) or any(FAULT.search(g) for g in guards[:1] + guards[1:-1]):
        return True
    tests = [guards[0]] if guards and IF_LINE.match(guards[0]) else []
    if line_counts and "?" in lines[i]:
        tests.append(lines[i].split("?")[0])  # `planted ? call(...) : ...`
    if not tests:
        return False
    start = i
    while start > 0 and indent(lines[start]) > 0:
        start -= 1
    for name in re.findall(r"\b[a-z_]\w*\b", " ".join(tests)):
        for j in range(start, i):
            if re.search(r"\b" + re.escape(name) + r"\s*=[^=]", lines[j]) and FAULT.search(statement(lines, j)):
                return True
    return False


SOURCE_DIRS = ("kernels", "suites", "reference", "harness", "app")
_sources = None


def sources():
    """Every non-test source file of the project: path -> lines."""
    global _sources
    if _sources is None:
        _sources = {}
        for top in SOURCE_DIRS:
            for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
                for f in files:
                    if f.endswith((".cc", ".h")) and not re.search(r"_(test|bench)\.cc$|/testing/", dirpath + "/" + f):
                        with open(os.path.join(dirpath, f), encoding="utf-8") as src:
                            _sources[os.path.join(dirpath, f)] = src.read().split("\n")
    return _sources


def called_only_under_fault(name, path, lines):
    """Whether every call of `name` sits on a line a fault guards: in its own
    file (`path`, read as `lines`), and in every other source file of the
    project. Its definitions and comments are not calls."""
    def calls_in(text):
        found = [j for j, l in enumerate(text) if re.search(r"\b" + re.escape(name) + r"\s*\(", l)]
        return [j for j in found if not re.match(r"\s*(//|\w[\w:<>, ]*\s+" + re.escape(name) + r"\s*\()", text[j])]
    sites = [(lines, j) for j in calls_in(lines)]
    for other, text in sources().items():
        if os.path.abspath(other) != os.path.abspath(path):
            sites += [(text, j) for j in calls_in(text)]
    return bool(sites) and all(under_fault(text, j, line_counts=True) for text, j in sites)


HOST_TEST = re.compile(r"\bis_host\(\)|==\s*Device::host\b")
NOT_HOST = re.compile(r"!\s*[\w.>()\[\]-]*is_host\(\)")


def nearest_guard(lines, i):
    """The index of the nearest line around line i of smaller indentation, or -1."""
    around = enclosing(lines, i)
    return around[0] if around else -1


def host_test(lines, j):
    """Whether line j opens an `if` that holds for host tensors (an is_host() test, not negated)."""
    st = statement(lines, j)
    return IF_LINE.match(lines[j]) is not None and HOST_TEST.search(st) is not None \
        and NOT_HOST.search(st) is None


def returns(lines, j):
    """Whether the if on line j returns: on its own line or as its block's last statement."""
    if re.search(r"\breturn\b", statement(lines, j)):
        return True
    if not lines[j].rstrip().endswith("{"):
        return False
    for k in range(j + 1, len(lines)):
        if lines[k].strip() and indent(lines[k]) <= indent(lines[j]):
            last = [l for l in lines[j + 1:k] if l.strip()]
            return bool(last) and re.match(r"\s*return\b", last[-1]) is not None
    return False


def host_guarded(lines, i):
    """Whether line i runs only for tensors off the host: under a negated
    is_host() test, in the else of an is_host() test, or after an
    `if (...is_host()...)` of its block that returns."""
    g = nearest_guard(lines, i)
    if any(NOT_HOST.search(c) and not c.strip().startswith("}") for c in controls(lines, i)[:-1]):
        return True
    # The else of an is_host() test: `} else {` around line i, or line i an `else` statement.
    else_line = g if g >= 0 and lines[g].strip().startswith("} else") else (
        i if lines[i].strip().startswith("else") else -1)
    if else_line >= 0:
        for j in range(else_line - 1, -1, -1):
            if lines[j].strip() and indent(lines[j]) == indent(lines[else_line]) and \
                    IF_LINE.match(lines[j]):
                return host_test(lines, j)
            if lines[j].strip() and indent(lines[j]) < indent(lines[else_line]):
                break
    level = indent(lines[i])
    for j in range(i - 1, g, -1):
        if lines[j].strip() and indent(lines[j]) == level and host_test(lines, j) and returns(lines, j):
            return True
    return False


def after_full_switch(lines, i):
    """Whether line i is a lone return right after a switch's closing brace
    (the switch returns for every value of its enum)."""
    if not re.match(r"\s*return\b[^;]*;\s*(//.*)?$", lines[i]):
        return False
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    if j < 0 or lines[j].strip() != "}":
        return False
    level = indent(lines[j])
    for k in range(j - 1, -1, -1):
        if lines[k].strip() and indent(lines[k]) <= level:
            return indent(lines[k]) == level and re.match(r"\s*switch\s*\(", lines[k]) is not None
    return False


def reason_of(path, function, lines, i):
    text = statement(lines, i)
    if re.fullmatch(r"\s*}\s*(;)?\s*(//.*)?", lines[i]):
        return "scope end", "a closing brace that every path leaves by an earlier return"
    if DEVICE_CODE.search(text) or re.search(r"device|cuda", short_name(function), re.IGNORECASE):
        return "device path", "runs only on a CUDA device"
    guards = controls(lines, i)
    nearest = guards[0] if guards else ""
    if THROW.search(text) or (nearest and THROW.search(nearest) and "catch" in nearest):
        return "error path", "throws on a refused input or a broken invariant"
    # The innermost guard decides; an else takes its if's condition.
    if nearest and FAULT.search(nearest):
        return "planted fault", "runs only under --fault"
    if FAULT.search(text) and re.search(r"\bif\b|\?", text):
        return "planted fault", "runs only under --fault"
    if nearest and DEVICE.search(nearest):
        return "device path", "runs only on a CUDA device"
    if host_guarded(lines, i):
        return "device path", "runs only for tensors off the host"
    if under_fault(lines, i):
        return "planted fault", "runs only under --fault"
    if after_full_switch(lines, i):
        return "scope end", "after a switch that returns for every value"
    if re.match(r"\s*(struct|class)\s+\w+[^;]*{\s*$", lines[i]) or (
            function.startswith("<unknown function") and re.match(r"\s*[\w:<>]+\s+\w+\s*=\s*[^;]+;", lines[i])):
        return "scope end", "a declaration gcov counts as a line (the type's implicit members)"
    if DEVICE.search(text) and re.search(r"\bif\b|\?", text):
        return "device path", "runs only on a CUDA device"
    body = [l.strip() for l in lines[i:i + 3]]
    if nearest and any(THROW.search(b) for b in body[1:2]) and re.search(r"\bif\b", nearest + text):
        return "error path", "the branch that leads to a throw"
    name = short_name(function)
    if name and called_only_under_fault(name, os.path.join(ROOT, path), lines):
        return "planted fault", f"{name} is called only under --fault"
    for file_re, func_re, kind, why in KNOWN:
        if re.fullmatch(file_re, path) and re.fullmatch(func_re, function or ""):
            return kind, why
    return "not swept", "no reason known"


def analyse(data):
    files = []
    for f in data["files"]:
        path = os.path.relpath(os.path.join(ROOT, f["file"]), ROOT) if not os.path.isabs(f["file"]) else \
            os.path.relpath(f["file"], ROOT)
        with open(os.path.join(ROOT, path), encoding="utf-8") as src:
            lines = src.read().split("\n")
        # One entry per line and function that holds it (a template's
        # instances, an inline function's copies): a line is reached when
        # any of them ran; its branches are those of every copy.
        merged = {}
        for l in f["lines"]:
            if l.get("gcovr/noncode"):
                continue
            m = merged.setdefault(l["line_number"], {"count": 0, "functions": [], "branches": {}})
            m["count"] += l["count"]
            m["functions"].append(l.get("function_name") or "")
            for i, b in enumerate(l.get("branches", [])):
                key = (b.get("blockno", 0), b.get("branchno", i))
                m["branches"][key] = m["branches"].get(key, 0) + b["count"]
        code = list(merged.values())
        covered = [l for l in code if l["count"] > 0]
        branches = [c for l in code for c in l["branches"].values()]
        unreached = []
        for n, l in sorted(merged.items()):
            if l["count"] > 0:
                continue
            function = l["functions"][0]
            kind, why = reason_of(path, function, lines, n - 1)
            unreached.append({"line": n, "function": function, "kind": kind, "reason": why,
                              "text": lines[n - 1].strip()})
        functions = [{"name": fn.get("demangled_name") or fn.get("name"), "line": fn.get("lineno")}
                     for fn in f.get("functions", []) if fn.get("execution_count", 0) == 0]
        files.append({"file": path, "lines": len(code), "covered": len(covered), "branches": len(branches),
                      "branches_taken": sum(1 for c in branches if c > 0), "unreached": unreached,
                      "functions_unreached": functions})
    return sorted(files, key=lambda x: x["file"])


def summary(files, prefix, outside=()):
    sel = [f for f in files if f["file"].startswith(prefix) and not f["file"].startswith(tuple(outside))]
    lines = sum(f["lines"] for f in sel)
    covered = sum(f["covered"] for f in sel)
    by_kind = {}
    for f in sel:
        for u in f["unreached"]:
            by_kind[u["kind"]] = by_kind.get(u["kind"], 0) + 1
    excluded = sum(by_kind.get(k, 0) for k in UNREACHABLE_BY_DESIGN)
    reachable = lines - excluded
    return {"prefix": prefix, "outside_goal": sorted(outside), "lines": lines, "covered": covered, "raw": covered / lines if lines else 1.0,
            "reachable": reachable, "reachable_covered": covered / reachable if reachable else 1.0,
            "unreached_by_kind": by_kind,
            "branches": sum(f["branches"] for f in sel), "branches_taken": sum(f["branches_taken"] for f in sel)}


def pct(a, b):
    return f"{100.0 * a / b:5.1f}%" if b else "   - "


def report(files, sums, verbose):
    print(f"{'file':54} {'lines':>12} {'branches':>12} unreached")
    for f in files:
        print(f"{f['file']:54} {pct(f['covered'], f['lines']):>7} {f['lines']:4} "
              f"{pct(f['branches_taken'], f['branches']):>7} {f['branches']:4} {len(f['unreached'])}")
    print()
    for s in sums:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(s["unreached_by_kind"].items()))
        less = "".join(f" less {o}" for o in s["outside_goal"])
        print(f"{s['prefix']}{less}: lines {s['covered']}/{s['lines']} = {100 * s['raw']:.1f}% raw; "
              f"{100 * s['reachable_covered']:.1f}% of the {s['reachable']} lines a passing host run can reach; "
              f"branches {pct(s['branches_taken'], s['branches']).strip()}; unreached: {kinds}")
    print("\nfunctions never entered:")
    for f in files:
        for fn in f["functions_unreached"]:
            print(f"  {f['file']}:{fn['line']} {fn['name']}")
    print("\nunreached lines (file:line kind: reason | source):")
    for f in files:
        for u in f["unreached"]:
            if verbose or u["kind"] == "not swept":
                print(f"  {f['file']}:{u['line']} {u['kind']}: {u['reason']} | {u['text'][:90]}")
    if not verbose:
        print("  (error, fault and device lines: --verbose or --json)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build-cov"), help="coverage build directory")
    parser.add_argument("--ranks", default="1,2,4,8")
    parser.add_argument("--np", type=int, default=8, help="MPI processes")
    parser.add_argument("--goal", type=float, default=95.0, help="percent of reachable kernels/ lines")
    parser.add_argument("--json", help="write the figures and every unreached line here")
    parser.add_argument("--no-build", action="store_true", help="use the build as it is")
    parser.add_argument("--no-run", action="store_true", help="read the counters the last run left")
    parser.add_argument("--verbose", action="store_true", help="list the error, fault and device lines too")
    args = parser.parse_args(argv)
    build_dir = os.path.abspath(args.build)
    if not args.no_build:
        build(build_dir)
    if not args.no_run:
        sweep(build_dir, args.ranks, args.np)
    files = analyse(gcovr_json(build_dir))
    sums = [summary(files, GATED, OUTSIDE_GOAL)] + [summary(files, p) for p in MEASURED]
    report(files, sums, args.verbose)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"goal_percent": args.goal, "summary": sums, "files": files}, f, indent=1)
    gated = sums[0]
    ok = 100 * gated["reachable_covered"] >= args.goal
    for o, why in OUTSIDE_GOAL.items():
        print(f"outside the goal: {o}: {why}")
    print(f"\ncoverage: {GATED} less {', '.join(OUTSIDE_GOAL)}: {100 * gated['reachable_covered']:.1f}% of reachable lines "
          f"({100 * gated['raw']:.1f}% raw), goal {args.goal:g}%: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

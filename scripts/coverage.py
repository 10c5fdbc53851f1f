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
  planted fault  a block entered only under --fault;
  device path    a block entered only when a tensor lives on a CUDA device
                 (the host build cannot run it);
  scope end      a closing brace that every path leaves by an earlier
                 return (gcov counts it as a line);
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
]

# Kinds a passing host run cannot reach; the goal counts the other lines.
UNREACHABLE_BY_DESIGN = ("error path", "planted fault", "device path", "scope end")
THROW = re.compile(r"\bthrow\b|\brequire\s*\(|\bcatch\s*\(|\bcheck_usage\s*\(|\bMPI_Abort\b")
FAULT = re.compile(r"fault", re.IGNORECASE)
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


def controls(lines, i):
    """The lines that decide whether line i runs: each enclosing line of
    smaller indentation up to the function (an if, a case, a loop)."""
    out, level = [], indent(lines[i])
    for j in range(i - 1, -1, -1):
        s = lines[j]
        if not s.strip() or s.strip().startswith("//"):
            continue
        if indent(s) < level:
            out.append(statement(lines, j))
            level = indent(s)
            if level == 0:
                break
    return out


def short_name(function):
    """`ns::(anonymous namespace)::name(args) [clone .x]` -> name."""
    function = function.replace("(anonymous namespace)::", "")
    head = function.split("(")[0] if "(" in function else function
    m = re.search(r"(\w+)(<.*>)?$", head.replace("[abi:cxx11]", ""))
    return m.group(1) if m else ""


def called_only_under_fault(name, lines, definition):
    """Whether every call of `name` in its file sits on a line guarded by a fault."""
    calls = [j for j, l in enumerate(lines) if re.search(r"\b" + re.escape(name) + r"\s*\(", l) and j != definition]
    calls = [j for j in calls if not re.match(r"\s*(//|\w[\w:<>, ]*\s+" + re.escape(name) + r"\s*\()", lines[j])]
    return bool(calls) and all(FAULT.search(lines[j]) or any(FAULT.search(c) for c in controls(lines, j)[:1])
                               for j in calls)


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
    if DEVICE.search(text) and re.search(r"\bif\b|\?", text):
        return "device path", "runs only on a CUDA device"
    body = [l.strip() for l in lines[i:i + 3]]
    if nearest and any(THROW.search(b) for b in body[1:2]) and re.search(r"\bif\b", nearest + text):
        return "error path", "the branch that leads to a throw"
    name = short_name(function)
    if name and called_only_under_fault(name, lines, -1):
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

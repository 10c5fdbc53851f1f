#!/usr/bin/env python3
"""sextant qualify end to end on 2 ranks (--profile ci, the host expectations):

  * a verdict per criterion on stdout (status, measured, threshold, margin)
    and an exit status that follows it (0 PASS, 1 FAIL);
  * the results hold `qualification` and validate against results/schema.json;
  * JUnit has a "qualify" test suite, one test case per criterion;
  * the one-page HTML verdict is written beside the results, and
    scripts/report.py puts the verdict at the top of its report;
  * --baseline with the run's own results as the golden run, and thresholds
    it cannot meet, fail with exit 1; bad expectations files exit 2;
  * the screen runs first and its suspects are a section of the verdict: a
    planted bit flip fails the cluster, naming the rank, tensor and element;
  * the expectations file's [suspects.<rule>] tables set the screen's rules,
    the verdict lists each rule with its source, and --set overrides them.

    python3 qualify_test.py SEXTANT MPIEXEC
"""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(os.path.dirname(HERE), "scripts")


def check(condition, message):
    if not condition:
        raise AssertionError(message)
    print("ok:", message)


def qualify(sextant, mpiexec, out, *extra, ranks=2):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")
    cmd = [mpiexec, "-np", str(ranks), sextant, "qualify", "--profile", "ci", "-q", "-o", out, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def only(folder, suffix):
    files = sorted(f for f in os.listdir(folder) if f.startswith("sextant-") and f.endswith(suffix))
    assert len(files) == 1, f"{folder}: {files}"
    return os.path.join(folder, files[0])


def main():
    sextant, mpiexec = os.path.abspath(sys.argv[1]), sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run")
        r = qualify(sextant, mpiexec, out, "--junit", os.path.join(tmp, "junit") + "/")
        print(r.stdout[r.stdout.find("# qualify:"):])
        results = only(out, ".json")
        with open(results) as f:
            doc = json.load(f)
        q = doc["qualification"]
        check(r.returncode == (0 if q["verdict"] == "PASS" else 1), f"exit {r.returncode} follows {q['verdict']}")
        check("# qualify: " + q["verdict"] in r.stdout, "the verdict is printed")
        for row in q["criteria"]:
            check(row["criterion"] in r.stdout, f"{row['criterion']}: {row['status']}")
        rows = {row["criterion"]: row for row in q["criteria"]}
        check(rows["conformance"]["status"] == "PASS", "every case passes")
        for name in ("all_reduce_busbw_intra_GBps", "gemm_tflops", "attention_tflops", "step_mfu",
                     "pipeline_bubble_gap", "p2p_latency_intra_us", "all_to_all_v_busbw_intra_GBps"):
            check(rows[name]["measured"] is not None and rows[name]["threshold"] is not None,
                  f"{name} measured {rows[name]['measured']} against {rows[name]['threshold']}")
        check(rows["all_reduce_busbw_inter_GBps"]["status"] == "NOT MEASURED", "one node: inter-node not measured")
        v = subprocess.run([sys.executable, os.path.join(SCRIPTS, "validate.py"), results], capture_output=True, text=True)
        check(v.returncode == 0, f"the results validate: {v.stdout.strip()} {v.stderr.strip()}")
        junit = ET.parse(only(os.path.join(tmp, "junit"), ".xml")).getroot()
        suite = [s for s in junit.iter("testsuite") if s.get("name") == "qualify"]
        check(len(suite) == 1 and int(suite[0].get("tests")) == len(q["criteria"]), "JUnit: one test case per criterion")
        html = only(out, "-verdict.html")
        with open(html) as f:
            page = f.read()
        check("Cluster qualification" in page and f">{q['verdict']}</span>" in page, "the one-page HTML verdict")
        report = os.path.join(tmp, "report")
        rep = subprocess.run([sys.executable, os.path.join(SCRIPTS, "report.py"), results, "-o", report],
                             capture_output=True, text=True, env=dict(os.environ, MPLBACKEND="Agg"))
        check(rep.returncode == 0, f"report.py draws it: {rep.stderr[-500:]}")
        with open(os.path.join(report, "index.html")) as f:
            index = f.read()
        first = index.find("<h2")
        check(index.find("Cluster qualification: " + q["verdict"]) <= first + 30, "the verdict heads the report")

        # A golden run with thresholds no run reaches: the verdict fails.
        golden = os.path.join(tmp, "golden.json")
        for c in doc["cases"]:
            for key in ("busbw_GBps", "gflops"):
                if key in c["perf"]["metrics"]:
                    c["perf"]["metrics"][key]["value"] *= 1000
        with open(golden, "w") as f:
            json.dump(doc, f)
        r = qualify(sextant, mpiexec, os.path.join(tmp, "strict"), "--baseline", golden)
        check(r.returncode == 1 and "# qualify: FAIL" in r.stdout, f"a golden run 1000x faster fails (exit {r.returncode})")
        check("golden run" in r.stdout or "golden" in open(only(os.path.join(tmp, "strict"), ".json")).read(),
              "thresholds cite the golden run")

        first_case = doc["cases"][0]
        check(first_case["suite"] == "screen", f"the screen runs first: {first_case['id']}")
        check(isinstance(q["suspects"], list) and q["counts"]["suspects"] == len(q["suspects"]),
              f"the verdict lists its suspects: {len(q['suspects'])}")
        flip = os.path.join(tmp, "bitflip")
        # Three ranks: two agree, so the third's bits are the odd ones out.
        r = qualify(sextant, mpiexec, flip, "screen", "--fault", "bitflip", "--set", "fault_rank=1", ranks=3)
        named = json.load(open(only(flip, ".json")))["qualification"]["suspects"]
        check(r.returncode == 1 and "# qualify: FAIL" in r.stdout, f"a planted bit flip fails the cluster (exit {r.returncode})")
        check(len(named) == 1 and named[0]["kind"] == "sdc" and named[0]["rank"] == 1 and named[0]["tensor"] == "gemm.c",
              f"and names rank 1's gemm.c: {named}")
        check("# suspects: 1" in r.stdout and "sdc rank 1" in r.stdout, "the suspect is printed with the verdict")
        with open(only(flip, "-verdict.html")) as f:
            check("Suspects: 1" in f.read(), "and heads a section of the HTML verdict")

        # Suspect rules from the expectations file: an effect no planted
        # slow rank reaches names nobody; the user's --set wins over the file.
        # Four ranks: three healthy ones, so one oversubscribed rank cannot
        # widen the class's spread until it hides the slow one.
        lenient = os.path.join(tmp, "lenient.toml")
        with open(os.path.join(os.path.dirname(HERE), "results", "expectations", "host.toml")) as f:
            host_toml = f.read()
        with open(lenient, "w") as f:
            f.write(host_toml + '\n[suspects.tflops]\nmin_effect = 0.95\nnote = "only a rank at a twentieth"\n')
        slow = ("screen/compute", "--fault", "slow_rank", "--expectations", lenient)
        r = qualify(sextant, mpiexec, os.path.join(tmp, "lenient"), *slow, ranks=4)
        q = json.load(open(only(os.path.join(tmp, "lenient"), ".json")))["qualification"]
        rule = [x for x in q["suspect_rules"] if x["key"] == "tflops"][0]
        check(r.returncode == 0 and q["suspects"] == [], f"the file's rule names no 5x-slow rank (exit {r.returncode})")
        check(rule["min_effect"] == 0.95 and "lenient.toml [suspects.tflops]: only a rank" in rule["source"]
              and "only a rank at a twentieth" in r.stdout, f"the verdict says the rule and its source: {rule}")
        r = qualify(sextant, mpiexec, os.path.join(tmp, "strict_rule"), *slow, "--set", "tflops_effect=0.5", ranks=4)
        q = json.load(open(only(os.path.join(tmp, "strict_rule"), ".json")))["qualification"]
        check(r.returncode == 1 and [x["rank"] for x in q["suspects"]] == [3],
              f"--set tflops_effect=0.5 wins over the file and names rank 3 (exit {r.returncode})")
        with open(lenient, "a") as f:
            f.write('[suspects.tflopz]\nmin_effect = 0.5\nnote = "x"\n')
        r = qualify(sextant, mpiexec, os.path.join(tmp, "bad_rule"), "--expectations", lenient)
        check(r.returncode == 2 and "no such suspect rule (did you mean 'tflops'?)" in r.stderr,
              f"an unknown suspect rule exits 2: {r.stderr.strip()}")

        bad = os.path.join(tmp, "bad.toml")
        with open(bad, "w") as f:
            f.write('schema = "sextant.expectations/1"\nname = "x"\nversion = "1"\n[criteria.gemm_tflopz]\nthreshold = 1\n')
        r = qualify(sextant, mpiexec, os.path.join(tmp, "bad"), "--expectations", bad)
        check(r.returncode == 2 and "did you mean 'gemm_tflops'" in r.stderr, f"a bad file exits 2: {r.stderr.strip()}")
        check(not os.path.exists(os.path.join(tmp, "bad")) or not os.listdir(os.path.join(tmp, "bad")),
              "and writes nothing")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Several nodes on one machine: sextant across network namespaces.

Two "nodes" are network namespaces (ip netns, from iproute2) joined by veth
pairs to a bridge; OpenMPI starts its daemon on each through a launcher
agent (--mca plm_rsh_agent) that enters the node's namespace and gives it a
host name of its own (unshare --uts), and the ranks talk over TCP
(--mca btl tcp,self). Checked:

  * ranks per node and the host list are detected (MPI_COMM_TYPE_SHARED),
    not assumed: 2 nodes of 2 ranks;
  * node-aware grids: tp2 pp2 gets the order that keeps TP inside a node,
    and an --order that puts TP across nodes is warned about in the results;
  * collectives say whether their group spans nodes (group_nodes);
  * sextant qualify judges inter-node criteria from the inter-node groups;
  * on five one-rank nodes, one node's link shaped with tc (netem delay and
    rate where the kernel has sch_netem, else a tbf rate limit, on both ends
    of its veth): the link screen names that
    node's four links and nothing else, while an unshaped run names nobody.

Needs root (CAP_NET_ADMIN) and ip/unshare: where namespaces cannot be
created the test says why and exits 77, which ctest reports as skipped.

    python3 multinode_test.py SEXTANT MPIEXEC
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


class Namespaces:
    """Namespaces <prefix>n1 .. <prefix>n<count> on a bridge, 10.213.<k>.0/24."""

    def __init__(self, count=2):
        self.count = count
        k = os.getpid() % 200 + 20
        self.prefix = f"sx{os.getpid() % 100000}"
        self.subnet = f"10.213.{k}.0/24"
        self.address = lambda i: f"10.213.{k}.{i}"
        self.bridge = self.prefix + "br"
        self.created = []

    def ip(self, *args, netns=None):
        cmd = ["ip"] + (["netns", "exec", netns, "ip"] if netns else []) + list(args)
        r = run(cmd)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")

    def __enter__(self):
        self.ip("link", "add", self.bridge, "type", "bridge")
        self.created.append(("link", self.bridge))
        self.ip("addr", "add", self.address(254) + "/24", "dev", self.bridge)
        self.ip("link", "set", self.bridge, "up")
        for i in range(1, self.count + 1):
            ns, veth = f"{self.prefix}n{i}", f"{self.prefix}v{i}"
            self.ip("netns", "add", ns)
            self.created.append(("netns", ns))
            self.ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            self.created.append(("link", veth))
            self.ip("link", "set", veth, "master", self.bridge)
            self.ip("link", "set", veth, "up")
            self.ip("addr", "add", self.address(i) + "/24", "dev", "eth0", netns=ns)
            self.ip("link", "set", "eth0", "up", netns=ns)
            self.ip("link", "set", "lo", "up", netns=ns)
        return self

    def shape(self, i):
        """Slows node i's link on both ends of its veth (its eth0 and the
        bridge's end): tc netem delay and rate where the kernel has netem,
        else a tbf rate limit (a kernel without sch_netem). Returns the qdisc."""
        shapes = [["netem", "delay", "3ms", "rate", "50mbit"],
                  ["tbf", "rate", "50mbit", "burst", "32kbit", "latency", "400ms"]]
        for qdisc in shapes:
            for dev, netns in (("eth0", f"{self.prefix}n{i}"), (f"{self.prefix}v{i}", None)):
                cmd = (["ip", "netns", "exec", netns] if netns else []) + ["tc", "qdisc", "add", "dev", dev,
                                                                            "root", *qdisc]
                r = run(cmd)
                if r.returncode != 0 and "unknown" in r.stderr and qdisc[0] == "netem":
                    break
                if r.returncode != 0:
                    raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
            else:
                return " ".join(qdisc)
        raise RuntimeError("no qdisc could shape the link")

    def unshape(self, i):
        for dev, netns in (("eth0", f"{self.prefix}n{i}"), (f"{self.prefix}v{i}", None)):
            run((["ip", "netns", "exec", netns] if netns else []) + ["tc", "qdisc", "del", "dev", dev, "root"])

    def __exit__(self, *exc):
        for kind, name in reversed(self.created):
            run(["ip", "netns", "del", name] if kind == "netns" else ["ip", "link", "del", name])


AGENT = """#!/bin/sh
# rsh agent for OpenMPI: "host" NAME is network namespace {prefix}NAME, with NAME as its host name.
host=$1; shift
exec ip netns exec "{prefix}$host" unshare --uts /bin/sh -c 'hostname "$0"; eval "$*"' "$host" "$@"
"""


def why_namespaces_cannot_work():
    if os.geteuid() != 0:
        return "not root: creating network namespaces needs CAP_NET_ADMIN"
    for tool in ("ip", "unshare"):
        if not shutil.which(tool):
            return f"'{tool}' is not installed (iproute2 / util-linux)"
    probe = f"sxprobe{os.getpid() % 100000}"
    r = run(["ip", "netns", "add", probe])
    if r.returncode != 0:
        return f"'ip netns add' failed: {r.stderr.strip()}"
    run(["ip", "netns", "del", probe])
    return None


class Cluster:
    def __init__(self, sextant, mpiexec, ns, tmp, slots=2):
        self.sextant, self.mpiexec, self.ns, self.tmp = sextant, mpiexec, ns, tmp
        self.ranks = ns.count * slots
        self.agent = os.path.join(tmp, "agent.sh")
        with open(self.agent, "w") as f:
            f.write(AGENT.format(prefix=ns.prefix))
        os.chmod(self.agent, 0o755)
        self.hosts = os.path.join(tmp, "hosts")
        with open(self.hosts, "w") as f:
            f.write("".join(f"n{i} slots={slots}\n" for i in range(1, ns.count + 1)))

    def sextant_run(self, args, out):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OPENBLAS_NUM_THREADS="1")
        forward = [a for v in ("OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE") if v in env for a in ("-x", v)]
        cmd = [self.mpiexec, "--hostfile", self.hosts, "-np", str(self.ranks), "--oversubscribe",
               "--mca", "plm_rsh_agent", self.agent, "--mca", "btl", "tcp,self",
               "--mca", "oob_tcp_if_include", self.ns.subnet, "--mca", "btl_tcp_if_include", self.ns.subnet,
               # Packets between namespaces are delivered in softirq context on
               # the receiving core; ranks that busy-poll it starve that work
               # (8 ms round trips on 2 cores). Yielding when idle lets it run.
               "--mca", "mpi_yield_when_idle", "1",
               *forward, self.sextant, *args, "-o", out, "-q"]
        r = run(cmd, env=env, timeout=500)
        return r

    def results(self, out):
        files = [f for f in os.listdir(out) if f.startswith("sextant-") and f.endswith(".json")]
        assert len(files) == 1, f"{out}: {files}"
        with open(os.path.join(out, files[0])) as f:
            return json.load(f)


def check(condition, message):
    if not condition:
        raise AssertionError(message)
    print("ok:", message)


def metric(case, name):
    m = case["perf"]["metrics"][name]
    return m["value"] if isinstance(m, dict) else m


def test_nodes_and_placement(c):
    out = os.path.join(c.tmp, "intra")
    r = c.sextant_run(["run", "collectives/all_reduce", "--profile", "ci", "--tp", "2", "--pp", "2",
                       "--group", "tp", "--dtype", "f32"], out)
    check(r.returncode == 0, f"tp2 pp2 across two nodes runs (exit {r.returncode}) {r.stderr[-2000:]}")
    doc = c.results(out)
    s = doc["system"]
    check(s["hosts"] == ["n1", "n2"], f"hosts are the two nodes: {s['hosts']}")
    check(s["node_count"] == 2 and s["ranks_per_node"] == 2, "2 nodes of 2 ranks detected")
    check(s["topology"]["node_of_rank"] == [0, 0, 1, 1], f"node of each rank: {s['topology']['node_of_rank']}")
    check([n["host"] for n in s["topology"]["nodes"]] == ["n1", "n2"], "each node described itself")
    p = doc["run"]["placement"]
    check(p["order"] == "node-aware" and not p["warnings"], f"node-aware order, no warning: {p}")
    check(p["orders"]["ranks 4: tp2 cp1 pp2 dp1"] == "tp-cp-ep-pp-dp", "tp2 pp2: TP inside a node, DP outermost")
    nodes = {metric(case, "group_nodes") for case in doc["cases"]}
    check(nodes == {1}, f"every TP group lies inside one node: group_nodes {nodes}")


def test_tp_across_nodes_is_warned(c):
    out = os.path.join(c.tmp, "across")
    r = c.sextant_run(["run", "collectives/all_reduce", "--profile", "ci", "--tp", "2", "--pp", "2",
                       "--group", "tp", "--dtype", "f32", "--order", "pp-tp-cp-ep-dp"], out)
    check(r.returncode == 0, f"the pinned order runs (exit {r.returncode}) {r.stderr[-2000:]}")
    check("TP groups span nodes" in r.stderr, "the warning is printed")
    doc = c.results(out)
    warnings = doc["run"]["placement"]["warnings"]
    check(len(warnings) == 1 and "2 of 2 TP groups span nodes" in warnings[0], f"and recorded: {warnings}")
    nodes = {metric(case, "group_nodes") for case in doc["cases"]}
    check(nodes == {2}, f"the TP groups are inter-node: group_nodes {nodes}")


def test_qualify_judges_inter_node(c):
    out = os.path.join(c.tmp, "qualify")
    r = c.sextant_run(["qualify", "collectives", "--profile", "ci"], out)
    check(r.returncode in (0, 1), f"qualify ends with a verdict (exit {r.returncode}) {r.stderr[-2000:]}")
    q = c.results(out)["qualification"]
    rows = {row["criterion"]: row for row in q["criteria"]}
    for kind in ("intra", "inter"):
        row = rows[f"all_reduce_busbw_{kind}_GBps"]
        check(row["status"] in ("PASS", "FAIL") and row["measured"] is not None,
              f"{kind}-node all_reduce busbw judged: {row['status']} {row['measured']}")
    check(rows["conformance"]["status"] == "PASS", "every case passed")
    check((r.returncode == 0) == (q["verdict"] == "PASS"), f"exit status {r.returncode} follows verdict {q['verdict']}")
    print(r.stdout[r.stdout.find("# qualify:"):])


def test_screen_names_the_shaped_node(c):
    """Node n5 (rank 4) gets a slow link; the screen must name its links only."""
    def screen(out):
        r = c.sextant_run(["run", "screen/links", "--profile", "ci", "--ranks", "5", "--iters", "5", "--warmup", "1"], out)
        doc = c.results(out)
        case = doc["cases"][0]
        return r, case["perf"]["metrics"]["suspects"], case["perf"]["metrics"]["link_matrix"]

    r, named, matrix = screen(os.path.join(c.tmp, "screen-clean"))
    check(r.returncode == 0 and named == [], f"unshaped: the screen names nobody (exit {r.returncode}) {named}")
    check(matrix["hosts"] == ["n1", "n2", "n3", "n4", "n5"] and matrix["rounds"] == 5,
          f"5 one-rank nodes, 5 tournament rounds: {matrix['hosts']} {matrix['rounds']}")
    qdisc = c.ns.shape(5)
    print("shaped n5 with tc", qdisc)
    try:
        r, named, matrix = screen(os.path.join(c.tmp, "screen-shaped"))
    finally:
        c.ns.unshape(5)
    links = sorted(tuple(s["ranks"]) for s in named if s["kind"] == "slow_link")
    nodes = [(s["node"], s["host"]) for s in named if s["kind"] == "slow_node"]
    check(r.returncode == 1, f"shaped: the run fails (exit {r.returncode}): {matrix['bandwidth_GBps']}")
    check(links == [(0, 4), (1, 4), (2, 4), (3, 4)], f"shaped: exactly n5's four links are named: {links}")
    check(nodes == [(4, "n5")], f"and n5 itself, the one node all of whose links are named: {nodes}")
    check(len(named) == 5 and all("n5" in s["host"] and s["class"] == "other_node" for s in named),
          "each named by host, other-node class")
    print("\n".join(line for line in r.stdout.splitlines() if line.startswith("# suspect")))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    sextant, mpiexec = os.path.abspath(sys.argv[1]), sys.argv[2]
    why = why_namespaces_cannot_work()
    if why:
        print(f"SKIP: several nodes need network namespaces: {why}")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp, Namespaces() as ns:
        c = Cluster(sextant, mpiexec, ns, tmp)
        test_nodes_and_placement(c)
        test_tp_across_nodes_is_warned(c)
        test_qualify_judges_inter_node(c)
    with tempfile.TemporaryDirectory() as tmp, Namespaces(5) as ns:
        test_screen_names_the_shaped_node(Cluster(sextant, mpiexec, ns, tmp, slots=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A model of a fabric with faults, on which the fault-isolation planner
(plugins/module_utils/fabric/isolation.py) is measured: N nodes of P ports,
some nodes slow on every port, some ports slow, some pairs of nodes slow
only together, and noise on every figure.

A test's figure is that of an all-to-all among its nodes: the slowest
member bounds it (a member is as fast as its slowest port in use: NCCL
spreads its channels over the rails and waits for the slowest), a pair of
members that is slow together bounds it too (every pair exchanges data),
and its base falls a little with the group's size and in proportion to the
ports in use. Noise is multiplicative and Gaussian.

    python3 tools/isolation/fabric_model.py --nodes 256 --fabrics 200

runs the planner on that many random fabrics (by default 5 bad nodes, 2
bad ports, 1 bad pair, each 25% to 70% slow, and 3% noise) and prints how many were solved exactly and in how many
rounds, beside the pairwise round robin's rounds.
"""

import argparse
import importlib.util
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_isolation():
    """plugins/module_utils/fabric/isolation.py and what it imports, as a
    package of this checkout's plugins (no installed collection needed)."""
    name = "ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.isolation"
    if name in sys.modules:
        return sys.modules[name]
    try:
        return importlib.import_module(name)
    except ImportError:
        pass
    spec = importlib.util.spec_from_file_location(
        "mlinfra_isolation_plugins", ROOT / "plugins" / "module_utils" / "__init__.py",
        submodule_search_locations=[str(ROOT / "plugins" / "module_utils")])
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    return importlib.import_module(spec.name + ".fabric.isolation")


class Fabric:
    """Faults: ``bad_nodes`` {node: factor}, ``bad_ports`` {(node, port):
    factor}, ``bad_pairs`` {(a, b): factor}; each factor the fraction of the
    healthy figure that is left."""

    def __init__(self, nodes, ports, bad_nodes=None, bad_ports=None, bad_pairs=None, noise=0.03, seed=0,
                 base=100.0):
        self.nodes, self.ports = list(nodes), list(ports)
        self.bad_nodes = dict(bad_nodes or {})
        self.bad_ports = dict(bad_ports or {})
        self.bad_pairs = dict((tuple(sorted(pair)), factor) for pair, factor in (bad_pairs or {}).items())
        self.noise, self.base = noise, base
        self.random = random.Random(seed)
        self.tests_run = 0

    def figure(self, test):
        members = test["nodes"]
        used = dict((node, (test["ports"] or {}).get(node, self.ports)) for node in members)
        factor = 1.0
        for node in members:
            factor = min(factor, self.bad_nodes.get(node, 1.0))
            for port in used[node]:
                factor = min(factor, self.bad_ports.get((node, port), 1.0))
        for index, first in enumerate(members):
            for second in members[index + 1:]:
                factor = min(factor, self.bad_pairs.get(tuple(sorted((first, second))), 1.0))
        share = min(len(used[node]) for node in members) / len(self.ports)
        size = 1.0 / (1.0 + 0.01 * len(members))
        return self.base * share * size * factor * self.random.gauss(1.0, self.noise)

    def measure(self, tests):
        self.tests_run += len(tests)
        return [self.figure(test) for test in tests]


def random_fabric(count, port_count, seed, bad_nodes=5, bad_ports=2, bad_pairs=1, noise=0.03):
    """Faults on distinct nodes, each 25% to 70% slow, placed by ``seed``."""
    chooser = random.Random(seed)
    nodes = ["node-%03d" % index for index in range(count)]
    ports = ["mlx5_%d" % index for index in range(port_count)]
    picked = chooser.sample(nodes, bad_nodes + bad_ports + 2 * bad_pairs)

    def factor():
        return chooser.uniform(0.3, 0.75)
    faults = {
        "bad_nodes": dict((node, factor()) for node in picked[:bad_nodes]),
        "bad_ports": dict(((node, chooser.choice(ports)), factor())
                          for node in picked[bad_nodes:bad_nodes + bad_ports]),
        "bad_pairs": dict(((picked[i], picked[i + 1]), factor())
                          for i in range(bad_nodes + bad_ports, len(picked), 2)),
    }
    return Fabric(nodes, ports, noise=noise, seed=seed + 1, **faults)


def solved(fabric, conclusion):
    """Every fault found, nothing else."""
    return (conclusion["bad_nodes"] == sorted(fabric.bad_nodes)
            and conclusion["bad_ports"] == sorted(fabric.bad_ports)
            and conclusion["bad_pairs"] == sorted(fabric.bad_pairs))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=256)
    parser.add_argument("--ports", type=int, default=8)
    parser.add_argument("--fabrics", type=int, default=100)
    parser.add_argument("--noise", type=float, default=0.03)
    parser.add_argument("--bad-nodes", type=int, default=5)
    parser.add_argument("--bad-ports", type=int, default=2)
    parser.add_argument("--bad-pairs", type=int, default=1)
    args = parser.parse_args(argv)
    isolation = load_isolation()
    rounds, tests, good, started = [], [], 0, time.monotonic()
    for number in range(args.fabrics):
        fabric = random_fabric(args.nodes, args.ports, number, bad_nodes=args.bad_nodes, bad_ports=args.bad_ports,
                               bad_pairs=args.bad_pairs, noise=args.noise)
        conclusion = isolation.isolate(fabric.nodes, fabric.ports, fabric.measure)
        good += solved(fabric, conclusion)
        rounds.append(conclusion["rounds"])
        tests.append(fabric.tests_run)
    rounds.sort()
    print("%d nodes, %d ports, %d bad nodes, %d bad ports, %d bad pairs, %d random fabrics: %d solved exactly "
          "(%.1f%%); rounds median %d, max %d; tests per run median %d; the round robin takes %d rounds; "
          "%.2f s per plan" % (
              args.nodes, args.ports, args.bad_nodes, args.bad_ports, args.bad_pairs, args.fabrics, good,
              100.0 * good / args.fabrics, rounds[len(rounds) // 2], rounds[-1], sorted(tests)[len(tests) // 2],
              args.nodes - 1 + args.nodes % 2, (time.monotonic() - started) / args.fabrics))
    return 0 if good == args.fabrics else 1


if __name__ == "__main__":
    sys.exit(main())

"""Fake GPU nodes by the hundred on the local cluster, for the scale
measurements of tools/perf/ (fleet_timing.py, verify-timing.sh).

    .venv/bin/python tools/perf/fleet_nodes.py add COUNT     # moc-perf-001 .. COUNT, Ready
    .venv/bin/python tools/perf/fleet_nodes.py remove        # every node add made
    .venv/bin/python tools/perf/fleet_nodes.py faulty COUNT  # the names of those with a fault, one per line

Each node is the local inventory's h100-sriov profile (the GPUs, RDMA
resources, labels and taints its nodes carry), played by kwok like the
inventory's own. Most stand on the healthy RoCE snapshot; every
FAULT_EVERY-th stands on one of the recorded faulty snapshots in turn (each
kind of fault the node checks know), so that a run over hundreds of nodes
judges a realistic mix, not hundreds of copies of one node. Node i also
carries `mlinfra.io/perf-first-<n>=true` for every n of SIZE_LABELS above i,
so that a selector chooses the first n nodes, and
`mlinfra.io/perf-healthy=true` when it stands on the healthy snapshot.

The nodes are not the inventory's (`cluster.sh up` leaves them alone, as it
does a test's); `remove` deletes them by their label PERF_LABEL.
"""

import argparse
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PERF_LABEL = ("mlinfra.io/perf-node", "fleet")
HEALTHY_LABEL = "mlinfra.io/perf-healthy"
SIZE_LABELS = (2, 6, 32, 64, 128, 256, 512)
HEALTHY = "healthy-roce-h100"
# The recorded snapshots of a node the node checks fail or warn about
# (tests/fixtures/nodes/), in the order the faulty nodes take them.
# (Not roce-gid-mixed, whose GIDs at different indices per device pass
# with advice, nor roce-counters, a healthy node whose port counters the
# local cluster's flaky-link fault advances while a pod runs.)
FAULTY = ("no-peermem", "iommu-off", "memlock-limited", "acs-redirect", "numa-crossed", "roce-lossy", "port-down")
FAULT_EVERY = 16
PROFILE = "h100-sriov"


def localcluster():
    spec = importlib.util.spec_from_file_location("mlinfra_localcluster",
                                                  ROOT / "tools" / "localcluster" / "localcluster.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def name_of(index):
    """The name of node ``index`` (0-based)."""
    return "moc-perf-%03d" % (index + 1)


def snapshot_of(index):
    if index % FAULT_EVERY == FAULT_EVERY - 1:
        return FAULTY[(index // FAULT_EVERY) % len(FAULTY)]
    return HEALTHY


def size_label(size):
    """The label that the first ``size`` nodes carry."""
    if size not in SIZE_LABELS:
        raise ValueError("%s nodes: choose one of %s" % (size, ", ".join(map(str, SIZE_LABELS))))
    return "mlinfra.io/perf-first-%d" % size


def faulty(count):
    """The names of the first ``count`` nodes that stand on a faulty snapshot."""
    return [name_of(index) for index in range(count) if snapshot_of(index) != HEALTHY]


def add(count, timeout=600):
    lc = localcluster()
    profiles = lc.load_inventory_vars()["localcluster_node_profiles"]
    api = lc.Api()
    names = []
    for index in range(count):
        snapshot = snapshot_of(index)
        labels = {PERF_LABEL[0]: PERF_LABEL[1]}
        labels.update({size_label(size): "true" for size in SIZE_LABELS if index < size})
        if snapshot == HEALTHY:
            labels[HEALTHY_LABEL] = "true"
        node = lc.node_object({"name": name_of(index), "profile": PROFILE, "snapshot": snapshot, "labels": labels},
                              profiles, inventory=False)
        lc.apply_node(api, node)
        names.append(name_of(index))
        if (index + 1) % 64 == 0 or index + 1 == count:
            print("[fleet] %d of %d nodes applied" % (index + 1, count), flush=True)
    lc.wait_nodes(api, names, timeout)
    print("[fleet] %d nodes Ready (%d on a faulty snapshot)" % (count, len(faulty(count))), flush=True)
    return names


def remove():
    lc = localcluster()
    api = lc.Api()
    nodes = api.get("/api/v1/nodes", labelSelector="%s=%s" % PERF_LABEL)["items"]
    for node in nodes:
        api.delete("/api/v1/nodes/%s" % node["metadata"]["name"])
    print("[fleet] %d nodes deleted" % len(nodes), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("add").add_argument("count", type=int)
    commands.add_parser("remove")
    commands.add_parser("faulty").add_argument("count", type=int)
    args = parser.parse_args(argv)
    if args.command == "add":
        add(args.count)
    elif args.command == "remove":
        remove()
    else:
        print("\n".join(faulty(args.count)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

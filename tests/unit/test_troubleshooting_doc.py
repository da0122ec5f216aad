"""docs/troubleshooting.md has a section for every check verify-rdma.yml
can report: the node and in-pod checks (node_checks), NCCL's transport
(nccl_log) and the benchmark's own (collective_bench, verdicts)."""

import os
import re

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import collective_bench
from ansible_collections.mlinfra.multinode.plugins.module_utils.report import degradation
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import nccl_log
from ansible_collections.mlinfra.multinode.plugins.module_utils.node import checks as node_checks
from ansible_collections.mlinfra.multinode.plugins.module_utils.report import verdicts
from conftest import REPO


def bench_check_names():
    """The benchmark's checks verify-rdma.yml reports (verdicts.bench_verdict)."""
    names = set(collective_bench.FINDING_CHECKS.values()) | {verdicts.BENCH_RUN, verdicts.PORT_COUNTERS,
                                                             verdicts.BUSBW_EXPECTED}
    assert {"bench_run", "busbw_gate", "bench_result"} <= names
    return names


def test_every_reported_check_has_its_section():
    with open(os.path.join(REPO, "docs", "troubleshooting.md")) as handle:
        sections = set(re.findall(r"^### `?([a-z0-9_]+)`?\s*$", handle.read(), re.MULTILINE))
    reported = set(node_checks.CHECK_NAMES) | set(node_checks.POD_CHECK_NAMES) | {nccl_log.CHECK_NAME} \
        | bench_check_names()
    assert sorted(reported - sections) == []


def test_every_factor_of_a_degraded_soak_has_its_section():
    with open(os.path.join(REPO, "docs", "troubleshooting.md")) as handle:
        text = handle.read()
    sections = set(re.findall(r"^### `?([a-z0-9_]+)`?\s*$", text, re.MULTILINE))
    assert sorted(set(degradation.KIND_ORDER) - sections) == []
    assert "### Nothing separates them" in text

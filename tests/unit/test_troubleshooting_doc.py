"""docs/troubleshooting.md has a section for every check verify-rdma.yml
can report: the node and in-pod checks (node_checks), NCCL's transport
(nccl_log) and the benchmark's own (roles/verify/tasks/bench.yml)."""

import os
import re

from ansible_collections.mlinfra.multinode.plugins.module_utils import nccl_log, node_checks
from conftest import REPO


def bench_check_names():
    with open(os.path.join(REPO, "roles", "verify", "tasks", "bench.yml")) as handle:
        text = handle.read()
    names = set()
    # {'name': 'a', ...} and {'name': 'a' if <condition> else 'b', ...}
    for first, second in re.findall(r"'name': '([a-z0-9_]+)'(?: if [^,]*? else '([a-z0-9_]+)')?", text):
        names.update(name for name in (first, second) if name)
    assert {"bench_run", "busbw_gate", "bench_result"} <= names
    return names


def test_every_reported_check_has_its_section():
    with open(os.path.join(REPO, "docs", "troubleshooting.md")) as handle:
        sections = set(re.findall(r"^### `?([a-z0-9_]+)`?\s*$", handle.read(), re.MULTILINE))
    reported = set(node_checks.CHECK_NAMES) | set(node_checks.POD_CHECK_NAMES) | {nccl_log.CHECK_NAME} \
        | bench_check_names()
    assert sorted(reported - sections) == []

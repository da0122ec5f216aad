"""torchrun_log against torchrun's own logs (tests/fixtures/logs/torchrun, recorded
with torch 2.11): the node rank the rendezvous gave each agent, and the rank
that failed first, with its signal."""

import os

from ansible_collections.mlinfra.multinode.plugins.module_utils.train import torchrun_log

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "logs", "torchrun")


def lines(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read().splitlines()


def test_the_rendezvous_gives_node_ranks_in_arrival_order_not_by_node_rank():
    # Started with --node-rank 0, it got group rank 1.
    assert torchrun_log.rendezvous_result(lines("sigkill-rank1-node0.log")) == {
        "group_rank": 1, "group_world_size": 2, "local_ranks": [0], "global_ranks": [1]}
    assert torchrun_log.rendezvous_result(lines("sigkill-rank1-node1.log"))["group_rank"] == 0


def test_the_first_failure_names_the_rank_and_the_signal():
    failure = torchrun_log.first_failure(lines("sigkill-rank1-node0.log"))
    assert failure == {"rank": 1, "local_rank": 0, "exitcode": -9, "signal": "SIGKILL", "host": "localhost"}
    assert torchrun_log.describe_failure(failure) == "rank 1 (local rank 0) was killed by signal 9 (SIGKILL)"
    assert torchrun_log.first_failure(lines("sigkill-rank1-node1.log")) is None


def test_an_exit_status_is_described_as_one():
    failure = {"rank": 3, "local_rank": 1, "exitcode": 1, "signal": None, "host": "h"}
    assert torchrun_log.describe_failure(failure) == "rank 3 (local rank 1) exited with 1"


def test_a_log_below_info_or_without_a_rendezvous_says_nothing():
    assert torchrun_log.rendezvous_result(["[rank0]: step 1", "W1125 torch/... Sending process 5 closing signal"]) \
        is None
    waiting = [line for line in lines("sigkill-rank1-node0.log") if "group_rank" not in line]
    assert torchrun_log.rendezvous_result(waiting) is None
    assert torchrun_log.first_failure([]) is None

"""The bench_settings filter: the verify role's benchmark settings checked
with the benchmark's own rules before anything starts."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.filter.bench_settings import bench_settings

GOOD = {"ops": ["all_reduce"], "min_size": "1M", "max_size": "8G", "thresholds": ["1G=194"], "pairwise": False}


def test_good_settings_have_no_problem():
    assert bench_settings(GOOD) == []
    assert bench_settings(dict(GOOD, thresholds=[], ops=["alltoall", "all_gather"])) == []


@pytest.mark.parametrize("change, words", [
    ({"ops": ["allreduce"]}, "op 'allreduce' is not one of all_reduce, all_gather, reduce_scatter, alltoall"),
    ({"ops": []}, "give a list of one or more of"),
    ({"min_size": "lots"}, "min_size 'lots' is not a size"),
    ({"min_size": "16G"}, "min_size 16G is above max_size 8G"),
    ({"thresholds": ["194"]}, "expected SIZE=GBPS"),
    ({"thresholds": ["1G=fast"]}, "GBPS 'fast' is not a number"),
    ({"thresholds": ["1G=-3"]}, "above 0 GB/s"),
    # A gate no measured size reaches would pass silently: it is an error.
    ({"thresholds": ["16G=194"]}, "the largest size measured is 8G"),
    ({"thresholds": ["1G=194"], "max_size": "512M"}, "the largest size measured is 512M"),
    ({"thresholds": "1G=194"}, "give a list of SIZE=GBPS strings"),
])
def test_each_bad_setting_is_named(change, words):
    problems = bench_settings(dict(GOOD, **change))
    assert len(problems) == 1 and words in problems[0], problems


def test_in_pairwise_mode_gates_apply_to_the_largest_size_only():
    assert bench_settings(dict(GOOD, pairwise=True, thresholds=["8G=150"])) == []
    assert bench_settings(dict(GOOD, pairwise=True, min_size="1G", max_size="1G", thresholds=["1G=150"])) == []


def test_a_non_dict_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="takes a dict"):
        bench_settings(["1G=194"])

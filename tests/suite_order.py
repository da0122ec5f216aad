"""Runs the longest test files first (a pytest plugin, pytest.ini's addopts).

scripts/test.sh runs the suite on two pytest-xdist workers, a file per
worker at a time (--dist loadfile), handing out files in the order they are
collected (--no-loadscope-reorder; by default pytest-xdist starts with the
files of the most tests, which are quick unit tests here). In alphabetical order the longest files came late, and one worker
ran test_site.py alone for two minutes while the other had nothing left.
Longest first, each worker takes the next file when it is done with one, and
the short ones even out the end. The files not listed keep their order,
after these.
"""

# Wall seconds of each file on one worker of scripts/test.sh's pytest stage
# (`pytest --durations=0`, setup, call and teardown of its tests summed;
# run of 2026-11-28 at 18f3b13), longest first.
LONGEST_FIRST = (
    "tests/integration/test_train.py",           # 327
    "tests/integration/test_deploy.py",          # 301
    "tests/integration/test_train_jobs.py",      # 253
    "tests/integration/test_sriov.py",           # 240
    "tests/integration/test_verify.py",          # 197
    "tests/integration/test_soak_attribution.py",  # 174 (two soaks of four runs)
    "tests/integration/test_image.py",           # 171
    "tests/integration/test_site.py",            # 131
    "tests/integration/test_bench.py",           # 118
    "tests/integration/test_render_matrix.py",   # 87 (4 render.yml runs, 80 dry-run sets)
    "tests/integration/test_deploy_read.py",     # 78
    # About 300 in the suite: runs through the operators and three queued
    # through Kueue (about 100 of it).
    # Second in the order it ran beside test_train.py, both training, and
    # the suite took longer (27:47 against 25:57 here, one run each).
    "tests/integration/test_train_controllers.py",
    # About 300: ten runs through the operators that fail, time out or are
    # stopped (a file apart from the one above so that both workers share them).
    "tests/integration/test_train_controller_ends.py",
    "tests/unit/test_train_launch_gloo.py",      # 64
    "tests/integration/test_render.py",          # 49
    "tests/integration/test_api_faults.py",      # 48
    "tests/integration/test_hostile_input.py",   # 41
    "tests/unit/test_awx_playbook.py",           # 37
    "tests/unit/test_torchtitan_config.py",      # 31
    "tests/unit/test_collective_bench_gloo.py",  # 24
    "tests/unit/test_pod_bench.py",              # 16
)


def pytest_collection_modifyitems(session, config, items):
    rank = dict((path, index) for index, path in enumerate(LONGEST_FIRST))
    # sort() keeps the order of equal keys: the tests of a file, and the
    # files not listed.
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))

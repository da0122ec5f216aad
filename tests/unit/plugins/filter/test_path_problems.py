"""path_problems: the controller's paths a play cannot use, judged from what
ansible.builtin.stat returned for them (real stat results of real paths)."""

import os
import stat as stat_module

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.filter.path_problems import FilterModule

path_problems = FilterModule().filters()["path_problems"]


def seen(path, variable, write):
    """What ansible.builtin.stat returns for path, as its loop result."""
    try:
        info = os.stat(path)
    except OSError:
        return {"item": {"variable": variable, "path": path, "write": write}, "stat": {"exists": False}}
    return {"item": {"variable": variable, "path": path, "write": write},
            "stat": {"exists": True, "isdir": stat_module.S_ISDIR(info.st_mode),
                     "isreg": stat_module.S_ISREG(info.st_mode), "writeable": os.access(path, os.W_OK),
                     "readable": os.access(path, os.R_OK)}}


def test_usable_paths_are_no_problem(tmp_path):
    baseline = tmp_path / "baseline.json"
    baseline.write_text("{}")
    assert path_problems([seen(str(tmp_path), "verify_report_dir", True),
                          seen(str(baseline), "soak_baseline", False)]) == []


def test_each_unusable_path_is_named_with_its_variable_and_fix(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    problems = path_problems([seen("/proc/mlinfra-report", "verify_report_dir", True),
                              seen(str(not_a_dir), "soak_report_dir", True),
                              seen(str(tmp_path / "missing.json"), "train_baseline", False),
                              seen(str(tmp_path), "soak_baseline", False)])
    assert problems == [
        "verify_report_dir /proc/mlinfra-report is not a directory this controller can write; fix: -e "
        "verify_report_dir=DIR, a directory you can write (the results would be lost at the end)",
        "soak_report_dir %s is not a directory this controller can write; fix: -e soak_report_dir=DIR, a directory "
        "you can write (the results would be lost at the end)" % not_a_dir,
        "train_baseline %s is not a file this controller can read; fix: the path of a baseline saved earlier "
        "(save_baseline), or leave train_baseline empty" % (tmp_path / "missing.json"),
        "soak_baseline %s is not a file this controller can read; fix: the path of a baseline saved earlier "
        "(save_baseline), or leave soak_baseline empty" % tmp_path,
    ]


def test_a_baseline_given_as_a_throughput_is_not_a_file():
    # soak_baseline=1, as tests/integration/test_train_jobs.py gives it.
    assert path_problems([seen("1", "soak_baseline", False), seen("9250.5", "train_baseline", False)]) == []


def test_a_directory_not_made_in_check_mode_is_no_problem(tmp_path):
    missing = seen(str(tmp_path / "later"), "verify_report_dir", True)
    assert path_problems([missing], True) == [] and len(path_problems([missing], False)) == 1


def test_what_is_not_a_list_is_refused():
    with pytest.raises(AnsibleFilterError, match="takes the results of a stat loop"):
        path_problems({"results": []})

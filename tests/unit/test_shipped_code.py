"""The code the pods run (plugins/module_utils/pod_runtime.py, which the
autodetect role's ConfigMaps and the image build ship): found from the
programs' own imports, and whole - every program starts from a directory
that holds only the shipped files, as in a pod. (A list kept by hand once
left out node_record.py, which node_cli.py had begun to import: every pod's
autodetect init container failed and no pod became Ready.)"""

import os
import shutil
import subprocess
import sys

from ansible_collections.mlinfra.multinode.plugins.module_utils.pod_runtime import programs, runtime_files, \
    shipped_module_utils
from conftest import REPO


def test_what_the_programs_import_is_shipped_and_nothing_else():
    names = shipped_module_utils(REPO)
    assert {"node_cli", "nccl_detect", "node_record", "train_launch", "pod_bench", "common"} <= set(names)
    # The controller's own modules stay home.
    assert not {"inventory_settings", "workload_manifests", "verdicts", "bench_plot"} & set(names)
    assert "mlinfra-train" in programs(REPO) and "mlinfra-node-check" in programs(REPO)


def test_every_program_starts_from_the_shipped_files_alone(tmp_path):
    files = runtime_files(REPO)
    for key, target in (("code", "plugins/module_utils"), ("bin", "files/bin"), ("train", "files/train")):
        os.makedirs(str(tmp_path / target))
        for path in files[key]:
            shutil.copy(path, str(tmp_path / target))
    env = dict(os.environ, MLINFRA_PLUGINS_DIR=str(tmp_path / "plugins"), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    for program in programs(REPO):
        # --help imports all a program's module_utils before it parses anything.
        proc = subprocess.run([sys.executable, str(tmp_path / "files" / "bin" / program), "--help"], env=env,
                              cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=120, check=False)
        assert proc.returncode == 0 and "usage" in proc.stdout.lower(), (program, proc.stdout[-2000:])


def test_a_module_imported_but_missing_is_named(tmp_path):
    for directory in ("files/bin", "files/train", "plugins/module_utils"):
        os.makedirs(str(tmp_path / directory))
    (tmp_path / "files" / "bin" / "mlinfra-x").write_text("from module_utils.a import main\n")
    (tmp_path / "plugins" / "module_utils" / "a.py").write_text("from .b import thing\nfrom . import c\n")
    (tmp_path / "plugins" / "module_utils" / "c.py").write_text("import os\n")
    try:
        shipped_module_utils(str(tmp_path))
    except ValueError as error:
        assert str(error) == "module_utils/b.py is imported by the pods' code but does not exist"
    else:
        raise AssertionError("a missing module was not named")
    (tmp_path / "plugins" / "module_utils" / "b.py").write_text("thing = 1\n")
    assert shipped_module_utils(str(tmp_path)) == ["a", "b", "c"]

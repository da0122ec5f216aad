"""The code the pods run (plugins/module_utils/pod_runtime.py, which the
autodetect role's ConfigMaps and the image build ship): found from the one
program's own imports, and whole - every subcommand starts from a directory
that holds only the shipped files, laid out as the pods' volumes lay them
out and as the image build lays them out from the same ConfigMaps. (A list
kept by hand once left out node_record.py, which node_cli.py had begun to
import: every pod's autodetect init container failed and no pod became
Ready.)"""

import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.pod_commands import SUBCOMMANDS
from ansible_collections.mlinfra.multinode.plugins.module_utils.pod_runtime import PROGRAMS, RUNTIME, TRAIN_ASSETS, \
    lay_out, programs, runtime_files, shipped_module_utils
from conftest import REPO
from test_containerfile import CONTAINERFILE, instructions


def test_what_the_program_imports_is_shipped_and_nothing_else():
    names = shipped_module_utils(REPO)
    assert {"pod_commands", "node.cli", "fabric.nccl_env", "node.record", "train.launch", "fabric.pod_bench",
            "fabric.bench_collectives", "common.files"} <= set(names)
    # The controller's own modules stay home.
    assert not {"inventory_settings", "workload.statefulset_manifests", "report.verdicts",
                "report.bench_plot"} & set(names)
    assert programs(REPO) == ["mlinfra"]


def _run(directory, argv):
    env = dict(os.environ, MLINFRA_PLUGINS_DIR=str(directory / "plugins"), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, str(directory / "files" / "bin" / "mlinfra")] + argv, env=env,
                          cwd=str(directory), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=120, check=False)


def _as_the_pods_mount_them(tmp_path):
    """The ConfigMaps' keys where the StatefulSet's volumes put them."""
    lay_out(REPO, str(tmp_path))


def _as_the_image_build_lays_them_out(tmp_path):
    """The ConfigMaps' keys flat in the build context, then the
    Containerfile's own step that puts them back at their paths."""
    files = runtime_files(REPO)
    for key, directory in ((RUNTIME, "plugins/module_utils"), (PROGRAMS, "files/bin"), (TRAIN_ASSETS, "files/train")):
        (tmp_path / directory).mkdir(parents=True)
        for name, path in files[key].items():
            shutil.copy(path, str(tmp_path / directory / name))
    step = [arguments for keyword, arguments in instructions(CONTAINERFILE.read_text())
            if keyword == "RUN" and "for key in" in arguments]
    assert len(step) == 1, step
    script = step[0].replace("/opt/mlinfra", str(tmp_path)).split(" && chmod", 1)[0]
    subprocess.run(["sh", "-ec", script], check=True, timeout=60)


@pytest.mark.parametrize("layout", [_as_the_pods_mount_them, _as_the_image_build_lays_them_out])
def test_every_subcommand_starts_from_the_shipped_files_alone(tmp_path, layout):
    layout(tmp_path)
    shipped = sorted(str(path.relative_to(tmp_path / "plugins" / "module_utils"))
                     for path in (tmp_path / "plugins" / "module_utils").rglob("*.py"))
    assert shipped == sorted(name.replace(".", "/") + ".py" for name in shipped_module_utils(REPO))
    listed = _run(tmp_path, ["--help"])
    assert listed.returncode == 0 and all(name in listed.stdout for name in SUBCOMMANDS), listed.stdout
    for name in SUBCOMMANDS:
        # --help imports all a subcommand's module_utils before it parses anything.
        proc = _run(tmp_path, [name, "--help"])
        assert proc.returncode == 0 and "usage: mlinfra " + name in proc.stdout, (name, proc.stdout[-2000:])


def test_an_unknown_subcommand_is_named_with_the_list(tmp_path):
    _as_the_pods_mount_them(tmp_path)
    proc = _run(tmp_path, ["node-chek"])
    assert proc.returncode == 2
    assert "mlinfra: unknown subcommand 'node-chek'" in proc.stdout and "node-check" in proc.stdout


def test_a_module_imported_but_missing_is_named(tmp_path):
    for directory in ("files/bin", "files/train", "plugins/module_utils/pkg"):
        os.makedirs(str(tmp_path / directory))
    (tmp_path / "files" / "bin" / "mlinfra").write_text("def run():\n    from module_utils.a import main\n")
    (tmp_path / "plugins" / "module_utils" / "a.py").write_text("from .pkg.b import thing\nfrom .pkg import c\n")
    (tmp_path / "plugins" / "module_utils" / "pkg" / "c.py").write_text("from ..d import x\n")
    (tmp_path / "plugins" / "module_utils" / "d.py").write_text("import os\n")
    try:
        shipped_module_utils(str(tmp_path))
    except ValueError as error:
        assert str(error) == "module_utils/pkg/b.py is imported by the pods' code but does not exist"
    else:
        raise AssertionError("a missing module was not named")
    (tmp_path / "plugins" / "module_utils" / "pkg" / "b.py").write_text("from . import c\nthing = 1\n")
    assert shipped_module_utils(str(tmp_path)) == ["a", "d", "pkg.b", "pkg.c"]

"""The code the autodetect role ships into the pods (a ConfigMap of
plugins/module_utils files, roles/autodetect/tasks/manifests.yml) is whole:
every module it imports is shipped too. Without node_record.py, which
node_cli.py began to import, every pod's autodetect init container failed
and no pod became Ready."""

import os
import re

import yaml

from conftest import REPO

MODULE_UTILS = os.path.join(REPO, "plugins", "module_utils")


def shipped():
    with open(os.path.join(REPO, "roles", "autodetect", "tasks", "manifests.yml")) as handle:
        tasks = yaml.safe_load(handle)
    (render,) = [task for task in tasks if "autodetect_files" in (task.get("vars") or {})]
    return re.findall(r"'([a-z_]+)'", render["vars"]["autodetect_files"]["code"].split("|")[0])


def test_every_module_the_shipped_code_imports_is_shipped():
    names = shipped()
    assert "node_cli" in names and "nccl_detect" in names
    for name in names:
        with open(os.path.join(MODULE_UTILS, name + ".py")) as handle:
            source = handle.read()
        # "from .node_facts import ..." and "from . import nccl_log, torchrun_log"
        imported = set(re.findall(r"^\s*from \.([a-z_]+) import", source, re.MULTILINE))
        for line in re.findall(r"^\s*from \. import ([a-z_, ]+)$", source, re.MULTILINE):
            imported.update(part.strip() for part in line.split(","))
        assert sorted(imported - set(names)) == [], "%s imports modules that are not shipped" % name

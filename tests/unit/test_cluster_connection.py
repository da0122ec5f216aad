"""How the modules reach the cluster: once per play, through the action
group mlinfra.multinode.cluster (meta/runtime.yml), which holds
kubernetes.core's k8s modules and every module of this collection that
takes kubernetes.core's connection options; no task of a role or playbook names the
kubeconfig itself."""

import glob
import os
import re

import yaml

from conftest import REPO


def cluster_modules():
    """This collection's modules that take the cluster's connection options
    (kubernetes.core's, or this collection's fragment that adds to them)."""
    found = []
    for path in sorted(glob.glob(os.path.join(REPO, "plugins", "modules", "*.py"))):
        with open(path) as handle:
            text = handle.read()
            if "kubernetes.core.k8s_auth_options" in text or "mlinfra.multinode.cluster_client" in text:
                found.append(os.path.basename(path)[:-3])
    return found


def test_the_action_group_holds_every_cluster_module():
    with open(os.path.join(REPO, "meta", "runtime.yml")) as handle:
        group = yaml.safe_load(handle)["action_groups"]["cluster"]
    assert group[0] == {"metadata": {"extend_group": ["kubernetes.core.k8s"]}}
    assert sorted(group[1:]) == cluster_modules() and "pods_exec" in group


def test_no_task_names_the_kubeconfig_and_every_play_that_reaches_the_cluster_sets_it_once():
    tasks = glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml"))
    named = [path for path in tasks + glob.glob(os.path.join(REPO, "playbooks", "*.yml"))
             for line in open(path) if re.search(r"^\s+(kubeconfig|context): ", line)
             and "module_defaults" not in open(path).read()]
    assert named == []
    for path in glob.glob(os.path.join(REPO, "playbooks", "*.yml")):
        with open(path) as handle:
            plays = yaml.safe_load(handle)
        for play in plays:
            if play.get("hosts") == "controller" and "render" not in path:
                defaults = play.get("module_defaults") or {}
                assert set(defaults.get("group/mlinfra.multinode.cluster") or {}) == {"kubeconfig", "context"}, path
                # Nowhere else in the play.
                text = yaml.safe_dump(dict(play, module_defaults=None))
                assert "cluster_kubeconfig" not in text, path

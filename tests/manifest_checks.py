"""Helpers of the manifest tests: a real inventory's settings as the roles
pass them to the manifest builders, the key paths of an object, and the
hostile strings that once added fields to templated YAML."""

import copy
import functools
import glob
import os
import re

import yaml

from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import check_settings
from ansible_collections.mlinfra.multinode.plugins.module_utils.pod_runtime import RUNTIME, runtime_files

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

# Each would add, end or break a YAML field if pasted into YAML text; the
# first is the storage class that added volumeName to a rendered claim.
HOSTILE = [
    "fast\n        volumeName: local-pv-00",
    "fast\nvolumeName: x",
    'a"b\'c',
    "{volumeName: x}",
    "fast: volumeName",
    "fast # volumeName: x",
    "- x\n- y",
    "&anchor *alias !!python/object:os.system",
]


def _yaml(path):
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


def inventory_settings(inventory, **changes):
    """The variables of inventories/<inventory> over the roles' defaults
    (and the statefulset role's vars), converted by check_settings as the
    cluster role does, then ``changes`` as given (not checked)."""
    values = copy.deepcopy(_checked_inventory(inventory))
    values.update(changes)
    return values


@functools.lru_cache(maxsize=None)
def _checked_inventory(inventory):
    values = {}
    for role in ("cluster", "sriov", "statefulset", "verify"):
        values.update(_yaml(os.path.join(REPO, "roles", role, "defaults", "main.yml")))
    values.update(_yaml(os.path.join(REPO, "roles", "statefulset", "vars", "main.yml")))
    for path in sorted(glob.glob(os.path.join(REPO, "inventories", inventory, "group_vars", "all", "*.yml"))):
        values.update(_yaml(path))
    # Defaults that name another variable ("{{ cluster_image }}") take its
    # value; other templates (the local kubeconfig's path) are left out.
    for name, value in list(values.items()):
        if isinstance(value, str) and "{{" in value:
            named = re.match(r"^\{\{ (\w+) \}\}$", value)
            if named:
                values[name] = values[named.group(1)]
            else:
                del values[name]
    checked = check_settings(values)
    assert checked["errors"] == [], checked["errors"]
    values.update(checked["values"])
    # What the roles pass on from the filter pod_runtime_files.
    values["pod_runtime_keys"] = sorted(runtime_files(REPO)[RUNTIME])
    return values


def key_paths(value, prefix=()):
    """Every path of keys (and list positions) in an object, to its leaves."""
    if isinstance(value, dict):
        paths = {prefix} if not value else set()
        for key, item in value.items():
            paths |= key_paths(item, prefix + (key,))
        return paths
    if isinstance(value, list):
        paths = {prefix} if not value else set()
        for index, item in enumerate(value):
            paths |= key_paths(item, prefix + (index,))
        return paths
    return {prefix}


def paths_holding(value, wanted):
    """The paths whose leaf is exactly ``wanted``."""
    return sorted((path for path in key_paths(value) if _leaf(value, path) == wanted), key=repr)


def _leaf(value, path):
    for key in path:
        value = value[key]
    return value


def round_trip(objects):
    """The objects as render.yml writes them and kubectl reads them back."""
    return list(yaml.safe_load_all(yaml.safe_dump_all(objects, sort_keys=False)))

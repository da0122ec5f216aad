# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""What the pods run of the collection, found from the code itself: the one
program of files/bin (``mlinfra``) and every plugins/module_utils file it
imports, directly or through one another, and the demo workload's files.
The autodetect role ships exactly these in three ConfigMaps (which the image
build copies too), so that a helper a subcommand starts to import reaches the
pods without a list to keep by hand:

``<app>-pod-runtime``
    the module_utils files. A ConfigMap's keys cannot hold a ``/``, so a file
    of a subpackage is the key ``node.cli.py``; the pods' volume puts every
    key back at its path (``volume_items``), and the image build does the same.
``<app>-programs``
    files/bin: the program ``mlinfra``.
``<app>-train-assets``
    files/train: the demo's model, its TorchTitan configuration and data.

Standard library only; runs on the controller (it reads the collection's
files).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os
import shutil

PROGRAM = "mlinfra"
# ConfigMap name suffixes (after the app's name), and where each is mounted
# in the pods and in the image, below /opt/mlinfra.
RUNTIME, PROGRAMS, TRAIN_ASSETS = "pod-runtime", "programs", "train-assets"
CONFIG_MAPS = (RUNTIME, PROGRAMS, TRAIN_ASSETS)


def _module_path(module_utils, dotted):
    """The file of module ``dotted`` (``node.cli``) below module_utils."""
    return os.path.join(module_utils, *dotted.split(".")) + ".py"


def _imports(module_utils, path, package):
    """The module_utils modules (dotted, below module_utils) a file imports.
    ``package`` is the file's package below module_utils (``""`` at its top,
    ``"node"`` for node/cli.py), or None for a program, which imports
    ``module_utils.X`` absolutely. Imports inside functions count: the
    program's subcommands import their code only when they run."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if package is None:
            if node.level or not (node.module or "").startswith("module_utils."):
                continue
            base = node.module.split(".", 1)[1]
        else:
            if not node.level:
                continue
            parts = package.split(".") if package else []
            parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
            base = ".".join(parts + ([node.module] if node.module else []))
        # ``from .pkg import mod`` names a module; ``from .mod import name`` a name in one.
        for alias in node.names:
            candidate = (base + "." if base else "") + alias.name
            if os.path.isfile(_module_path(module_utils, candidate)):
                found.add(candidate)
            elif base:
                found.add(base)
    return found


def programs(root):
    """The in-pod programs: every file of files/bin."""
    directory = os.path.join(root, "files", "bin")
    return sorted(name for name in os.listdir(directory)
                  if os.path.isfile(os.path.join(directory, name)) and not name.startswith((".", "_")))


def shipped_module_utils(root):
    """The module_utils modules the programs import, with all they import in
    turn, dotted below module_utils and sorted. Raises ValueError naming a
    module imported but missing."""
    module_utils = os.path.join(root, "plugins", "module_utils")
    wanted = set()
    for program in programs(root):
        wanted |= _imports(module_utils, os.path.join(root, "files", "bin", program), None)
    shipped, pending = set(), sorted(wanted)
    while pending:
        name = pending.pop()
        if name in shipped:
            continue
        path = _module_path(module_utils, name)
        if not os.path.isfile(path):
            raise ValueError("module_utils/%s.py is imported by the pods' code but does not exist"
                             % name.replace(".", "/"))
        shipped.add(name)
        pending.extend(sorted(_imports(module_utils, path, name.rpartition(".")[0]) - shipped))
    return sorted(shipped)


def key_of(dotted):
    """The ConfigMap key of module_utils module ``dotted``: ``node.cli.py``."""
    return dotted + ".py"


def path_of(key):
    """Where the pods and the image put a pod-runtime key, below
    module_utils: ``node.cli.py`` -> ``node/cli.py``."""
    return key[:-len(".py")].replace(".", "/") + ".py"


def volume_items(keys):
    """The ``items`` of the pod-runtime ConfigMap's volume: every key at its
    path, so that the pods see module_utils as the collection holds it."""
    return [{"key": key, "path": path_of(key)} for key in sorted(keys)]


def runtime_files(root):
    """{pod-runtime, programs, train-assets}: for each ConfigMap, its keys
    and the file each holds."""
    train = os.path.join(root, "files", "train")
    module_utils = os.path.join(root, "plugins", "module_utils")
    return {
        RUNTIME: dict((key_of(name), _module_path(module_utils, name)) for name in shipped_module_utils(root)),
        PROGRAMS: dict((name, os.path.join(root, "files", "bin", name)) for name in programs(root)),
        TRAIN_ASSETS: dict((name, os.path.join(train, name)) for name in sorted(os.listdir(train))
                           if os.path.isfile(os.path.join(train, name)) and not name.startswith(".")),
    }


def lay_out(root, directory):
    """Copies what the pods get into ``directory`` as their volumes lay it
    out (module_utils at its paths, the program executable, the demo's
    files): the pods' view of the collection, for running it elsewhere."""
    files = runtime_files(root)
    for item in volume_items(files[RUNTIME]):
        target = os.path.join(directory, "plugins", "module_utils", item["path"])
        if not os.path.isdir(os.path.dirname(target)):
            os.makedirs(os.path.dirname(target))
        shutil.copy(files[RUNTIME][item["key"]], target)
    for key, place in ((PROGRAMS, ("files", "bin")), (TRAIN_ASSETS, ("files", "train"))):
        if not os.path.isdir(os.path.join(directory, *place)):
            os.makedirs(os.path.join(directory, *place))
        for name, path in files[key].items():
            shutil.copy(path, os.path.join(directory, *(place + (name,))))
    os.chmod(os.path.join(directory, "files", "bin", PROGRAM), 0o755)
    return files

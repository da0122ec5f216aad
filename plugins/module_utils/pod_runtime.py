# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""What the pods run of the collection, found from the code itself: every
program of files/bin and every plugins/module_utils file they import,
directly or through one another. The autodetect role ships exactly these
(its ConfigMaps, which the image build copies too), so that a helper one of
them starts to import reaches the pods without a list to keep by hand.

Standard library only; runs on the controller (it reads the collection's
files).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os


def _imports(path, package_level):
    """The module_utils modules a file imports: ``from module_utils.X``
    in a program, ``from .X`` and ``from . import X, Y`` in module_utils."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if package_level and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif not package_level and node.level == 0 and (node.module or "").startswith("module_utils."):
            found.add(node.module.split(".")[1])
    return found


def programs(root):
    """The in-pod programs: every file of files/bin."""
    directory = os.path.join(root, "files", "bin")
    return sorted(name for name in os.listdir(directory)
                  if os.path.isfile(os.path.join(directory, name)) and not name.startswith((".", "_")))


def shipped_module_utils(root):
    """The module_utils modules the programs import, with all they import in
    turn, sorted. Raises ValueError naming a module imported but missing."""
    module_utils = os.path.join(root, "plugins", "module_utils")
    wanted = set()
    for program in programs(root):
        wanted |= _imports(os.path.join(root, "files", "bin", program), package_level=False)
    shipped, pending = set(), sorted(wanted)
    while pending:
        name = pending.pop()
        if name in shipped:
            continue
        path = os.path.join(module_utils, name + ".py")
        if not os.path.isfile(path):
            raise ValueError("module_utils/%s.py is imported by the pods' code but does not exist" % name)
        shipped.add(name)
        pending.extend(sorted(_imports(path, package_level=True) - shipped))
    return sorted(shipped)


def runtime_files(root):
    """{code, bin, train}: the paths the pods get, by ConfigMap - the
    module_utils files, the programs, and the demo's training files."""
    train = os.path.join(root, "files", "train")
    return {
        "code": [os.path.join(root, "plugins", "module_utils", name + ".py") for name in shipped_module_utils(root)],
        "bin": [os.path.join(root, "files", "bin", name) for name in programs(root)],
        "train": [os.path.join(train, name) for name in sorted(os.listdir(train))
                  if os.path.isfile(os.path.join(train, name)) and not name.startswith(".")],
    }

# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Files written whole or not at all, defined once for every other
module_utils file.

Standard library only; shipped into the pods with the rest of the runtime.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def write_atomically(path, text):
    """Writes ``text`` to ``path`` through a file of its own beside it (its
    name carries this process's id, so that two writers never share one),
    then renames it over ``path``: a reader sees the old content or the new,
    never half of it. The directory is made when missing."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory)
    tmp = os.path.join(directory, ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
        os.rename(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)

# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The one base of the collection's own errors: every error its code raises
on purpose (a value refused, a document that cannot be read, a launch that
cannot start) is an MlinfraError, whose message says what is wrong and how
to fix it, so that a caller that only reports can catch them all at once.

Standard library only; shipped into the pods with the rest of the runtime.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class MlinfraError(Exception):
    """An error of the collection's own, its message meant for the user."""

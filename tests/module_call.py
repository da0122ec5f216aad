"""Calling one of the collection's modules inside the test's own Python, as
ansible-core's module test helpers do: the same argument spec, check mode and
exit_json/fail_json as under ansible-playbook, without starting the ansible
CLI and a module process (about 1.4 s of CPU each). Each module keeps one
test that runs it through the ansible CLI (ansible_cli.run_module), which
covers what lies between the two: the action plugin, the AnsiballZ payload
and the interpreter."""

import contextlib
import importlib
import io
import json
from unittest import mock

from ansible.module_utils import _internal
from ansible.module_utils.common import warnings
from ansible.module_utils.testing import patch_module_args


def call_module(name, args, check=False):
    """Run mlinfra.multinode.<name> in this process with args; its result,
    as the module printed it (failed: true and msg on a refusal)."""
    module = importlib.import_module("ansible_collections.mlinfra.multinode.plugins.modules." + name)
    args = dict(args, _ansible_check_mode=check)
    printed = io.StringIO()
    # ansible-core keeps warnings in globals: a module process runs once,
    # this process runs many. And once a test of this process has loaded the
    # controller's code, a warning would be displayed, not returned.
    with patch_module_args(args), contextlib.redirect_stdout(printed), \
            mock.patch.object(warnings, "_global_warnings", {}), mock.patch.object(warnings, "_global_deprecations", {}), \
            mock.patch.object(_internal, "is_controller", False):
        try:
            module.main()
        except SystemExit:
            pass
    result = json.loads(printed.getvalue())
    # A module sends its warnings as structured events; the controller shows
    # (and the json callback records) their text.
    if "warnings" in result:
        result["warnings"] = [warning["event"]["msg"] if isinstance(warning, dict) else warning
                              for warning in result["warnings"]]
    return result

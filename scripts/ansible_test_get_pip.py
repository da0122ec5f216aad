"""Offline stand-in for the pip bootstrap script of ansible-test.

MLINFRA-MULTINODE GET-PIP STAND-IN (scripts/setup.sh recognises its own copies
by this line and refreshes them; it never overwrites any other file.)

ansible-test creates each sanity test's virtual environment without pip and
then bootstraps pip by running a script it downloads from a host that is not
reachable here.  Before downloading, it looks for a cached copy at
~/.ansible/test/cache/get_pip_<pip version>.py; scripts/setup.sh installs this
file there.  ansible-test runs it with the new environment's interpreter as

    python <this file> --disable-pip-version-check pip==<version> [--no-setuptools] [--no-wheel]

This stand-in bootstraps pip from the interpreter's own bundled wheel
(ensurepip, no network), then installs the requested packages with that pip
from the configured package index, so the environment ends up with exactly the
pip version ansible-test pins.
"""

from __future__ import annotations

import subprocess
import sys

# get-pip options that only mean "do not add setuptools/wheel"; ensurepip adds
# neither on Python 3.12 and later.
_SKIPPED_OPTIONS = frozenset(('--no-setuptools', '--no-wheel'))


def main() -> int:
    """Bootstrap pip, then install the requested packages."""
    args = [arg for arg in sys.argv[1:] if arg not in _SKIPPED_OPTIONS]
    # In a child process: ensurepip clears the PIP_* variables and pip's
    # configuration files of the process it runs in, and the install below
    # needs them (index, certificates, proxies).
    status = subprocess.call([sys.executable, '-m', 'ensurepip', '--upgrade'], stdout=subprocess.DEVNULL)
    if status or not any(not arg.startswith('-') for arg in args):
        return status
    return subprocess.call([sys.executable, '-m', 'pip', 'install', '--quiet', *args])


if __name__ == '__main__':
    sys.exit(main())

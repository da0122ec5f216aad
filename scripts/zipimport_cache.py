# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Bytecode for code imported from zip files, as Python keeps it for files.

Every Ansible module runs as a zip (AnsiballZ) holding the module and the
module_utils it imports, as source. Python's zipimport keeps no bytecode:
each module process compiled every module_utils it imported, and twice
(zipimporter.get_filename compiles a module only to name its file, then
get_code compiles it again). That was about half of a module process's time
here (docs/measurements/test-suite-history.md, "Bytecode for the modules' zips").

scripts/setup.sh installs this file, and a .pth file that imports it, into
the environments it makes: each source is compiled once per content (the
key is its hash and the interpreter's cache tag) into a cache directory,
and each code object is kept for the second of the two calls. The code
object is the one compile() gives, with its file name set to the zip's as
importlib does for cached bytecode. Anything that goes wrong falls back to
zipimport's own compilation; MLINFRA_ZIPIMPORT_CACHE=0 turns it all off (to
compare, or to rule it out).
"""

import hashlib
import importlib.util
import marshal
import os
import zipimport

# Per bytecode format (its magic number), as __pycache__ is per cache tag.
CACHE_DIR = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                         "mlinfra-multinode", "zipimport", importlib.util.MAGIC_NUMBER.hex())


def _install():
    if os.environ.get("MLINFRA_ZIPIMPORT_CACHE") == "0":
        return
    try:
        import _imp
        compile_source = zipimport._compile_source
        get_module_code = zipimport._get_module_code
        fix_filename = _imp._fix_co_filename
    except (ImportError, AttributeError):
        return

    def cached_compile_source(pathname, source):
        path = os.path.join(CACHE_DIR, hashlib.sha256(source).hexdigest())
        try:
            with open(path, "rb") as handle:
                code = marshal.load(handle)
            fix_filename(code, pathname)
            return code
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = compile_source(pathname, source)
        if code is not None:
            try:
                os.makedirs(CACHE_DIR, exist_ok=True)
                partial = "%s.%d.tmp" % (path, os.getpid())
                with open(partial, "wb") as handle:
                    marshal.dump(code, handle)
                os.replace(partial, path)
            except OSError:
                pass
        return code

    # get_filename's result, kept for the get_code that follows it.
    computed = {}

    def get_module_code_once(importer, fullname):
        key = (importer.archive, importer.prefix, fullname)
        found = computed.pop(key, None)
        if found is None:
            found = get_module_code(importer, fullname)
            computed[key] = found
        return found

    zipimport._compile_source = cached_compile_source
    zipimport._get_module_code = get_module_code_once


_install()

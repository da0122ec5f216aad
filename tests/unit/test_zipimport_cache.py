"""scripts/zipimport_cache.py: code imported from a zip (as every Ansible
module runs) is compiled once per content, not twice per process, and the
cached code names the zip it was imported from."""

import json
import os
import subprocess
import sys
import zipfile

from conftest import REPO

# Imports pkg.mod from the zip given, counting the compile() calls of
# sources in zips, and says what it saw.
PROBE = r"""
import builtins, json, sys
compiled = []
original = builtins.compile
def counting(source, filename, *args, **kwargs):
    if ".zip" in str(filename):
        compiled.append(filename)
    return original(source, filename, *args, **kwargs)
builtins.compile = counting
sys.path.insert(0, sys.argv[1])
import mlinfra_zipimport_cache
sys.path.insert(0, sys.argv[2])
import pkg.mod
print(json.dumps({"compiled": compiled, "file": pkg.mod.__file__, "answer": pkg.mod.answer(),
                  "code_file": pkg.mod.answer.__code__.co_filename}))
"""


def make_zip(path, answer):
    with zipfile.ZipFile(str(path), "w") as archive:
        archive.writestr("pkg/__init__.py", "")
        archive.writestr("pkg/mod.py", "def answer():\n    return %d\n" % answer)
    return str(path)


def probe(tmp_path, archive):
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir(exist_ok=True)
    (hook_dir / "mlinfra_zipimport_cache.py").write_text(
        open(os.path.join(REPO, "scripts", "zipimport_cache.py")).read())
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONDONTWRITEBYTECODE="1")
    # -S: no .pth of the environment running the tests; the hook is imported by hand.
    proc = subprocess.run([sys.executable, "-S", "-c", PROBE, str(hook_dir), archive], env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_each_source_is_compiled_once_and_then_read_from_the_cache(tmp_path):
    first = probe(tmp_path, make_zip(tmp_path / "run-1.zip", 42))
    # zipimport alone compiles each of the two twice (get_filename, get_code).
    assert [os.path.basename(name) for name in first["compiled"]] == ["__init__.py", "mod.py"]
    assert first["answer"] == 42
    cached = list((tmp_path / "cache" / "mlinfra-multinode" / "zipimport").iterdir())
    assert len(cached) == 1 and len(list(cached[0].iterdir())) == 2
    # The same content in another zip (the next module run): nothing compiled,
    # and the code names the zip it came from.
    again = probe(tmp_path, make_zip(tmp_path / "run-2.zip", 42))
    assert again["compiled"] == [] and again["answer"] == 42
    assert again["file"].startswith(str(tmp_path / "run-2.zip")) and again["code_file"] == again["file"]
    # Changed content is compiled again.
    changed = probe(tmp_path, make_zip(tmp_path / "run-3.zip", 7))
    assert [os.path.basename(name) for name in changed["compiled"]] == ["mod.py"] and changed["answer"] == 7


def test_an_unwritable_cache_only_costs_the_compilation(tmp_path):
    (tmp_path / "cache").write_text("a file where the cache directory would be")
    result = probe(tmp_path, make_zip(tmp_path / "run.zip", 5))
    assert result["answer"] == 5 and len(result["compiled"]) == 2


def test_it_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("MLINFRA_ZIPIMPORT_CACHE", "0")
    result = probe(tmp_path, make_zip(tmp_path / "run.zip", 5))
    # zipimport's own way: each source compiled twice, nothing cached.
    assert len(result["compiled"]) == 4 and not (tmp_path / "cache").exists()

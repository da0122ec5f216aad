"""`ansible-doc` gives complete documentation for every module, filter,
callback and role entry point of the collection: what an operator reads before using one.

The plugins and roles are found on the file system, not listed here, so a new
one without documentation fails. The documentation is read through the real
`ansible-doc --json` of the Python running the tests (the .venv's ansible-core,
or the oldest supported one's), which merges doc fragments and finds the YAML
files beside a filter file the way Ansible itself does."""

import glob
import importlib
import json
import os
import subprocess
import sys

import pytest
import yaml
from ansible.module_utils.compat.version import LooseVersion

from conftest import REPO

COLLECTION = "mlinfra.multinode"
ANSIBLE_DOC = os.path.join(os.path.dirname(sys.executable), "ansible-doc")

MODULES = sorted(os.path.splitext(os.path.basename(path))[0]
                 for path in glob.glob(os.path.join(REPO, "plugins", "modules", "*.py"))
                 if not os.path.basename(path).startswith("_"))
FILTER_FILES = sorted(os.path.splitext(os.path.basename(path))[0]
                      for path in glob.glob(os.path.join(REPO, "plugins", "filter", "*.py"))
                      if not os.path.basename(path).startswith("_"))
CALLBACKS = sorted(os.path.splitext(os.path.basename(path))[0]
                   for path in glob.glob(os.path.join(REPO, "plugins", "callback", "*.py"))
                   if not os.path.basename(path).startswith("_"))
# Every role, with or without meta/argument_specs.yml: one without has no
# documented entry point and fails.
ROLES = sorted(os.path.basename(os.path.dirname(path)) for path in glob.glob(os.path.join(REPO, "roles", "*", "tasks")))

# Return values whose keys are data rather than names the code fixes, so
# that they cannot be described key by key: plugin -> return value (dotted
# path) -> why. Every other mapping (or list of mappings) a plugin returns
# names its keys with `contains`.
FREE_FORM_RETURNS = {
    "nccl_env": {"env": "variable name to value, only the variables that are set"},
    "rdma_node_check": {
        "checks.data": "each check's own evidence, different per check",
        "facts": "the node as read, handed on whole to the nccl_env module's facts option",
    },
    "throughput_report": {"runs.figures": "the figures the log's format has, different per format"},
    "rdma_ipam": {"_value": "NIC name to a CNI IPAM configuration, which may be one given by the user"},
    "train_job_manifests": {"_value": "Kubernetes objects, different per start mode"},
    "workload_manifests": dict(("_value." + step, "Kubernetes objects, different per kind")
                               for step in ("base", "claims", "statefulset")),
    "network_manifests": {"_value": "Kubernetes objects, different per network type"},
    "probe_manifests": {"_value": "Kubernetes objects, different per kind"},
    "cluster_ownership": {"foreign.metadata.labels": "the live object's labels, whoever set them",
                          "namespace_labels": "the live namespace's labels, whoever set them"},
    "pod_verdicts": {"_value.nccl.env": "variable name to value, as the pod's init container wrote them"},
    "bench_verdict": {
        "_value.pods.nccl": "what NCCL's log said, as mlinfra pod-bench reports it",
        "_value.pods.transport": "the nccl_transport check as nccl_log gives it",
        "_value.pods.port_counters": "RDMA port name to what it moved, as port_counters.port_deltas gives it",
        "_value.pods.placement.cpus_per_numa_node": "NUMA node number to how many of the pod's CPUs are on it",
        "_value.document": "the benchmark's document, as mlinfra nccl-bench --json writes it",
        "_value.node_port_counters": "node name to what its ports moved, as node_port_deltas gives it",
    },
    "node_port_deltas": {"_value": "node name to {ports, error}, ports by RDMA port name as port_deltas gives them"},
    "soak_run_facts": {
        "_value.pods.placement": "bench_verdict's pods' placement, documented there",
        "_value.pods.rails": "bench_verdict's pods' rails, documented there",
        "_value.pods.port_counters": "RDMA port name to what it moved, as port_counters.port_deltas gives it",
        "_value.nodes.port_counters": "RDMA port name to what it moved, as port_counters.port_deltas gives it",
    },
    "verify_report": {
        "_value.bench": "bench_verdict's result, documented there",
        "_value.nodes": "node_verdicts' entries, documented there, each with its subject",
        "_value.pods": "pod_verdicts' entries, documented there, each with its subject",
    },
    "fabric_fitness": {"_value.blocking.checks": "the report's findings, documented by node_verdicts"},
    "soak_report": {"_value.runs.pods": "the pods and nodes of the run, as the soak role lists them"},
}


def galaxy_version():
    with open(os.path.join(REPO, "galaxy.yml")) as handle:
        return str(yaml.safe_load(handle)["version"])


def filter_names(filter_file):
    """The filters a filter file defines, as Ansible gets them: from its
    FilterModule. A file may define several; ansible-doc documents each by
    its own name."""
    module = importlib.import_module("ansible_collections.mlinfra.multinode.plugins.filter." + filter_file)
    return sorted(module.FilterModule().filters())


def run_ansible_doc(plugin_type, names, collections_path=None):
    """ansible-doc --json for the named plugins of the collection: the JSON
    entries by full name and ansible-doc's stderr, which says why a plugin is
    missing from them. One run for all; when that fails (ansible-doc exits
    non-zero without output if any plugin has no documentation at all), one
    run per plugin, so that only the plugins at fault fail their tests."""
    assert os.access(ANSIBLE_DOC, os.X_OK), "no ansible-doc beside %s" % sys.executable
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    if collections_path:
        env["ANSIBLE_COLLECTIONS_PATH"] = collections_path

    def run(batch):
        proc = subprocess.run([ANSIBLE_DOC, "-t", plugin_type, "--json"]
                              + ["%s.%s" % (COLLECTION, name) for name in batch],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=300, check=False)
        return (json.loads(proc.stdout) if proc.returncode == 0 else {}), proc.stderr

    docs, stderr = run(names)
    if not docs and len(names) > 1:
        for name in names:
            found, error = run([name])
            docs.update(found)
            stderr += error
    return docs, stderr


# --- the checks, on the JSON that ansible-doc prints --------------------------

def _text(value):
    """A description's text (a string or a list of paragraphs); None when it
    is missing, not text, or has an empty paragraph."""
    paragraphs = [value] if isinstance(value, str) else value
    if not isinstance(paragraphs, list) or not paragraphs:
        return None
    if not all(isinstance(p, str) and p.strip() for p in paragraphs):
        return None
    return " ".join(paragraphs)


def option_problems(options, where):
    """Every option (and suboption) needs a description and a type."""
    problems = []
    if not isinstance(options, dict):
        return ["%s: options is %r, not a mapping" % (where, options)]
    for name, spec in sorted(options.items()):
        path = "%s option %s" % (where, name)
        if not isinstance(spec, dict):
            problems.append("%s: %r is not a mapping" % (path, spec))
            continue
        if not _text(spec.get("description")):
            problems.append("%s has no description" % path)
        if not spec.get("type"):
            problems.append("%s has no type" % path)
        # Modules nest with suboptions, role argument specs with options.
        for key in ("suboptions", "options"):
            if spec.get(key):
                problems.extend(option_problems(spec[key], path))
    return problems


def list_option_problems(options, where):
    """A module's or filter's list option names the type of its elements.
    (Not asked of roles: adding elements to a role's option would change how
    its values are validated.)"""
    problems = []
    for name, spec in sorted(options.items()):
        path = "%s option %s" % (where, name)
        if isinstance(spec, dict) and spec.get("type") == "list" and not spec.get("elements"):
            problems.append("%s is a list without elements" % path)
        if isinstance(spec, dict) and isinstance(spec.get("suboptions"), dict):
            problems.extend(list_option_problems(spec["suboptions"], path))
    return problems


def return_problems(returns, where, free_form, prefix=""):
    """Every returned value (and every key it contains) needs a description
    and a type; a list names the type of its elements, and a mapping (or a
    list of mappings) names its keys unless `free_form` (dotted paths) says
    they are data."""
    problems = []
    for name, spec in sorted(returns.items()):
        dotted = prefix + name
        path = "%s return value %s" % (where, dotted)
        if not isinstance(spec, dict):
            problems.append("%s: %r is not a mapping" % (path, spec))
            continue
        if not _text(spec.get("description")):
            problems.append("%s has no description" % path)
        if not spec.get("type"):
            problems.append("%s has no type" % path)
        if spec.get("type") == "list" and not spec.get("elements"):
            problems.append("%s is a list without elements" % path)
        mapping = spec.get("type") == "dict" or spec.get("type") == "list" and spec.get("elements") == "dict"
        if mapping and not spec.get("contains") and dotted not in free_form:
            problems.append("%s is a mapping without contains (its keys)" % path)
        if spec.get("contains"):
            problems.extend(return_problems(spec["contains"], where, free_form, dotted + "."))
    return problems


def return_paths(returns, prefix=""):
    paths = set()
    for name, spec in returns.items():
        paths.add(prefix + name)
        if isinstance(spec, dict) and isinstance(spec.get("contains"), dict):
            paths |= return_paths(spec["contains"], prefix + name + ".")
    return paths


def example_problems(examples, fqcn, where):
    """EXAMPLES: YAML that parses into tasks, at least one of which uses the
    plugin by its full name."""
    if not isinstance(examples, str) or not examples.strip():
        return ["%s has no EXAMPLES" % where]
    try:
        tasks = yaml.safe_load(examples)
    except yaml.YAMLError as exc:
        return ["%s EXAMPLES is not YAML: %s" % (where, exc)]
    if not isinstance(tasks, list) or not tasks or not all(isinstance(task, dict) for task in tasks):
        return ["%s EXAMPLES is not a list of tasks" % where]
    if fqcn not in examples:
        return ["%s EXAMPLES never uses %s" % (where, fqcn)]
    return []


def plugin_problems(name, entry, version, free_form=None):
    """What is missing from the ansible-doc --json entry of a module or filter
    called `name` (without the collection); `version` is the collection's,
    `free_form` the return values whose keys are data."""
    free_form = free_form or {}
    fqcn = "%s.%s" % (COLLECTION, name)
    if not isinstance(entry, dict) or not isinstance(entry.get("doc"), dict):
        return ["%s: ansible-doc gives no documentation" % fqcn]
    doc = entry["doc"]
    problems = []
    # ansible-doc shows a filter file's DOCUMENTATION for every filter the
    # file defines, so a second filter there would show the first one's.
    documented = doc.get("module") or doc.get("name")
    if documented != name:
        problems.append("%s: ansible-doc shows the documentation of %r (a file with several filters documents "
                        "each in a <filter>.yml beside it, and has no DOCUMENTATION itself)" % (fqcn, documented))
    if not _text(doc.get("short_description")):
        problems.append("%s has no short_description" % fqcn)
    if not _text(doc.get("description")):
        problems.append("%s has no description" % fqcn)
    # Every plugin of the collection says when it came; none is newer than the collection.
    added = doc.get("version_added")
    if not added:
        problems.append("%s has no version_added" % fqcn)
    elif LooseVersion(str(added)) > LooseVersion(version):
        problems.append("%s: version_added %s is after the collection's version %s" % (fqcn, added, version))
    problems.extend(option_problems(doc.get("options") or {}, fqcn))
    problems.extend(list_option_problems(doc.get("options") or {}, fqcn))
    problems.extend(example_problems(entry.get("examples"), fqcn, fqcn))
    returns = entry.get("return")
    if not isinstance(returns, dict) or not returns:
        problems.append("%s has no RETURN" % fqcn)
    else:
        if "module" not in doc and "_value" not in returns:
            problems.append("%s RETURN does not describe _value, the filter's result" % fqcn)
        problems.extend(return_problems(returns, fqcn, free_form))
        problems.extend("%s: FREE_FORM_RETURNS names %s, which RETURN does not document" % (fqcn, path)
                        for path in sorted(set(free_form) - return_paths(returns)))
    return problems


def role_problems(role, entry, entry_points, defaults=()):
    """What is missing from the ansible-doc --json entry of a role whose
    meta/argument_specs.yml defines `entry_points` and whose defaults/main.yml
    sets the variables `defaults`."""
    fqcn = "%s.%s" % (COLLECTION, role)
    if not isinstance(entry, dict) or not isinstance(entry.get("entry_points"), dict):
        return ["%s: ansible-doc gives no entry points" % fqcn]
    documented = entry["entry_points"]
    problems = []
    if sorted(documented) != sorted(entry_points):
        problems.append("%s: ansible-doc shows entry points %s, meta/argument_specs.yml defines %s"
                        % (fqcn, sorted(documented), sorted(entry_points)))
    for name, spec in sorted(documented.items()):
        where = "%s entry point %s" % (fqcn, name)
        if not _text(spec.get("short_description")):
            problems.append("%s has no short_description" % where)
        if not _text(spec.get("description")):
            problems.append("%s has no description" % where)
        problems.extend(option_problems(spec.get("options") or {}, where))
    # A variable the role has a default for is one to set from the
    # inventory; some entry point must document it.
    documented_options = set(name for spec in documented.values() for name in (spec.get("options") or {}))
    problems.extend("%s: defaults/main.yml sets %s, which no entry point documents" % (fqcn, name)
                    for name in sorted(set(defaults) - documented_options))
    return problems


# --- the collection's own documentation ----------------------------------------

@pytest.fixture(scope="module")
def module_docs():
    return run_ansible_doc("module", MODULES)


@pytest.fixture(scope="module")
def filter_docs():
    names = sorted(set(name for filter_file in FILTER_FILES for name in filter_names(filter_file)))
    return run_ansible_doc("filter", names)


@pytest.fixture(scope="module")
def role_docs():
    return run_ansible_doc("role", ROLES)


def assert_complete(problems, stderr):
    # One line per problem, and ansible-doc's warnings (a plugin it could not
    # read is missing from its output, with the reason only there).
    assert not problems, "\n".join(problems) + "\n\nansible-doc stderr:\n" + stderr


def test_plugins_and_roles_are_found():
    # The discovery itself: an empty glob would make every test below vacuous.
    assert "nccl_env" in MODULES
    assert "text_table" in FILTER_FILES
    assert "train" in ROLES
    assert "api_faults" in CALLBACKS


@pytest.mark.parametrize("callback", CALLBACKS)
def test_callback_doc_says_what_it_does_and_how_to_enable_it(callback):
    docs, stderr = run_ansible_doc("callback", [callback])
    entry = docs.get("%s.%s" % (COLLECTION, callback), {}).get("doc", {})
    assert entry.get("short_description") and entry.get("description"), stderr
    # A callback of a collection runs only where ansible.cfg enables it.
    assert "callbacks_enabled" in " ".join(entry["description"])
    with open(os.path.join(REPO, "ansible.cfg")) as handle:
        assert "%s.%s" % (COLLECTION, callback) in handle.read()


@pytest.mark.parametrize("module", MODULES)
def test_module_doc_is_complete(module, module_docs):
    docs, stderr = module_docs
    entry = docs.get("%s.%s" % (COLLECTION, module))
    assert_complete(plugin_problems(module, entry, galaxy_version(), FREE_FORM_RETURNS.get(module)), stderr)


@pytest.mark.parametrize("filter_file", FILTER_FILES)
def test_filter_docs_are_complete(filter_file, filter_docs):
    docs, stderr = filter_docs
    names = filter_names(filter_file)
    assert names, "plugins/filter/%s.py defines no filter" % filter_file
    problems = []
    for name in names:
        problems.extend(plugin_problems(name, docs.get("%s.%s" % (COLLECTION, name)), galaxy_version(),
                                        FREE_FORM_RETURNS.get(name)))
    assert_complete(problems, stderr)


@pytest.mark.parametrize("role", ROLES)
def test_role_entry_points_are_complete(role, role_docs):
    docs, stderr = role_docs
    spec_file = os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")
    assert os.path.exists(spec_file), "roles/%s has no meta/argument_specs.yml documenting its entry points" % role
    with open(spec_file) as handle:
        entry_points = list(yaml.safe_load(handle)["argument_specs"])
    defaults = {}
    defaults_file = os.path.join(REPO, "roles", role, "defaults", "main.yml")
    if os.path.exists(defaults_file):
        with open(defaults_file) as handle:
            defaults = yaml.safe_load(handle) or {}
    assert_complete(role_problems(role, docs.get("%s.%s" % (COLLECTION, role)), entry_points, defaults), stderr)


# --- the checks catch what they are for ---------------------------------------

def complete_filter_entry():
    return {
        "doc": {"name": "demo", "short_description": "A demo", "description": ["Does a demo."],
                "version_added": "0.1.0",
                "options": {"_input": {"description": "The input.", "type": "str"}}},
        "examples": "- ansible.builtin.debug:\n    msg: \"{{ 'x' | mlinfra.multinode.demo }}\"\n",
        "return": {"_value": {"description": "The result.", "type": "dict",
                              "contains": {"key": {"description": "A key.", "type": "str"}}}},
    }


def test_checks_pass_a_complete_entry():
    assert plugin_problems("demo", complete_filter_entry(), "0.1.0") == []


@pytest.mark.parametrize("change, expected", [
    (lambda e: e["doc"]["options"]["_input"].pop("description"), "option _input has no description"),
    (lambda e: e["doc"]["options"]["_input"].update(description=[""]), "option _input has no description"),
    (lambda e: e["doc"]["options"]["_input"].pop("type"), "option _input has no type"),
    (lambda e: e["doc"].update(short_description=""), "has no short_description"),
    (lambda e: e["doc"].pop("description"), "has no description"),
    (lambda e: e["doc"].pop("version_added"), "has no version_added"),
    (lambda e: e["doc"].update(version_added="0.2.0"), "after the collection's version 0.1.0"),
    (lambda e: e["doc"].update(name="other"), "shows the documentation of 'other'"),
    (lambda e: e.update(examples=""), "has no EXAMPLES"),
    (lambda e: e.update(examples="- name: [unclosed"), "EXAMPLES is not YAML"),
    (lambda e: e.update(examples="- ansible.builtin.debug: {}\n"), "EXAMPLES never uses mlinfra.multinode.demo"),
    (lambda e: e.update(**{"return": None}), "has no RETURN"),
    (lambda e: e["return"].update(other=e["return"].pop("_value")), "does not describe _value"),
    (lambda e: e["return"]["_value"]["contains"]["key"].pop("type"), "return value _value.key has no type"),
    (lambda e: e["return"]["_value"].pop("description"), "return value _value has no description"),
    (lambda e: e["return"]["_value"].pop("contains"), "return value _value is a mapping without contains"),
    (lambda e: e["return"]["_value"].update(type="list", elements=None),
     "return value _value is a list without elements"),
    (lambda e: e["doc"]["options"]["_input"].update(type="list"), "option _input is a list without elements"),
])
def test_checks_flag_what_is_missing(change, expected):
    entry = complete_filter_entry()
    change(entry)
    problems = plugin_problems("demo", entry, "0.1.0")
    assert any(expected in problem for problem in problems), problems


def test_free_form_returns_pass_without_contains_and_must_exist():
    entry = complete_filter_entry()
    entry["return"]["_value"].pop("contains")
    assert plugin_problems("demo", entry, "0.1.0", {"_value": "data"}) == []
    assert plugin_problems("demo", complete_filter_entry(), "0.1.0", {"_value.gone": "data"}) == [
        "mlinfra.multinode.demo: FREE_FORM_RETURNS names _value.gone, which RETURN does not document"]


SCRATCH_FILTERS = {
    # DOCUMENTATION of one filter in a file that defines two.
    "pair.py": '''
DOCUMENTATION = """
name: pair
short_description: A pair
version_added: 0.1.0
description: [Gives its input.]
options:
  _input: {description: The input., type: str}
"""
EXAMPLES = """
- ansible.builtin.debug:
    msg: "{{ 'x' | mlinfra.multinode.pair }}"
"""
RETURN = """
_value: {description: The input., type: str}
"""


class FilterModule(object):
    def filters(self):
        return {"pair": str, "other": str}
''',
    # No documentation at all.
    "bare.py": '''
class FilterModule(object):
    def filters(self):
        return {"bare": str}
''',
}


def test_ansible_doc_shows_what_the_checks_catch(tmp_path):
    # What the checks above rely on, in a scratch collection: ansible-doc
    # shows a file's DOCUMENTATION for every filter of the file, and leaves a
    # filter without documentation out (failing the whole run, hence the run
    # per plugin).
    filters = tmp_path / "ansible_collections" / "mlinfra" / "multinode" / "plugins" / "filter"
    filters.mkdir(parents=True)
    for name, text in SCRATCH_FILTERS.items():
        (filters / name).write_text(text)
    docs, stderr = run_ansible_doc("filter", ["pair", "other", "bare"], collections_path=str(tmp_path))
    assert plugin_problems("pair", docs.get("mlinfra.multinode.pair"), "0.1.0") == []
    assert plugin_problems("other", docs.get("mlinfra.multinode.other"), "0.1.0") == [
        "mlinfra.multinode.other: ansible-doc shows the documentation of 'pair' (a file with several filters "
        "documents each in a <filter>.yml beside it, and has no DOCUMENTATION itself)",
        "mlinfra.multinode.other EXAMPLES never uses mlinfra.multinode.other"]
    assert plugin_problems("bare", docs.get("mlinfra.multinode.bare"), "0.1.0") == [
        "mlinfra.multinode.bare: ansible-doc gives no documentation"]
    assert "mlinfra.multinode.bare" in stderr


def test_role_checks_flag_what_is_missing():
    entry = {"entry_points": {"main": {
        "short_description": "Main", "description": ["Does it."],
        "options": {"role_opt": {"description": "An option.", "type": "dict",
                                 "options": {"inner": {"description": "Inner."}}},
                    "other": {"type": "str"}}}}}
    assert role_problems("demo", entry, ["main", "extra"], {"role_opt": {}, "undocumented": 1}) == [
        "mlinfra.multinode.demo: ansible-doc shows entry points ['main'], meta/argument_specs.yml defines "
        "['extra', 'main']",
        "mlinfra.multinode.demo entry point main option other has no description",
        "mlinfra.multinode.demo entry point main option role_opt option inner has no type",
        "mlinfra.multinode.demo: defaults/main.yml sets undocumented, which no entry point documents",
    ]

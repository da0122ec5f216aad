"""Every boolean the user can set is read converted wherever the roles and
playbooks use it. `-e cluster_host_network=false` reaches Jinja as the
string "false", which a bare `{% if cluster_host_network %}` takes as true;
checked_settings refuses what is not a boolean and converts the rest once,
and the roles read the result, `cluster_values.cluster_host_network`. Only
the few a task's own vars may set after that check, or whose default is
computed, are read through `| bool` (READ_AS_GIVEN). The booleans are those
the argument specs declare."""

import glob
import os
import re

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def declared_booleans():
    names = set()
    for path in glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml")):
        with open(path) as handle:
            specs = yaml.safe_load(handle)["argument_specs"]
        for entry in specs.values():
            names.update(name for name, option in entry.get("options", {}).items() if option.get("type") == "bool")
    return names | {"purge_workspaces", "purge_image", "purge_sriov_policies"}


# Booleans read as given, through `| bool`, and why they cannot be read from
# cluster_values (converted once, when the play starts).
READ_AS_GIVEN = {
    "train_stop": "the soak role sets it in the vars of each run's train tasks",
    "cluster_nodes_before_sriov": "the tasks that include the node checks set it in their vars",
    "autodetect_require_agreement": "the verify role sets it in the vars of its read-back",
    "image_build": "its default is computed from cluster_platform",
    "train_stop_running": "its default follows -e stop_running",
    "purge_workspaces": "teardown.yml's -e only, not an inventory setting",
    "purge_image": "teardown.yml's -e only, not an inventory setting",
    "purge_sriov_policies": "teardown.yml's -e only, not an inventory setting",
}

CONDITION_KEYS = ("when", "that", "until", "failed_when", "changed_when")


def expressions(path):
    """(line number, expression) for every Jinja expression of a file: {{ }},
    {% %} and the bare expressions of when/that/until/... in task files."""
    with open(path) as handle:
        text = handle.read()
    for match in re.finditer(r"\{\{(.*?)\}\}|\{%-?(.*?)-?%\}", text, re.S):
        yield text.count("\n", 0, match.start()) + 1, match.group(1) or match.group(2)
    if path.endswith(".yml"):
        for number, line in enumerate(text.splitlines(), 1):
            found = re.match(r"^\s*-?\s*(%s):\s*(.+)$" % "|".join(CONDITION_KEYS), line)
            if found and "{{" not in found.group(2):
                yield number, found.group(2)
        # list items under that:/when: (one condition per line)
        for match in re.finditer(r"^(\s*)(?:%s):\s*\n((?:\1\s+- .*\n)+)" % "|".join(CONDITION_KEYS), text, re.M):
            first = text.count("\n", 0, match.start(2)) + 1
            for offset, item in enumerate(match.group(2).splitlines()):
                if "{{" not in item:
                    yield first + offset, item.strip()[2:]


def bare_uses(expression, names):
    """Names used in an expression without `| bool` right after them (a
    `| default(...)` in between is allowed)."""
    found = []
    for match in re.finditer(r"(?<![\w.'\"])(%s)\b(?!\s*[:=(])" % "|".join(sorted(names, key=len, reverse=True)),
                             expression):
        rest = expression[match.end():]
        rest = re.sub(r"^\s*\|\s*default\([^()]*\)", "", rest)
        if not re.match(r"^\s*\|\s*bool\b", rest) and not re.match(r"^\s*is\s+(not\s+)?(defined|none)\b", rest):
            found.append(match.group(1))
    return found


def raw_reads(expression, names):
    """Names read as given, through `| bool` (a `| default(...)` between
    allowed)."""
    pattern = r"(?<![\w.'\"])(%s)(?:\s*\|\s*default\([^()]*\))?\s*\|\s*bool\b" % "|".join(
        sorted(names, key=len, reverse=True))
    return [match.group(1) for match in re.finditer(pattern, expression)]


def test_every_boolean_is_read_through_bool():
    names = declared_booleans()
    assert {"cluster_host_network", "statefulset_require_verified_nodes", "verify_bench"} <= names
    files = glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml")) \
        + glob.glob(os.path.join(REPO, "roles", "*", "templates", "*.j2")) \
        + glob.glob(os.path.join(REPO, "roles", "*", "vars", "*.yml")) \
        + glob.glob(os.path.join(REPO, "playbooks", "*.yml"))
    bare, raw = [], []
    for path in sorted(files):
        for number, expression in expressions(path):
            shown = " ".join(expression.split())[:100]
            for name in bare_uses(expression, names):
                bare.append("%s:%d: %s in %r" % (os.path.relpath(path, REPO), number, name, shown))
            for name in raw_reads(expression, set(names) - set(READ_AS_GIVEN)):
                raw.append("%s:%d: %s in %r: read cluster_values.%s" % (
                    os.path.relpath(path, REPO), number, name, shown, name))
    assert bare == [], "\n".join(bare)
    assert raw == [], "\n".join(raw)


def test_the_checker_finds_a_bare_boolean():
    names = {"cluster_host_network"}
    assert bare_uses(" if cluster_host_network ", names) == ["cluster_host_network"]
    assert bare_uses("not cluster_host_network and x", names) == ["cluster_host_network"]
    assert bare_uses("cluster_host_network | bool", names) == []
    assert bare_uses("cluster_host_network | default(false) | bool", names) == []
    assert bare_uses("cluster_host_network is defined", names) == []
    assert bare_uses("'cluster_host_network'", names) == []
    assert bare_uses("cluster_values.cluster_host_network", names) == []
    assert raw_reads("x if cluster_host_network | default(false) | bool else y", names) == ["cluster_host_network"]
    assert raw_reads("cluster_values.cluster_host_network", names) == []

"""Every boolean the user can set is read through `| bool` wherever the
roles and playbooks use it. `-e cluster_host_network=false` reaches Jinja as
the string "false", which a bare `{% if cluster_host_network %}` takes as
true; checked_settings refuses what is not a boolean, and `| bool` reads the
rest as Ansible does. The booleans are those the argument specs declare."""

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


def test_every_boolean_is_read_through_bool():
    names = declared_booleans()
    assert {"cluster_host_network", "statefulset_require_verified_nodes", "verify_bench"} <= names
    files = glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml")) \
        + glob.glob(os.path.join(REPO, "roles", "*", "templates", "*.j2")) \
        + glob.glob(os.path.join(REPO, "roles", "*", "vars", "*.yml")) \
        + glob.glob(os.path.join(REPO, "playbooks", "*.yml"))
    bare = []
    for path in sorted(files):
        for number, expression in expressions(path):
            for name in bare_uses(expression, names):
                shown = " ".join(expression.split())[:100]
                bare.append("%s:%d: %s in %r" % (os.path.relpath(path, REPO), number, name, shown))
    assert bare == [], "\n".join(bare)


def test_the_checker_finds_a_bare_boolean():
    names = {"cluster_host_network"}
    assert bare_uses(" if cluster_host_network ", names) == ["cluster_host_network"]
    assert bare_uses("not cluster_host_network and x", names) == ["cluster_host_network"]
    assert bare_uses("cluster_host_network | bool", names) == []
    assert bare_uses("cluster_host_network | default(false) | bool", names) == []
    assert bare_uses("cluster_host_network is defined", names) == []
    assert bare_uses("'cluster_host_network'", names) == []

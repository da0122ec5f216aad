"""docs/inventory.md documents every inventory field.

The guide gives each field a heading of its own, `### `name``, followed by a
list with `- **Type:** `...`` and `- **Default:** ...` lines. A default is
either a value in backticks (compared with the argument specifications),
`none, required.` or `unset ...` (the option has no default). These tests
check that every variable set in an inventory's group_vars/all (a file or a
directory), and every role option the template shows commented out, has its
heading; that every heading is set in an inventory or is an option of some
roles/*/meta/argument_specs.yml; and that the stated types and defaults are
the argument specifications'."""

import glob
import os
import re
import shutil

import yaml
from conftest import REPO

GUIDE = os.path.join(REPO, "docs", "inventory.md")
HEADING = re.compile(r"^### `([a-z][a-z0-9_]*)`[ \t]*$", re.MULTILINE)
ANY_HEADING = re.compile(r"^#{1,3} ", re.MULTILINE)
TYPE_LINE = re.compile(r"^- \*\*Type:\*\* `([a-z]+)`", re.MULTILINE)
DEFAULT_LINE = re.compile(r"^- \*\*Default:\*\* (.+)$", re.MULTILINE)
# A commented-out assignment in the template: `# name: value`.
COMMENTED = re.compile(r"^#\s*([a-z][a-z0-9_]*):", re.MULTILINE)
VARS_EXTENSIONS = ("", ".yml", ".yaml", ".json")


class _TolerantLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    """SafeLoader that reads tagged values (!vault, !unsafe) as None: only
    the variables' names matter here."""


_TolerantLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _load(path):
    with open(path) as handle:
        return yaml.load(handle, Loader=_TolerantLoader)  # nosec: a SafeLoader


def _vars_files(group_vars):
    """The files Ansible reads for group `all`: group_vars/all itself, all.yml
    and the like, or every vars file under the directory group_vars/all."""
    files = []
    for extension in VARS_EXTENSIONS:
        path = os.path.join(group_vars, "all" + extension)
        if os.path.isfile(path):
            files.append(path)
    directory = os.path.join(group_vars, "all")
    if os.path.isdir(directory):
        for root, dirs, names in os.walk(directory):
            dirs[:] = sorted(name for name in dirs if not name.startswith("."))
            for name in sorted(names):
                if not name.startswith(".") and os.path.splitext(name)[1] in VARS_EXTENSIONS:
                    files.append(os.path.join(root, name))
    return files


def inventory_variables(inventories):
    """{variable: [files that set it]} over inventories/*/group_vars/all."""
    found = {}
    for inventory in sorted(glob.glob(os.path.join(inventories, "*", ""))):
        for path in _vars_files(os.path.join(inventory, "group_vars")):
            data = _load(path)
            assert data is None or isinstance(data, dict), "%s is not a mapping of variables" % path
            for name in data or {}:
                found.setdefault(name, []).append(os.path.relpath(path, inventories))
    return found


def template_commented_options(inventories, options):
    """The role options the template shows as comments (`# name: value`)."""
    names = set()
    for path in _vars_files(os.path.join(inventories, "template", "group_vars")):
        with open(path) as handle:
            names.update(COMMENTED.findall(handle.read()))
    return names & set(options)


def spec_options(roles):
    """{option: [its spec in each role entry point that has it]}."""
    options = {}
    for path in sorted(glob.glob(os.path.join(roles, "*", "meta", "argument_specs.yml"))):
        for entry in (_load(path) or {}).get("argument_specs", {}).values():
            for name, spec in (entry.get("options") or {}).items():
                options.setdefault(name, []).append(spec or {})
    return options


def guide_fields(text):
    """{field: its section of the guide}, from each `### `name`` heading to
    the next heading."""
    fields = {}
    for match in HEADING.finditer(text):
        name = match.group(1)
        assert name not in fields, "docs/inventory.md has two sections for %s" % name
        following = ANY_HEADING.search(text, match.end())
        fields[name] = text[match.end():following.start() if following else len(text)]
    return fields


def _same(stated, default):
    """Whether the guide's backticked value is the spec's default: as YAML, or
    as written for a templated default such as {{ cluster_gpus_per_node }}."""
    if isinstance(default, str) and "{{" in default:
        return stated == default
    try:
        value = yaml.safe_load(stated)
    except yaml.YAMLError:
        return False
    return value == default and isinstance(value, bool) == isinstance(default, bool) \
        and isinstance(value, str) == isinstance(default, str)


def section_problems(name, section, specs):
    """What the section of one field says wrongly about its type or default."""
    problems = []
    kinds = sorted(set(spec.get("type", "str") for spec in specs))
    required = any(spec.get("required") for spec in specs)
    defaults = [spec["default"] for spec in specs if "default" in spec]
    stated_type = TYPE_LINE.search(section)
    if not stated_type:
        problems.append("%s: no '- **Type:** `...`' line" % name)
    elif specs and [stated_type.group(1)] != kinds:
        problems.append("%s: type `%s` stated, the argument specifications say %s"
                        % (name, stated_type.group(1), ", ".join(kinds)))
    stated_default = DEFAULT_LINE.search(section)
    if not stated_default:
        problems.append("%s: no '- **Default:** ...' line" % name)
        return problems
    if not specs:
        return problems
    text = stated_default.group(1)
    if text.startswith("`"):
        stated = text[1:text.find("`", 1)]
        if required or not defaults:
            problems.append("%s: default `%s` stated, but the argument specifications give none%s"
                            % (name, stated, " (required)" if required else ""))
        problems.extend("%s: default `%s` stated, the argument specifications say %r" % (name, stated, default)
                        for default in defaults if not _same(stated, default))
    elif text.startswith("none, required"):
        if not required:
            problems.append("%s: stated as required, but the argument specifications do not require it" % name)
    elif text.startswith("unset"):
        if required or defaults:
            problems.append("%s: stated as unset, but the argument specifications say %s"
                            % (name, "required" if required else "default %r" % (defaults[0],)))
    else:
        problems.append("%s: the default must start with a value in backticks, 'none, required' or 'unset', got %r"
                        % (name, text))
    if required and not text.startswith("none, required"):
        problems.append("%s: required by the argument specifications; say 'none, required.'" % name)
    return problems


def guide_problems(text, inventories, roles):
    """Everything wrong with the guide `text` for these inventories and roles."""
    fields = guide_fields(text)
    options = spec_options(roles)
    set_somewhere = inventory_variables(inventories)
    problems = ["%s is set in %s but has no section (### `%s`)" % (name, ", ".join(files), name)
                for name, files in sorted(set_somewhere.items()) if name not in fields]
    problems.extend("%s is shown in inventories/template but has no section (### `%s`)" % (name, name)
                    for name in sorted(template_commented_options(inventories, options) - set(fields)))
    problems.extend("%s is documented but set in no inventory and an option of no role" % name
                    for name in sorted(set(fields) - set(set_somewhere) - set(options)))
    for name, section in sorted(fields.items()):
        problems.extend(section_problems(name, section, options.get(name, [])))
    return problems


def _guide():
    with open(GUIDE) as handle:
        return handle.read()


INVENTORIES = os.path.join(REPO, "inventories")
ROLES = os.path.join(REPO, "roles")


def test_the_guide_documents_every_inventory_field_and_nothing_stale():
    assert guide_problems(_guide(), INVENTORIES, ROLES) == []


def test_the_guide_reads_the_shipped_inventories():
    """The checker sees what the inventories set (so that an empty result
    above means something)."""
    found = inventory_variables(INVENTORIES)
    assert {"cluster_name", "sriov_ipam_ranges", "image_build", "verify_bench_max_size", "train_workload",
            "localcluster_nodes"} <= set(found)
    assert "inventories/template" not in " ".join(found["cluster_name"])  # paths are relative to inventories/
    assert {"image_base", "verify_bench_min_busbw", "soak_runs"} <= template_commented_options(
        INVENTORIES, spec_options(ROLES))
    assert len(guide_fields(_guide())) >= len(found)


def _inventory(tmp_path, name, files, shipped=True):
    """An inventories/ tree in tmp_path: a copy of the shipped inventories
    (unless shipped is false) plus inventory `name` with these group_vars."""
    if shipped:
        shutil.copytree(INVENTORIES, str(tmp_path / "inventories"))
    for relative, content in files.items():
        path = tmp_path / "inventories" / name / "group_vars" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return str(tmp_path / "inventories")


def test_a_variable_set_in_an_inventory_but_not_documented_is_flagged(tmp_path):
    inventories = _inventory(tmp_path, "made-up", {
        "all/cluster.yml": "cluster_name: made-up\nmlinfra_made_up_variable: 1\n"})
    problems = guide_problems(_guide(), inventories, ROLES)
    assert problems == ["mlinfra_made_up_variable is set in made-up/group_vars/all/cluster.yml but has no section "
                        "(### `mlinfra_made_up_variable`)"]


def test_group_vars_all_as_a_single_file_is_read_too(tmp_path):
    inventories = _inventory(tmp_path, "flat", {"all": "replicas: 2\nmlinfra_flat_variable: x\n",
                                                "all.yml": "mlinfra_other_variable: y\n"})
    found = inventory_variables(inventories)
    assert found["mlinfra_flat_variable"] == ["flat/group_vars/all"]
    assert found["mlinfra_other_variable"] == ["flat/group_vars/all.yml"]
    problems = guide_problems(_guide(), inventories, ROLES)
    assert [problem.split()[0] for problem in problems] == ["mlinfra_flat_variable", "mlinfra_other_variable"]


def test_a_stale_section_and_wrong_defaults_are_flagged(tmp_path):
    inventories = _inventory(tmp_path, "small", {"all/cluster.yml": "cluster_rdma_mtu: 9000\n"}, shipped=False)
    text = "\n".join([
        "## Fields",
        "### `cluster_rdma_mtu`", "- **Type:** `int`", "- **Default:** `1500`",
        "### `cluster_name`", "- **Type:** `str`", "- **Default:** `my-cluster`",
        "### `train_nproc_per_pod`", "- **Type:** `str`", "- **Default:** `{{ cluster_gpus_per_node }}`",
        "### `cluster_pod_cpu`", "- **Type:** `str`", "- **Default:** `32`",
        "### `mlinfra_no_such_option`", "- **Type:** `str`", "- **Default:** `x`",
        "## The end", ""])
    assert sorted(guide_problems(text, inventories, ROLES)) == [
        "cluster_name: default `my-cluster` stated, but the argument specifications give none (required)",
        "cluster_name: required by the argument specifications; say 'none, required.'",
        "cluster_pod_cpu: default `32` stated, the argument specifications say '32'",
        "cluster_rdma_mtu: default `1500` stated, the argument specifications say 9000",
        "mlinfra_no_such_option is documented but set in no inventory and an option of no role",
        "train_nproc_per_pod: type `str` stated, the argument specifications say int",
    ]

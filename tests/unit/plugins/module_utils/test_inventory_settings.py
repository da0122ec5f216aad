"""checked_settings: every variable converted as Ansible converts it, and
refused with its name, its value and the fix when it cannot be used. The
cases (tests/bad_settings.py) are what careless and hostile operators
typed; tests/integration/test_hostile_input.py runs them through the
playbooks on the local cluster."""

import glob
import os

import pytest
import yaml
from bad_settings import BAD, CONTRADICTIONS, GOOD
from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import SETTINGS, check_settings

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def refusal(**changes):
    checked = check_settings(dict(GOOD, **changes))
    assert len(checked["errors"]) == 1, checked["errors"]
    return checked["errors"][0]


def test_a_valid_deployment_converts_to_typed_values():
    checked = check_settings(dict(GOOD, cluster_host_network="no", verify_bench="True", cluster_rdma_mtu="9000",
                                  unrelated_variable="kept out"))
    assert checked["errors"] == []
    values = checked["values"]
    assert values["replicas"] == 2 and values["cluster_rdma_mtu"] == 9000
    assert values["cluster_host_network"] is False and values["verify_bench"] is True
    assert values["cluster_nccl_env_overrides"] == {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": None}
    assert "unrelated_variable" not in values


def test_a_null_default_is_left_for_the_role_to_decide():
    checked = check_settings(dict(GOOD, train_steps=None, train_compile=None, train_dataset=None))
    assert checked["errors"] == []
    assert checked["values"]["train_steps"] is None and checked["values"]["train_compile"] is None


@pytest.mark.parametrize("typed,meaning", [
    ("false", False), ("False", False), ("FALSE", False), ("no", False), ("off", False), ("0", False), ("No", False),
    (0, False), (False, False), ("true", True), ("Yes", True), ("on", True), ("1", True), (1, True), (True, True),
])
def test_booleans_as_people_type_them(typed, meaning):
    for name in [name for name, convert in SETTINGS.items() if convert.__name__ == "_bool"]:
        assert check_settings({name: typed})["values"][name] is meaning, name


def test_every_inventory_in_the_collection_passes(tmp_path):
    """The shipped inventories' group_vars (templated values left out) are
    valid as they are."""
    for directory in sorted(glob.glob(os.path.join(REPO, "inventories", "*", "group_vars", "all"))):
        variables = {}
        for path in sorted(glob.glob(os.path.join(directory, "*.yml"))):
            with open(path) as handle:
                variables.update(yaml.safe_load(handle) or {})
        variables = dict((name, value) for name, value in variables.items()
                         if not (isinstance(value, str) and "{{" in value))
        assert check_settings(variables)["errors"] == [], directory


def test_every_argument_spec_variable_has_a_conversion_of_its_type():
    kinds = {"bool": ("_bool",), "int": ("<lambda>",), "float": ("<lambda>", "_fraction")}
    for path in glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml")):
        with open(path) as handle:
            specs = yaml.safe_load(handle)["argument_specs"]
        for entry in specs.values():
            for name, option in entry.get("options", {}).items():
                assert name in SETTINGS, "%s (%s) has no conversion in inventory_settings.SETTINGS" % (name, path)
                expected = kinds.get(option.get("type"))
                if expected:
                    assert SETTINGS[name].__name__ in expected, name


@pytest.mark.parametrize("name,value,problem,fix", BAD, ids=["%s=%r" % (case[0], case[1])[:60] for case in BAD])
def test_a_bad_value_is_refused_naming_the_variable_the_value_and_the_fix(name, value, problem, fix):
    error = refusal(**{name: value})
    assert error["variable"] == name and error["value"] == value
    assert error["problem"].startswith(name + " ") and problem in error["problem"], error
    assert fix in error["fix"], error
    assert error["message"].startswith(error["problem"] + " (got ") and error["message"].endswith("; fix: " + error["fix"])


@pytest.mark.parametrize("changes,name,problem,fix", CONTRADICTIONS,
                         ids=[",".join(sorted(case[0])) + "-%d" % index for index, case in enumerate(CONTRADICTIONS)])
def test_settings_that_contradict_each_other_are_refused(changes, name, problem, fix):
    error = refusal(**changes)
    assert error["variable"] == name and error["problem"].startswith(name), error
    assert problem in error["problem"] and fix in error["fix"], error


def test_a_system_namespace_is_taken_when_allowed_and_tcp_without_nics_passes():
    assert check_settings(dict(GOOD, cluster_namespace="default", cluster_allow_system_namespace="yes"))["errors"] == []
    assert check_settings(dict(GOOD, cluster_network_mode="tcp", cluster_rdma_nics=[]))["errors"] == []
    assert check_settings(dict(GOOD, cluster_host_network=True, cluster_rdma_nics=[]))["errors"] == []


def test_ipam_ranges_take_a_range_or_an_ipam_configuration():
    ranges = {"eno5np0-network": "192.168.105.0/24", "eno6np0-network": {"type": "dhcp"}}
    assert check_settings(dict(GOOD, sriov_ipam_ranges=ranges))["errors"] == []
    error = refusal(sriov_ipam_ranges={"eno5np0-network": "192.168.105.0/24\nspec: {}"})
    assert error["variable"] == "sriov_ipam_ranges" and "holds a line break" in error["problem"]


def test_every_refusal_is_reported_at_once():
    checked = check_settings(dict(GOOD, replicas="x", cluster_rdma_mtu=1, cluster_namespace="Bad"))
    assert sorted(error["variable"] for error in checked["errors"]) == \
        ["cluster_namespace", "cluster_rdma_mtu", "replicas"]


def test_the_cases_cover_each_family_sixty_times_over():
    assert len(BAD) + len(CONTRADICTIONS) >= 60


def test_each_argument_spec_default_is_the_roles_own_default():
    # The argument specs document the defaults the checker fills in for the
    # settings a playbook's first check cannot see yet (collection_names).
    for path in glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml")):
        role = path.split(os.sep)[-3]
        with open(os.path.join(REPO, "roles", role, "defaults", "main.yml")) as handle:
            defaults = yaml.safe_load(handle) or {}
        with open(path) as handle:
            specs = yaml.safe_load(handle)["argument_specs"]
        for entry in specs.values():
            for name, option in entry.get("options", {}).items():
                if "default" in option and name in defaults and "{{" not in repr(defaults[name]):
                    assert option["default"] == defaults[name], (role, name)


def test_the_values_hold_the_roles_defaults_a_play_cannot_see_yet_converted():
    from ansible_collections.mlinfra.multinode.plugins.filter.checked_settings import collection_names
    collection = collection_names()
    # What a playbook's pre_tasks see: the inventory, not the statefulset role's defaults.
    variables = dict(GOOD, cluster_security_mode="privileged")
    variables.pop("statefulset_rendezvous_port", None)
    variables.pop("statefulset_require_verified_nodes", None)
    checked = check_settings(variables, collection=collection, names=list(variables))
    assert checked["errors"] == []
    assert checked["values"]["statefulset_rendezvous_port"] == 29500
    assert checked["values"]["statefulset_require_verified_nodes"] is False
    # A value the play sees wins over the role's default, and is converted.
    given = check_settings(dict(variables, statefulset_require_verified_nodes="true"), collection=collection,
                           names=list(variables) + ["statefulset_require_verified_nodes"])
    assert given["values"]["statefulset_require_verified_nodes"] is True


def test_a_default_the_play_cannot_see_contradicts_nothing():
    from ansible_collections.mlinfra.multinode.plugins.filter.checked_settings import collection_names
    collection = collection_names()
    # site.yml's first play: no soak runs, soak_workload's default is bench.
    variables = dict(GOOD, cluster_security_mode="privileged", verify_bench="false")
    checked = check_settings(variables, collection=collection, names=list(variables))
    assert checked["errors"] == [] and checked["values"]["soak_workload"] == "bench"
    # Set where the play sees it, the same pair is refused.
    seen = check_settings(dict(variables, soak_workload="bench"), collection=collection,
                          names=list(variables) + ["soak_workload"])
    assert [error["variable"] for error in seen["errors"]] == ["soak_workload"]

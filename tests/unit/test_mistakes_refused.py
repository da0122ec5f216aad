"""Mistakes a new user makes on the command line or in an inventory, run
through the real playbooks: each fails before the play contacts a cluster
(the settings check is every playbook's first task), in one line per
problem that names what was typed and the nearest known name; none ends
green. No cluster is needed: nothing gets that far."""

import shutil
import subprocess

import yaml
from ansible_cli import ansible_env, playbook_command, run_playbook
from conftest import REPO

REFUSAL = "setting(s) refused: "


def refusal(run):
    """The one failure message of a refused run."""
    assert run.failed
    (message,) = run.failure_messages()
    assert REFUSAL in message, message
    return message


def test_names_the_collection_does_not_know_are_refused_with_the_nearest_one():
    typos = {"verify_bench_pairwse": True, "replica": 4, "cluster_pod_memroy": "1Gi", "purge_workspace": True,
             "train_env_x": 1}
    run = run_playbook("status.yml", "local", typos)
    message = refusal(run)
    assert message.startswith("5 setting(s) refused: "), message
    for typed, nearest in (("verify_bench_pairwse", "verify_bench_pairwise"), ("replica", "replicas"),
                           ("cluster_pod_memroy", "cluster_pod_memory"), ("purge_workspace", "purge_workspaces")):
        assert "%s (given with -e) is not a variable of mlinfra.multinode; did you mean %s?" % (typed, nearest) \
            in message, typed
    assert "train_env_x (given with -e) is not a variable of mlinfra.multinode; fix: correct the name" in message
    # The play stopped at its first task: nothing read from any cluster.
    assert run.tasks_run()[-1] == "Refuse settings that cannot be used, before anything changes"
    # Unless asked to pass them over.
    allowed = run_playbook("render.yml", "local", {"verify_bench_pairwse": True,
                                                   "cluster_allow_unknown_settings": True}, tags="never")
    assert not allowed.failed, allowed.failure_messages()


def test_a_misspelt_required_variable_in_the_inventory_is_named_without_an_argument_dump(tmp_path):
    inventory = tmp_path / "local"
    shutil.copytree(REPO + "/inventories/local", str(inventory))
    cluster = inventory / "group_vars" / "all" / "cluster.yml"
    values = yaml.safe_load(cluster.read_text())
    values["cluster_gpu_per_node"] = values.pop("cluster_gpus_per_node")
    cluster.write_text(yaml.safe_dump(values))
    run = run_playbook("status.yml", str(inventory))
    message = refusal(run)
    assert message == (
        "2 setting(s) refused: cluster_gpu_per_node (set in the inventory or the play) is not a variable of "
        "mlinfra.multinode; did you mean cluster_gpus_per_node?; fix: write cluster_gpus_per_node (docs/inventory.md "
        "lists every one), or set cluster_allow_unknown_settings=true to pass names the collection does not know; "
        "cluster_gpus_per_node is not set; fix: set it in the inventory's group_vars (docs/inventory.md, "
        "### cluster_gpus_per_node)"), message
    assert "argument_spec" not in run.stdout + run.stderr


def test_a_value_is_refused_under_the_name_typed():
    message = refusal(run_playbook("train.yml", "local", {"stop": "maybe"}))
    assert message == "1 setting(s) refused: stop is not a boolean (got 'maybe'); fix: give true or false (yes/no, " \
                      "on/off and 1/0 are read the same)", message


def test_scale_without_a_count_is_refused_before_anything_changes():
    run = run_playbook("scale.yml", "local")
    assert run.failed
    (message,) = run.failure_messages()
    assert message.startswith("scale.yml needs the count to scale to: -e replicas=N (0 to 6; the inventory's "
                              "replicas=2 is what deploy.yml deploys); nothing was changed"), message
    assert run.tasks_run()[-1] == "Require the count to scale to"


def test_a_misspelt_inventory_fails_naming_it():
    # ansible.cfg's host_pattern_mismatch: no play starts, so there is no
    # JSON document of one; what the user reads is on stderr.
    proc = subprocess.run(playbook_command("status.yml", "lcoal"), cwd=REPO, env=ansible_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode != 0
    assert "Unable to parse %s/inventories/lcoal as an inventory source" % REPO in proc.stderr
    assert "[ERROR]: Could not match supplied host pattern, ignoring: controller" in proc.stderr

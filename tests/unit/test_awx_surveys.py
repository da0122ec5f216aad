"""The AWX job templates' surveys (files/awx/surveys/*.json, made into
templates by playbooks/awx.yml): each is a survey specification AWX accepts,
and every variable it offers is one the argument specifications of the
playbook it launches accept, with a type and choices they take.

No AWX runs here: its rules for a survey specification are written down
below (survey_problems) from its API's documented validation; the
controls at the end show that they reject what AWX rejects."""

import copy
import glob
import json
import os

import pytest
import yaml
from conftest import REPO

SURVEYS = os.path.join(REPO, "files", "awx", "surveys")
PLAYBOOKS = os.path.join(REPO, "playbooks")
# AWX's question types and the JSON type of their answers (and defaults).
ANSWER_TYPES = {"text": str, "textarea": str, "password": str, "multiplechoice": str, "multiselect": (str, list),
                "integer": int, "float": (float, int)}
BOOL_CHOICES = {"true", "false"}


def survey_problems(document):
    """What AWX's API would refuse in a survey specification."""
    problems = []
    for key in ("name", "description"):
        if not isinstance(document.get(key), str):
            problems.append("'%s' missing or not a string" % key)
    spec = document.get("spec")
    if not isinstance(spec, list) or not spec:
        return problems + ["'spec' must be a non-empty list"]
    seen = set()
    for index, item in enumerate(spec):
        if not isinstance(item, dict):
            problems.append("question %d is not an object" % index)
            continue
        for key, kind in (("type", str), ("question_name", str), ("variable", str), ("required", bool)):
            if not isinstance(item.get(key), kind):
                problems.append("question %d: '%s' missing or not a %s" % (index, key, kind.__name__))
        if item.get("variable") in seen:
            problems.append("question %d: variable %r duplicated" % (index, item.get("variable")))
        seen.add(item.get("variable"))
        qtype = item.get("type")
        if qtype not in ANSWER_TYPES:
            problems.append("question %d: type %r is not one of %s" % (index, qtype, sorted(ANSWER_TYPES)))
            continue
        default = item.get("default", "")
        if default != "" and (not isinstance(default, ANSWER_TYPES[qtype]) or isinstance(default, bool)):
            problems.append("question %d: default %r is not a %s answer" % (index, default, qtype))
        for key in ("min", "max"):
            if item.get(key) is not None and (not isinstance(item[key], int) or isinstance(item[key], bool)):
                problems.append("question %d: %s must be an integer" % (index, key))
        if qtype in ("multiplechoice", "multiselect"):
            choices = item.get("choices")
            if isinstance(choices, str):
                choices = [line for line in choices.splitlines() if line.strip()]
            if not choices:
                problems.append("question %d: %s needs choices" % (index, qtype))
                continue
            defaults = default.splitlines() if isinstance(default, str) else list(default)
            if qtype == "multiplechoice" and len(defaults) > 1:
                problems.append("question %d: one default only" % index)
            if any(value not in choices for value in defaults):
                problems.append("question %d: default %r is not among the choices" % (index, default))
        # What AWX enforces on the answers, applied to the default.
        if qtype in ("integer", "float") and default != "" and isinstance(default, (int, float)):
            if item.get("min") is not None and default < item["min"] or \
                    item.get("max") is not None and default > item["max"]:
                problems.append("question %d: default %r outside min/max" % (index, default))
        if qtype in ("text", "textarea") and isinstance(default, str) and default and item.get("max") is not None \
                and len(default) > item["max"]:
            problems.append("question %d: default longer than max" % index)
    return problems


def load(path):
    with open(path) as handle:
        return json.load(handle)


def survey_files():
    return sorted(glob.glob(os.path.join(SURVEYS, "*.json")))


def awx_play():
    with open(os.path.join(PLAYBOOKS, "awx.yml")) as handle:
        return yaml.safe_load(handle)[0]


def role_options(name, seen=None):
    """The options of a role's main entry point and of its dependencies."""
    seen = set() if seen is None else seen
    short = name.split(".")[-1]
    if short in seen:
        return {}
    seen.add(short)
    role = os.path.join(REPO, "roles", short)
    with open(os.path.join(role, "meta", "argument_specs.yml")) as handle:
        options = dict(yaml.safe_load(handle)["argument_specs"]["main"].get("options") or {})
    with open(os.path.join(role, "meta", "main.yml")) as handle:
        for dependency in yaml.safe_load(handle).get("dependencies") or []:
            options.update(role_options(dependency["role"] if isinstance(dependency, dict) else dependency, seen))
    return options


def tasks_of(play):
    for section in ("pre_tasks", "tasks", "post_tasks"):
        stack = list(play.get(section) or [])
        while stack:
            task = stack.pop()
            for key in ("block", "rescue", "always"):
                stack.extend(task.get(key) or [])
            yield task


def playbook_options(name):
    """Every variable the argument specifications reached from a playbook
    accept: its roles' (with their dependencies'), the roles it includes,
    its validate_argument_spec tasks', and those of the playbooks it imports."""
    with open(os.path.join(PLAYBOOKS, name + ".yml")) as handle:
        plays = yaml.safe_load(handle)
    options = {}
    for play in plays:
        if "ansible.builtin.import_playbook" in play:
            options.update(playbook_options(play["ansible.builtin.import_playbook"][:-len(".yml")]))
            continue
        for role in play.get("roles") or []:
            options.update(role_options(role["role"] if isinstance(role, dict) else role))
        for task in tasks_of(play):
            for key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
                if key in task and task[key].get("tasks_from", "main") == "main":
                    options.update(role_options(task[key]["name"]))
            if "ansible.builtin.validate_argument_spec" in task:
                options.update(task["ansible.builtin.validate_argument_spec"]["argument_spec"])
    return options


def test_every_survey_is_one_awx_accepts():
    files = survey_files()
    assert files, "no survey files in %s" % SURVEYS
    for path in files:
        assert survey_problems(load(path)) == [], path


def test_every_offered_variable_is_accepted_by_the_playbooks_argument_specs():
    for path in survey_files():
        playbook = os.path.basename(path)[:-len(".json")]
        options = playbook_options(playbook)
        for item in load(path)["spec"]:
            variable = item["variable"]
            assert variable in options, "%s offers %s, which playbooks/%s.yml does not take" % (
                os.path.basename(path), variable, playbook)
            spec = options[variable]
            kind = spec.get("type", "str")
            if item["type"] == "integer":
                assert kind == "int", (path, variable, kind)
            elif item["type"] == "float":
                assert kind == "float", (path, variable, kind)
            elif item["type"] == "multiplechoice":
                if kind == "bool":
                    assert set(item["choices"]) == BOOL_CHOICES, (path, variable)
                else:
                    assert kind == "str", (path, variable, kind)
                    if spec.get("choices"):
                        assert set(item["choices"]) <= set(spec["choices"]), (path, variable)
            else:
                assert kind == "str", (path, variable, kind)


def test_the_templates_cover_the_operator_playbooks_and_offer_only_what_the_surveys_say():
    play = awx_play()
    templates = play["vars"]["awx_job_templates"]
    assert sorted(templates) == sorted(["deploy", "verify-rdma", "scale", "train", "soak", "status", "teardown"])
    surveyed = sorted(os.path.basename(path)[:-len(".json")] for path in survey_files())
    # status changes nothing: it has no survey; every other template has one.
    assert surveyed == sorted(set(templates) - {"status"})
    for name in templates:
        assert os.path.isfile(os.path.join(PLAYBOOKS, name + ".yml")), name
    tasks = {task["name"]: task for task in tasks_of(play)}
    template = tasks["Make a job template per playbook, with its survey"]["awx.awx.job_template"]
    # Nothing but the inventory (the cluster) and the credential is asked at
    # launch besides the survey: no free-form extra variables.
    asked = sorted(key for key, value in template.items() if key.startswith("ask_") and value is True)
    assert asked == ["ask_credential_on_launch", "ask_inventory_on_launch"]
    assert "ask_variables_on_launch" not in template


def test_replicas_range_is_the_clusters_node_count():
    counts = []
    for cluster in awx_play()["vars"]["awx_clusters"]:
        with open(os.path.join(REPO, "inventories", cluster, "group_vars", "all", "cluster.yml")) as handle:
            counts.append(len(yaml.safe_load(handle)["cluster_gpu_nodes"]))
    for path in survey_files():
        for item in load(path)["spec"]:
            if item["variable"] == "replicas":
                assert item["max"] == max(counts), path
                assert item["min"] == (1 if path.endswith("train.json") else 0), path


def test_the_workflow_stops_at_a_failed_verification():
    tasks = {task["name"]: task for task in tasks_of(awx_play())}
    task = tasks["Make the workflow deploy, verify-rdma, train of each cluster"]
    workflow = task["awx.awx.workflow_job_template"]
    # One per cluster, on its inventory: a workflow cannot ask for the
    # credential at launch, so it cannot ask for the cluster either.
    assert task["loop"] == "{{ awx_clusters }}"
    assert workflow["inventory"] == "{{ item }}" and workflow["ask_inventory_on_launch"] is False
    assert workflow["name"].endswith("({{ item }})")
    nodes = workflow["workflow_nodes"]
    by_id = {node["identifier"]: node for node in nodes}
    assert [node["identifier"] for node in nodes] == ["deploy", "verify-rdma", "train"]
    assert [n["identifier"] for n in by_id["deploy"]["related"]["success_nodes"]] == ["verify-rdma"]
    assert [n["identifier"] for n in by_id["verify-rdma"]["related"]["success_nodes"]] == ["train"]
    for node in nodes:
        # Nothing runs after a failure: no failure or always branches.
        assert node["related"]["failure_nodes"] == [] and node["related"]["always_nodes"] == []
        # Every step gets the cluster's credential (its K8S_AUTH_*).
        assert node["related"]["credentials"] == "{{ credentials }}", node["identifier"]
    assert task["vars"]["credentials"] == [
        {"name": "{{ cluster_credentials[item] }}", "organization": {"name": "{{ awx_organization }}"}}]


def test_the_cluster_credentials_are_checked_before_anything_is_made():
    tasks = list(awx_play()["tasks"])
    names = [task["name"] for task in tasks]
    first_write = min(index for index, task in enumerate(tasks) if any(key.startswith("awx.awx.") for key in task))
    assert names.index("Look up the cluster credentials in AWX") < first_write
    assert names.index("Check that every cluster has its credential in AWX") < first_write
    lookup = tasks[names.index("Look up the cluster credentials in AWX")]
    assert "query('awx.awx.controller_api', 'credentials'" in lookup["ansible.builtin.set_fact"]["awx_credential_check"]
    # The settings default every cluster's credential to "<cluster> cluster token".
    vars_ = awx_play()["vars"]
    assert vars_["awx_cluster_credentials"] == {}
    spec = tasks[names.index("Check the settings")]["ansible.builtin.validate_argument_spec"]["argument_spec"]
    assert spec["awx_cluster_credentials"] == {"type": "dict", "required": True}


def test_tokens_are_only_handled_with_no_log():
    for task in tasks_of(awx_play()):
        text = json.dumps(task)
        if "token" in text.lower() and "awx.awx.credential_type" in task:
            assert task.get("no_log") is True, task["name"]


GOOD = {"name": "s", "description": "d", "spec": [
    {"type": "integer", "question_name": "n", "variable": "replicas", "required": True, "default": 2, "min": 0,
     "max": 6}]}


@pytest.mark.parametrize("change, problem", [
    (lambda spec: spec["spec"].append(copy.deepcopy(spec["spec"][0])), "duplicated"),
    (lambda spec: spec["spec"][0].update(type="number"), "is not one of"),
    (lambda spec: spec["spec"][0].update(default="2"), "is not a integer answer"),
    (lambda spec: spec["spec"][0].update(default=7), "outside min/max"),
    (lambda spec: spec["spec"][0].update(min=0.5), "min must be an integer"),
    (lambda spec: spec["spec"][0].pop("required"), "'required' missing"),
    (lambda spec: spec["spec"][0].update(type="multiplechoice", choices=["a", "b"], default="c"),
     "not among the choices"),
    (lambda spec: spec["spec"][0].update(type="multiplechoice", choices=[], default=""), "needs choices"),
    (lambda spec: spec.update(spec=[]), "non-empty list"),
    (lambda spec: spec.pop("description"), "'description' missing"),
])
def test_the_rules_reject_what_awx_rejects(change, problem):
    assert survey_problems(GOOD) == []
    bad = copy.deepcopy(GOOD)
    change(bad)
    assert any(problem in found for found in survey_problems(bad)), survey_problems(bad)

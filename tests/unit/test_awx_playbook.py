"""playbooks/awx.yml run for real (ansible-playbook, the awx.awx modules)
against a FAKE of the AWX REST API (awx_api_fake.py: an HTTP server on
127.0.0.1 that stores what it is sent and answers it back; it does not
validate like AWX does). What is checked is what the playbook asks AWX to
make: the objects and their fields, the surveys as in files/awx/surveys, the
workflow of each cluster with its inventory and its credential on every
step; that it changes nothing while a cluster's credential is not usable;
that the controller's token stays out of the output; and that a second run,
which finds everything made, changes nothing.

What AWX itself would refuse or do with these objects (launching jobs,
cloning the project) is not tested here: no AWX runs in the tests.
The playbook takes no cluster token and makes no credential (operators store
the tokens in credentials in AWX, see docs/operators.md; here the test puts
them into the fake, as an operator would); the secret it handles is the
controller's token, which the modules send in every request."""

import glob
import json
import os
import sys
import types
import uuid

import pytest
import yaml
from ansible_cli import run_playbook
from awx_api_fake import AwxApiFake
from conftest import REPO

SURVEYS = os.path.join(REPO, "files", "awx", "surveys")
PROJECT_URL = "https://git.example.com/mlinfra/multinode.git"
PREFIX = "mlinfra.multinode"
CREDENTIAL_TYPE = "Kubernetes cluster token (%s)" % PREFIX
TEMPLATES = ["deploy", "verify-rdma", "scale", "train", "soak", "status", "teardown"]
# Inventory directories that are not clusters operators run on from AWX.
NOT_IN_AWX = {
    "local": "the local test cluster of tools/localcluster",
    "template": "the starting point for a new cluster's inventory",
}
# The credential of each cluster in the runs that succeed: barcelona's by the
# default name, moc's and oke's named by awx_cluster_credentials.
NAMED = {"moc": "moc service account", "oke": "oke service account"}
CREDENTIALS = dict({"barcelona": "barcelona cluster token"}, **NAMED)
# Distinct per test run, so finding it in the output is no coincidence.
TOKEN = "awx-token-%s" % uuid.uuid4().hex


def make_credential(fake, name, kind, organization):
    """A credential as an operator makes it in AWX (not through the API's
    log: the playbook's requests stay apart)."""
    return fake.create("credentials", {"name": name, "organization": organization, "credential_type": kind,
                                       "inputs": {"host": "https://api.example.com:6443", "token": "$encrypted$"}})


@pytest.fixture(scope="module")
def awx(tmp_path_factory):
    """The fake after awx.yml was run against it as on a fresh AWX (.fake),
    the runs by name (.runs) and each run's requests as a slice of the fake's
    log (.spans). The runs, in order:

    settings   awx_cluster_credentials naming an unknown cluster and an empty
               name: stopped by the settings check;
    fresh      nothing in AWX (no credential type, no credentials): fails;
    bootstrap  --tags credential_type: the credential type alone;
    partial    after credentials were made, not all usable (barcelona's
               missing, moc's of another type, oke's name given twice in the
               organization): fails;
    first, second
               every credential there (barcelona's by its default name, in
               its organization beside one of that name in another; moc's and
               oke's named by awx_cluster_credentials)."""
    fake = AwxApiFake(TOKEN).start()
    inventory = tmp_path_factory.mktemp("awx") / "hosts.yml"
    # The play targets localhost only; the modules run with this interpreter
    # (of this ansible-core) rather than one discovered on the machine.
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: %s\n" % json.dumps(sys.executable))
    runs, spans = {}, {}
    try:
        with pytest.MonkeyPatch.context() as patch:
            # Nothing from the calling shell may point the modules at a real
            # AWX or send the requests through a proxy.
            for name in list(os.environ):
                if name.lower().endswith("_proxy") or name.startswith(("CONTROLLER_", "TOWER_")):
                    patch.delenv(name)
            patch.setenv("NO_PROXY", "127.0.0.1")
            patch.setenv("CONTROLLER_HOST", fake.url)
            patch.setenv("CONTROLLER_OAUTH_TOKEN", TOKEN)

            def play(name, tags=None, **settings):
                start = len(fake.requests)
                # An absolute inventory path: run_playbook joins it to
                # inventories/, which leaves an absolute path as it is.
                runs[name] = run_playbook("awx.yml", str(inventory), dict(settings, awx_project_url=PROJECT_URL),
                                          tags=tags, timeout=300)
                spans[name] = (start, len(fake.requests))

            org = fake.named("organizations", "Default")["id"]
            play("settings", awx_cluster_credentials={"nowhere": "a token", "moc": " "})
            play("fresh")
            play("bootstrap", tags="credential_type")
            kind = fake.named("credential_types", CREDENTIAL_TYPE)["id"] if not runs["bootstrap"].failed else None
            other = fake.create("credential_types", {"name": "OpenShift or Kubernetes API Bearer Token",
                                                     "kind": "kubernetes"})["id"]
            make_credential(fake, "moc cluster token", other, org)
            make_credential(fake, "oke cluster token", kind, org)
            make_credential(fake, "oke cluster token", other, org)
            play("partial")
            elsewhere = fake.create("organizations", {"name": "Elsewhere", "description": ""})["id"]
            make_credential(fake, "barcelona cluster token", kind, elsewhere)
            for name in CREDENTIALS.values():
                make_credential(fake, name, kind, org)
            play("first", awx_cluster_credentials=NAMED)
            play("second", awx_cluster_credentials=NAMED)
        yield types.SimpleNamespace(fake=fake, runs=runs, spans=spans)
    finally:
        fake.stop()


def first_run_ok(awx):
    run = awx.runs["first"]
    assert not run.failed, (run.failure_messages(), run.stderr[-3000:], awx.fake.unhandled)
    return awx.fake


def requests_of(awx, name):
    start, end = awx.spans[name]
    return awx.fake.requests[start:end]


def writes_of(awx, name):
    return awx.fake.writes(*awx.spans[name])


def failure_of(awx, name, task):
    """The one failure message of a run that must have failed at `task`."""
    run = awx.runs[name]
    assert run.failed, (name, run.stats)
    failed = [entry["task"]["name"] for play in run.document["plays"] for entry in play["tasks"]
              if entry["hosts"].get("localhost", {}).get("failed")]
    assert failed == [task], (failed, run.stderr[-3000:])
    (message,) = run.failure_messages()
    return message


def changed_tasks(run):
    return [task["task"]["name"] for play in run.document["plays"]
            for task in play["tasks"] if task["hosts"]["localhost"].get("changed")]


def default_org(fake):
    return fake.named("organizations", "Default")["id"]


def clusters():
    root = os.path.join(REPO, "inventories")
    return sorted(name for name in os.listdir(root)
                  if os.path.isdir(os.path.join(root, name)) and name not in NOT_IN_AWX)


def awx_tasks():
    """The play's tasks that talk to AWX through a module: each makes
    something on a first run."""
    with open(os.path.join(REPO, "playbooks", "awx.yml")) as handle:
        tasks = yaml.safe_load(handle)[0]["tasks"]
    return [task["name"] for task in tasks if any(key.startswith("awx.awx.") for key in task)]


def credential_of(fake, cluster):
    """The credential the test made for a cluster: its name, in Default, of
    the cluster token type."""
    kind = fake.named("credential_types", CREDENTIAL_TYPE)["id"]
    (found,) = [item for item in fake.objects["credentials"].values()
                if item["name"] == CREDENTIALS[cluster] and item["organization"] == default_org(fake)
                and item["credential_type"] == kind]
    return found


def test_settings_naming_unknown_clusters_or_no_credential_stop_before_any_request(awx):
    message = failure_of(awx, "settings", "Check the project, the clusters and the playbooks named")
    assert "awx_cluster_credentials names clusters not in awx_clusters: nowhere" in message
    assert "awx_cluster_credentials gives no credential name (a non-empty string) for: moc" in message
    assert requests_of(awx, "settings") == []


def test_a_fresh_awx_is_left_unchanged_with_the_way_to_make_the_credentials(awx):
    message = failure_of(awx, "fresh", "Check that every cluster has its credential in AWX")
    assert message.startswith("Nothing was changed in AWX")
    for cluster in clusters():
        assert '%s: "%s cluster token" does not exist' % (cluster, cluster) in message
    # How to get there: the credential type first, alone; then the
    # credentials, of that type, in that organization.
    assert 'The credential type "%s" does not exist in AWX yet' % CREDENTIAL_TYPE in message
    assert "ansible-playbook playbooks/awx.yml --tags credential_type" in message
    assert 'in the organization "Default", of the credential type "%s"' % CREDENTIAL_TYPE in message
    assert "awx_cluster_credentials" in message and "docs/operators.md" in message
    assert requests_of(awx, "fresh") and writes_of(awx, "fresh") == []


def test_the_credential_type_tag_makes_the_credential_type_alone(awx):
    run = awx.runs["bootstrap"]
    assert not run.failed, (run.failure_messages(), run.stderr[-3000:])
    assert changed_tasks(run) == ["Make the credential type for cluster tokens"]
    assert [(request["method"], request["path"]) for request in writes_of(awx, "bootstrap")] == [
        ("POST", "/api/v2/credential_types/")]


def test_credentials_missing_of_another_type_or_ambiguous_stop_the_playbook_before_any_write(awx):
    message = failure_of(awx, "partial", "Check that every cluster has its credential in AWX")
    assert message.startswith("Nothing was changed in AWX")
    assert 'barcelona: "barcelona cluster token" does not exist' in message
    assert ('moc: "moc cluster token" is a credential of another type, not of "%s"' % CREDENTIAL_TYPE) in message
    assert 'oke: "oke cluster token" names 2 credentials in the organization' in message
    # The credential type exists by now: no word of making it first.
    assert "--tags credential_type" not in message
    # Each credential was looked up by its name in the organization, and
    # nothing was written: no POST, PATCH, PUT or DELETE.
    lookups = [request["query"] for request in requests_of(awx, "partial")
               if request["method"] == "GET" and request["path"] == "/api/v2/credentials/"]
    assert sorted(query["name"] for query in lookups) == [["%s cluster token" % name] for name in clusters()]
    assert all(query["organization"] == [str(default_org(awx.fake))] for query in lookups)
    assert writes_of(awx, "partial") == []


def test_the_first_run_makes_everything_and_the_second_changes_nothing(awx):
    fake = first_run_ok(awx)
    first, second = awx.runs["first"], awx.runs["second"]
    assert len(awx_tasks()) == 7
    # All but the credential type, which the run with its tag made.
    assert changed_tasks(first) == [name for name in awx_tasks()
                                    if name != "Make the credential type for cluster tokens"]
    assert not second.failed, (second.failure_messages(), second.stderr[-3000:])
    assert second.changed == 0, changed_tasks(second)
    # Not only reported: the second run wrote nothing at all (no object made
    # again, no node deleted and re-made, no association posted again).
    assert requests_of(awx, "second") and writes_of(awx, "second") == []
    assert fake.writes(awx.spans["second"][0]) == []


def test_the_playbook_makes_and_changes_no_credential(awx):
    first_run_ok(awx)
    for name in awx.runs:
        assert [request for request in writes_of(awx, name)
                if request["path"].startswith("/api/v2/credentials/")] == [], name
    # Only those the test made as an operator would.
    assert len(awx.fake.objects["credentials"]) == 3 + 1 + len(CREDENTIALS)


def test_every_request_carries_the_token_and_is_one_the_fake_serves(awx):
    fake = first_run_ok(awx)
    assert fake.requests
    assert {request["authorization"] for request in fake.requests} == {"Bearer %s" % TOKEN}
    assert fake.unhandled == []


def test_the_token_never_appears_in_the_output(awx):
    for name, run in awx.runs.items():
        assert TOKEN not in json.dumps(run.document) and TOKEN not in run.stderr, name
    # The credential type task is no_log: its result is censored.
    for name in ("bootstrap", "first", "second"):
        result = awx.runs[name].results("Make the credential type")[0]
        assert "censored" in result and "injectors" not in json.dumps(result), (name, result)
    # The credentials' lookup keeps their names and ids, not their inputs.
    for name in ("partial", "first"):
        (result,) = awx.runs[name].results("Look up the cluster credentials")
        assert "inputs" not in json.dumps(result) and "api.example.com" not in json.dumps(result), result


def test_execution_environment_and_project(awx):
    fake = first_run_ok(awx)
    ee = fake.named("execution_environments", PREFIX)
    assert (ee["image"], ee["pull"], ee["organization"]) == (
        "quay.io/mlinfra/multinode-ee:0.1.0", "missing", default_org(fake))
    project = fake.named("projects", PREFIX)
    assert {key: project[key] for key in ("scm_type", "scm_url", "scm_branch", "scm_update_on_launch",
                                          "default_environment", "organization")} == {
        "scm_type": "git", "scm_url": PROJECT_URL, "scm_branch": "main", "scm_update_on_launch": True,
        "default_environment": ee["id"], "organization": default_org(fake)}


def test_the_credential_type_injects_the_cluster_address_and_token(awx):
    fake = first_run_ok(awx)
    kind = fake.named("credential_types", "Kubernetes cluster token (%s)" % PREFIX)
    assert kind["kind"] == "cloud"
    fields = {field["id"]: field for field in kind["inputs"]["fields"]}
    assert fields["token"].get("secret") is True
    assert fields["host"].get("secret", False) is False
    assert set(kind["inputs"]["required"]) == {"host", "token"}
    env = kind["injectors"]["env"]
    # AWX renders these templates with the credential's inputs at launch:
    # they must arrive as templates, not rendered (empty) by Ansible.
    assert env["K8S_AUTH_HOST"] == "{{ host }}"
    assert env["K8S_AUTH_API_KEY"] == "{{ token }}"
    assert env["K8S_AUTH_VERIFY_SSL"] == "{{ verify_ssl }}"
    assert set(kind["injectors"]) == {"env"}


def test_one_inventory_per_cluster_directory_sourced_from_the_project(awx):
    fake = first_run_ok(awx)
    project = fake.named("projects", PREFIX)
    inventories = sorted(item["name"] for item in fake.objects["inventories"].values())
    assert inventories == clusters()
    sources = list(fake.objects["inventory_sources"].values())
    assert len(sources) == len(inventories)
    for name in inventories:
        inventory = fake.named("inventories", name)
        assert inventory["organization"] == default_org(fake)
        (source,) = [item for item in sources if item["inventory"] == inventory["id"]]
        assert {key: source[key] for key in ("source", "source_project", "source_path", "update_on_launch",
                                             "overwrite", "overwrite_vars")} == {
            "source": "scm", "source_project": project["id"], "source_path": "inventories/%s/hosts.yml" % name,
            "update_on_launch": True, "overwrite": True, "overwrite_vars": True}
        assert os.path.isfile(os.path.join(REPO, source["source_path"]))


def test_a_job_template_per_playbook_with_its_survey(awx):
    fake = first_run_ok(awx)
    project = fake.named("projects", PREFIX)
    ee = fake.named("execution_environments", PREFIX)
    cluster_ids = {fake.named("inventories", name)["id"] for name in clusters()}
    assert sorted(item["name"] for item in fake.objects["job_templates"].values()) == sorted(
        "%s: %s" % (PREFIX, name) for name in TEMPLATES)
    surveyed = {os.path.basename(path)[:-len(".json")]: path for path in glob.glob(os.path.join(SURVEYS, "*.json"))}
    assert surveyed and set(surveyed) < set(TEMPLATES)
    for name in TEMPLATES:
        template = fake.named("job_templates", "%s: %s" % (PREFIX, name))
        assert template["playbook"] == "playbooks/%s.yml" % name
        assert os.path.isfile(os.path.join(REPO, template["playbook"]))
        assert (template["project"], template["execution_environment"], template["organization"]) == (
            project["id"], ee["id"], default_org(fake))
        assert template["inventory"] in cluster_ids
        # The cluster (inventory) and its credential are chosen at launch,
        # everything else only through the survey.
        asked = sorted(key for key, value in template.items() if key.startswith("ask_") and value)
        assert asked == ["ask_credential_on_launch", "ask_inventory_on_launch"], name
        assert fake.associated("job_templates", template, "credentials") == [], name
        assert template["survey_enabled"] is (name in surveyed), name
        if name in surveyed:
            with open(surveyed[name]) as handle:
                assert fake.surveys[("job_templates", template["id"])] == json.load(handle), name
        else:
            assert ("job_templates", template["id"]) not in fake.surveys, name


def workflow_nodes(fake, workflow):
    return {node["identifier"]: node for node in fake.objects["workflow_job_template_nodes"].values()
            if node["workflow_job_template"] == workflow["id"]}


def test_one_workflow_per_cluster_on_its_inventory_with_its_credential_on_every_step(awx):
    fake = first_run_ok(awx)
    # No workflow that asks for the cluster at launch: its jobs would get no
    # credential (a workflow cannot ask for one).
    assert sorted(item["name"] for item in fake.objects["workflow_job_templates"].values()) == [
        "%s: deploy, verify, train (%s)" % (PREFIX, cluster) for cluster in clusters()]
    for cluster in clusters():
        workflow = fake.named("workflow_job_templates", "%s: deploy, verify, train (%s)" % (PREFIX, cluster))
        assert workflow["organization"] == default_org(fake)
        assert workflow["inventory"] == fake.named("inventories", cluster)["id"]
        assert workflow["ask_inventory_on_launch"] is False
        assert [key for key, value in workflow.items() if key.startswith("ask_") and value] == [], cluster
        nodes = workflow_nodes(fake, workflow)
        assert sorted(nodes) == ["deploy", "train", "verify-rdma"], cluster
        credential = credential_of(fake, cluster)
        for identifier, node in nodes.items():
            # The job template asks for a credential at launch; the node
            # answers with the cluster's: its K8S_AUTH_* reach the job.
            assert fake.associated("workflow_job_template_nodes", node, "credentials") == [credential["id"]], (
                cluster, identifier)
            template = fake.named("job_templates", "%s: %s" % (PREFIX, identifier))
            assert node["unified_job_template"] == template["id"]
            assert template["ask_credential_on_launch"] is True


def test_each_workflow_runs_each_step_only_after_the_one_before_succeeded(awx):
    fake = first_run_ok(awx)
    for cluster in clusters():
        workflow = fake.named("workflow_job_templates", "%s: deploy, verify, train (%s)" % (PREFIX, cluster))
        nodes = workflow_nodes(fake, workflow)
        by_id = {node["id"]: identifier for identifier, node in nodes.items()}

        def edges(kind):
            return {identifier: [by_id[target]
                                 for target in fake.associated("workflow_job_template_nodes", node, kind)]
                    for identifier, node in nodes.items()}

        assert edges("success_nodes") == {"deploy": ["verify-rdma"], "verify-rdma": ["train"], "train": []}, cluster
        # Nothing runs after a failure: no failure or always edges, neither
        # stored nor ever asked for.
        assert edges("failure_nodes") == edges("always_nodes") == {"deploy": [], "verify-rdma": [], "train": []}
    assert [request["path"] for request in fake.writes()
            if request["path"].endswith(("/failure_nodes/", "/always_nodes/"))] == []

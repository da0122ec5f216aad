"""The operators' admission-webhook rules (plugins/module_utils/workload/admission_rules.py):
one case per rule, each a valid object broken in one place, refused with the
webhook's own words and a fix; the valid objects pass. The rules and their
wording come from the operators' webhook sources at the pinned versions
(the module's docstring names the files)."""

import copy

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload import admission_rules as ar

POD = {"metadata": {"labels": {"app": "x"}},
       "spec": {"containers": [{"name": "trainer", "image": "registry/x:1"}], "restartPolicy": "Never"}}


def pod(container_name="trainer"):
    template = copy.deepcopy(POD)
    template["spec"]["containers"][0]["name"] = container_name
    return template


VALID = {
    "policy": {"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetworkNodePolicy",
               "metadata": {"name": "eno5np0", "namespace": "openshift-sriov-network-operator"},
               "spec": {"resourceName": "eno5np0_rdma", "numVfs": 8, "deviceType": "netdevice", "isRdma": True,
                        "nicSelector": {"vendor": "15b3", "pfNames": ["eno5np0"]}, "nodeSelector": {"a": "b"}}},
    "pytorchjob": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "run-1"},
                   "spec": {"elasticPolicy": {"rdzvBackend": "c10d"}, "nprocPerNode": "2",
                            "pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": pod("pytorch")}}}},
    "volcano": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "run-1"},
                "spec": {"minAvailable": 2, "maxRetry": 0, "ttlSecondsAfterFinished": 60,
                         "plugins": {"svc": [], "env": []},
                         "policies": [{"event": "PodFailed", "action": "TerminateJob"}],
                         "tasks": [{"name": "worker", "replicas": 2, "template": pod()}]}},
    "jobset": {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "run-1"},
               "spec": {"network": {"enableDNSHostnames": True}, "failurePolicy": {"maxRestarts": 0},
                        "successPolicy": {"operator": "All"},
                        "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
                            "completionMode": "Indexed", "completions": 2, "parallelism": 2, "template": pod()}}}]}},
    "runtime": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
                "metadata": {"name": "app", "namespace": "ns"},
                "spec": {"mlPolicy": {"torch": {}}, "template": {"spec": {"replicatedJobs": [
                    {"name": "node", "replicas": 1, "template": {
                        "metadata": {"labels": {ar.TRAINER_ANCESTOR_LABEL: "trainer"}},
                        "spec": {"template": pod("node")}}}]}}}},
    "trainjob": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                 "metadata": {"name": "run-1", "labels": {ar.QUEUE_LABEL: "team-a"}},
                 "spec": {"runtimeRef": {"name": "app", "kind": "TrainingRuntime"},
                          "trainer": {"numNodes": 2, "env": [{"name": "NCCL_DEBUG", "value": "INFO"}]},
                          "runtimePatches": [{"manager": "mlinfra.io/train"}]}},
}


def broken(kind, path, value):
    """VALID[kind] with the value at path (keys and list indices; the index
    just past a list's end appends) set."""
    obj = copy.deepcopy(VALID[kind])
    node = obj
    for key in path[:-1]:
        node = node[key]
    if isinstance(node, list) and path[-1] == len(node):
        node.append(value)
    else:
        node[path[-1]] = value
    return obj


TASK = ["spec", "tasks", 0]
RJOB = ["spec", "replicatedJobs", 0]

CASES = [
    # SR-IOV Network Operator, SriovNetworkNodePolicy
    ("sriov-resource-name", "policy", ["spec", "resourceName"], "eno5np0-rdma",
     'resource name "eno5np0-rdma" contains invalid characters', "cluster_rdma_nics[].resource"),
    ("sriov-nic-selector", "policy", ["spec", "nicSelector"], {},
     "at least one of these parameters (vendor, deviceID, pfNames, rootDevices or netFilter)", "sriov_nic_vendor"),
    ("sriov-pf-separator", "policy", ["spec", "nicSelector", "pfNames"], ["eno5#0-1#2"],
     "probably incorrect separator character usage", "cluster_rdma_nics[].pf"),
    ("sriov-pf-range", "policy", ["spec", "nicSelector", "pfNames"], ["eno5#3"],
     "probably incorrect range character usage", "cluster_rdma_nics[].pf"),
    ("sriov-pf-start", "policy", ["spec", "nicSelector", "pfNames"], ["eno5#a-3"],
     "start range is incorrect", "cluster_rdma_nics[].pf"),
    ("sriov-pf-end", "policy", ["spec", "nicSelector", "pfNames"], ["eno5#0-b"],
     "end range is incorrect", "cluster_rdma_nics[].pf"),
    ("sriov-pf-order", "policy", ["spec", "nicSelector", "pfNames"], ["eno5#4-2"],
     "end range shall not be smaller than start range", "cluster_rdma_nics[].pf"),
    ("sriov-pf-vf-index", "policy", ["spec", "nicSelector", "pfNames"], ["eno5#0-8"],
     "end range exceeds the maximum VF index", "sriov_num_vfs"),
    ("sriov-vfio-rdma", "policy", ["spec", "deviceType"], "vfio-pci",
     "'deviceType: vfio-pci' conflicts with 'isRdma: true'", "sriov_device_type"),
    # Kubeflow Training Operator, PyTorchJob
    ("pytorchjob-name", "pytorchjob", ["metadata", "name"], "7run",
     'Invalid value: "7run": should match a DNS-1035 label', "train_run_id"),
    ("pytorchjob-managed-by", "pytorchjob", ["spec", "runPolicy"], {"managedBy": "someone/else"},
     'Unsupported value: "someone/else"', "managedBy"),
    ("pytorchjob-replica-specs", "pytorchjob", ["spec", "pytorchReplicaSpecs"], {},
     "Required value: must be required", "train_job_manifests"),
    ("pytorchjob-elastic-worker", "pytorchjob", ["spec", "pytorchReplicaSpecs"],
     {"Master": {"replicas": 1, "template": pod("pytorch")}},
     "Required value: must be configured if elastic policy is used", "train_job_manifests"),
    ("pytorchjob-replica-type", "pytorchjob", ["spec", "pytorchReplicaSpecs", "Chief"],
     {"replicas": 1, "template": pod("pytorch")}, 'Unsupported value: "Chief"', "Master and Worker"),
    ("pytorchjob-containers", "pytorchjob", ["spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers"],
     [], "containers: Required value: must be specified", "trainer container"),
    ("pytorchjob-image", "pytorchjob",
     ["spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "image"], "",
     "containers[0].image: Required value: must be required", "cluster_image"),
    ("pytorchjob-container-name", "pytorchjob",
     ["spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "name"], "trainer",
     "must have at least one container with name pytorch", "named pytorch"),
    ("pytorchjob-master-replicas", "pytorchjob", ["spec", "pytorchReplicaSpecs", "Master"],
     {"template": pod("pytorch")}, "[Master].replicas: Forbidden: must be 1", "one Master"),
    ("pytorchjob-worker-replicas", "pytorchjob", ["spec", "pytorchReplicaSpecs", "Worker", "replicas"], 0,
     "Forbidden: must be at least 1", "replicas"),
    ("pytorchjob-nproc-twice", "pytorchjob", ["spec", "elasticPolicy", "nProcPerNode"], 2, "must not be used with spec.nprocPerNode", "once"),
    # Volcano, batch.volcano.sh Job
    ("volcano-min-available", "volcano", ["spec", "minAvailable"], -1, "job 'minAvailable' must be >= 0.", None),
    ("volcano-max-retry", "volcano", ["spec", "maxRetry"], -1, "'maxRetry' cannot be less than zero.", None),
    ("volcano-ttl", "volcano", ["spec", "ttlSecondsAfterFinished"], -5,
     "'ttlSecondsAfterFinished' cannot be less than zero.", None),
    ("volcano-no-task", "volcano", ["spec", "tasks"], [], "No task specified in job spec", None),
    ("volcano-task-replicas", "volcano", TASK + ["replicas"], -1, "'replicas' < 0 in task: worker, job: run-1", None),
    ("volcano-task-min-available", "volcano", TASK + ["minAvailable"], 3,
     "'minAvailable' is greater than 'replicas' in task: worker, job: run-1", None),
    ("volcano-task-name", "volcano", TASK + ["name"], "Worker", "a lowercase RFC 1123 label", None),
    ("volcano-task-duplicate", "volcano", ["spec", "tasks", 1], {"name": "worker", "replicas": 1, "template": pod()},
     "duplicated task name worker", None),
    ("volcano-pod-name", "volcano", ["metadata", "name"], "r" * 60, "create pod with name %s-worker-0 validate failed"
     % ("r" * 60), "train_run_id"),
    ("volcano-job-name", "volcano", ["metadata", "name"], "run_1.", "create job with name run_1. validate failed",
     "train_run_id"),
    ("volcano-total-replicas", "volcano", ["spec", "minAvailable"], 3,
     "job 'minAvailable' should not be greater than total replicas in tasks", None),
    ("volcano-policy-event-and-exit-code", "volcano", ["spec", "policies", 0, "exitCode"], 3,
     "must not specify event and exitCode simultaneously", None),
    ("volcano-policy-neither", "volcano", ["spec", "policies", 0], {"action": "TerminateJob"},
     "either event and exitCode should be specified", None),
    ("volcano-policy-event", "volcano", ["spec", "policies", 0, "event"], "OutOfSync",
     'Invalid value: "OutOfSync": invalid policy event', None),
    ("volcano-policy-duplicate-event", "volcano", ["spec", "policies", 1], {"event": "PodFailed", "action": "AbortJob"},
     "duplicate event PodFailed", None),
    ("volcano-policy-exit-code-zero", "volcano", ["spec", "policies", 0], {"exitCode": 0, "action": "AbortJob"},
     "0 is not a valid error code", None),
    ("volcano-policy-duplicate-exit-code", "volcano", ["spec", "policies"],
     [{"exitCode": 3, "action": "AbortJob"}, {"exitCode": 3, "action": "RestartJob"}], "duplicate exitCode 3", None),
    ("volcano-policy-action", "volcano", ["spec", "policies", 0, "action"], "SyncJob",
     'Invalid value: "SyncJob": invalid policy action', None),
    ("volcano-policy-any-event", "volcano", ["spec", "policies", 1], {"event": "*", "action": "AbortJob"},
     "if there's * here, no other policy should be here", None),
    ("volcano-task-policy", "volcano", TASK + ["policies"], [{"event": "Nope", "action": "AbortJob"}],
     'Invalid value: "Nope": invalid policy event', None),
    ("volcano-plugin", "volcano", ["spec", "plugins", "horovod"], [], "unable to find job plugin: horovod", "svc"),
    # JobSet
    ("jobset-subdomain-long", "jobset", ["spec", "network", "subdomain"], "s" * 64,
     ".spec.network.subdomain is too long, must be less than 63 characters", "train_run_id"),
    ("jobset-subdomain-format", "jobset", ["spec", "network", "subdomain"], "Sub_domain",
     "a DNS-1035 label must consist of lower case alphanumeric characters", "train_run_id"),
    ("jobset-job-name", "jobset", ["metadata", "name"], "j" * 60,
     "JobSet name is too long, job names generated for this JobSet will exceed 63 characters", "train_run_id"),
    ("jobset-pod-name", "jobset", ["metadata", "name"], "j" * 50,
     "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters", "train_run_id"),
    ("jobset-depends-on", "jobset", RJOB + ["dependsOn"], [{"name": "x", "status": "Ready"}],
     "DependsOn can't be set for the first ReplicatedJob", None),
    ("jobset-gated-action", "jobset", ["spec", "failurePolicy", "rules"], [{"name": "r", "action": "RestartJob"}],
     "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed", None),
    ("jobset-rule-name", "jobset", ["spec", "failurePolicy", "rules"], [{"name": "9-rule", "action": "FailJobSet"}],
     "invalid failure policy rule name '9-rule'", None),
    ("jobset-rule-names-unique", "jobset", ["spec", "failurePolicy", "rules"],
     [{"name": "r", "action": "FailJobSet"}, {"name": "r", "action": "FailJobSet"}],
     "rule names are not unique", None),
    ("jobset-rule-target", "jobset", ["spec", "failurePolicy", "rules"],
     [{"name": "r", "action": "FailJobSet", "targetReplicatedJobs": ["workers"]}],
     "invalid replicatedJob name 'workers' in failure policy", None),
    ("jobset-rule-reason", "jobset", ["spec", "failurePolicy", "rules"],
     [{"name": "r", "action": "FailJobSet", "onJobFailureReasons": ["OOMKilled"]}],
     "invalid job failure reason 'OOMKilled'", None),
    ("jobset-success-target", "jobset", ["spec", "successPolicy", "targetReplicatedJobs"], ["workers"],
     "invalid replicatedJob name 'workers' does not appear in .spec.ReplicatedJobs", None),
    # Kubeflow Trainer
    ("runtime-trainer-replicas", "runtime", ["spec", "template", "spec", "replicatedJobs", 0, "replicas"], 2,
     "Invalid value: 2: always must be 1", "numNodes"),
    ("runtime-node-container", "runtime",
     ["spec", "template", "spec", "replicatedJobs", 0, "template", "spec", "template", "spec", "containers", 0, "name"],
     "trainer", "must contain the required container for the ancestor: trainer", "named node"),
    ("runtime-initializer-container", "runtime",
     ["spec", "template", "spec", "replicatedJobs", 0, "template", "metadata", "labels", ar.TRAINER_ANCESTOR_LABEL],
     "dataset-initializer", "must contain the required container for the ancestor: dataset-initializer",
     "container is named dataset-initializer"),
    ("trainjob-reserved-env", "trainjob", ["spec", "trainer", "env", 1], {"name": "PET_NODE_RANK", "value": "0"},
     "must not have reserved envs, invalid envs configured: ['PET_NODE_RANK']", "PET_NNODES"),
    ("trainjob-patch-manager", "trainjob", ["spec", "runtimePatches", 0, "manager"], "mlinfra",
     'must be a domain-prefixed path (such as "acme.io/foo")', None),
    ("trainjob-pod-name", "trainjob", ["metadata", "name"], "t" * 48 + "-x",
     "pod names generated for this JobSet will exceed 63 characters", "train_run_id"),
    # Kueue
    ("kueue-queue-name", "trainjob", ["metadata", "labels", ar.QUEUE_LABEL], "Team A",
     'Invalid value: "Team A": a lowercase RFC 1123 subdomain', "train_queue_name"),
    ("queue-name-label-length", "trainjob", ["metadata", "labels", ar.QUEUE_LABEL], "q" * 64,
     "must be no more than 63 characters", "train_queue_name"),
]


@pytest.mark.parametrize("kind", sorted(VALID))
def test_a_valid_object_passes(kind):
    assert ar.admission_problems(VALID[kind]) == []
    ar.check_admission([VALID[kind]])


@pytest.mark.parametrize("kind, path, value, words, fix", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_each_rule_refuses_with_the_webhooks_words_and_a_fix(kind, path, value, words, fix):
    obj = broken(kind, path, value)
    problems = ar.admission_problems(obj)
    matching = [problem for problem in problems if words in "%s: %s" % (problem["field"], problem["message"])]
    assert matching, problems
    assert all(problem["fix"] and problem["webhook"] and problem["field"] for problem in problems)
    if fix:
        assert any(fix in problem["fix"] for problem in matching), problems
    with pytest.raises(ar.AdmissionError) as refused:
        ar.check_admission([VALID["jobset"], obj])
    said = str(refused.value)
    assert words in said and "admission webhook); fix: " in said
    assert said.startswith("%s %s: " % (obj["kind"], obj["metadata"]["name"]))


def test_every_rule_has_its_case():
    """A rule added without a case here fails this count."""
    assert len(CASES) == len({case[0] for case in CASES}) == 60


def test_objects_of_kinds_without_webhook_rules_are_only_checked_for_a_queue():
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x", "labels": {ar.QUEUE_LABEL: "a_b"}}}
    assert [problem["webhook"] for problem in ar.admission_problems(service)] == ["Kueue"]
    network = {"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetwork", "metadata": {"name": "x"},
               "spec": {"resourceName": "not-checked-by-a-webhook"}}
    assert ar.admission_problems(network) == []


def test_a_pf_range_within_the_vfs_passes():
    assert ar.admission_problems(broken("policy", ["spec", "nicSelector", "pfNames"], ["eno5np0#0-7"])) == []

# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The operators' admission-webhook rules, checked before anything is applied.

A CustomResourceDefinition's schema is enforced by the API server, and the
local cluster serves the operators' own CRDs; but each operator also refuses
objects in a validating webhook of its own, which runs only where the
operator does. What the collection renders is checked here against the
static rules of those webhooks (the rules that depend on the object alone),
so that a value which a real cluster would refuse fails before deploy.yml or
train.yml changes anything, with the webhook's own words and the inventory
variable that fixes it.

========================= ============================================================
operator (pinned version)  rules, from its webhook's source
========================= ============================================================
SR-IOV Network Operator    SriovNetworkNodePolicy: resourceName characters, a NIC
v1.6.0                     selector, the pfNames VF ranges, vfio-pci without RDMA
                           (pkg/webhook/validate.go, staticValidateSriovNetworkNodePolicy)
Training Operator v1.9.4   PyTorchJob: name, replica types, a container named pytorch
                           with an image, Master replicas 1, Worker with elasticPolicy,
                           processes per node given once
                           (pkg/webhooks/pytorch/pytorchjob_webhook.go)
Volcano v1.14.1            Job: counts, task names, pod names, policies, plugins
                           (pkg/webhooks/admission/jobs/validate/admit_job.go, util.go)
JobSet v0.12.0             JobSet: generated job and pod names, subdomain, failure and
                           success policies (pkg/webhooks/jobset_webhook.go)
Kubeflow Trainer v2.3.0    TrainingRuntime: the trainer job's replicas and its node
                           container; TrainJob: reserved PET_* variables, runtime patch
                           managers, and the pod names its JobSet will have
                           (pkg/webhooks/trainingruntime_webhook.go, plugins/torch, jobset)
Kueue v0.19.0              the queue-name label of any workload, a label value first
                           (pkg/controller/jobframework/validation.go)
========================= ============================================================

Rules that depend on the cluster (the SR-IOV operator's supported NIC list,
a Volcano queue's state, whether a runtime exists) are the roles' live
checks, not these.

Held to the real webhooks where the local cluster runs the operator: the
JobSet, Kubeflow Trainer, Training Operator, Volcano and Kueue rules agree
with those operators' own webhooks (or the API server's checks in front of
them) on every variation of
tests/integration/test_train_controllers.py (names at the length limits,
subdomains, policies, replicas, containers, reserved variables); where they
disagreed, the webhook was right and the rule was mended. One rule cannot be
checked by any webhook before apply: the pod names of the JobSet Kubeflow
Trainer makes of a TrainJob, which the JobSet webhook refuses only when
Trainer's controller creates it (an event on the accepted TrainJob, and no
pods); here it fails before anything is applied.

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ..common.errors import MlinfraError

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
TRAINER_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
# apimachinery's name formats.
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_LIMIT = 63
_SUBDOMAIN_LIMIT = 253
# The suffix a Job controller gives each pod's name.
_POD_SUFFIX = "-abcde"

_SRIOV_RESOURCE_NAME = re.compile(r"^[a-zA-Z0-9_]+$")
_PYTORCH_REPLICA_TYPES = ("Master", "Worker")
_PYTORCH_MANAGERS = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")
_VOLCANO_EVENTS = ("*", "PodPending", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated")
_VOLCANO_ACTIONS = ("AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob",
                    "CompleteJob", "ResumeJob")
_VOLCANO_PLUGINS = ("ssh", "env", "svc", "tensorflow", "mpi", "pytorch")
_JOBSET_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_JOBSET_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                           "PodFailurePolicy")
# RestartJob actions need a feature gate that is off by default.
_JOBSET_GATED_ACTIONS = ("RestartJob", "RestartJobAndIgnoreMaxRestarts")
# The container each ancestor step's job must have (the ancestor label's value
# -> the container's name).
_TRAINER_ANCESTOR_CONTAINERS = {"trainer": "node", "model-initializer": "model-initializer",
                                "dataset-initializer": "dataset-initializer"}
_TORCH_RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
_DOMAIN_PATH = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


class AdmissionError(MlinfraError, ValueError):
    """Objects an operator's admission webhook would refuse; the message
    lists each problem with its fix."""


def _problem(webhook, field, message, fix):
    return {"webhook": webhook, "field": field, "message": message, "fix": fix}


def is_dns1035_label(value):
    return isinstance(value, str) and len(value) <= _LABEL_LIMIT and bool(_DNS1035_LABEL.match(value))


def is_dns1123_label(value):
    return isinstance(value, str) and len(value) <= _LABEL_LIMIT and bool(_DNS1123_LABEL.match(value))


def is_dns1123_subdomain(value):
    return (isinstance(value, str) and 0 < len(value) <= _SUBDOMAIN_LIMIT
            and all(_DNS1123_LABEL.match(part) for part in value.split(".")))


def _is_qualified_name(value):
    return len(value) <= _LABEL_LIMIT and bool(_QUALIFIED_NAME.match(value))


def _pod_spec(template):
    return ((template or {}).get("spec") or {})


# SR-IOV Network Operator: SriovNetworkNodePolicy.

def _pf_range_problem(pf_name, num_vfs):
    """The <pf>#<first>-<last> form of a pfNames entry, as the operator
    parses it; None when it is right."""
    parts = pf_name.split("#")
    if len(parts) != 2:
        return "failed to parse %s PF name in nicSelector, probably incorrect separator character usage" % pf_name
    bounds = parts[1].split("-")
    if len(bounds) != 2:
        return "failed to parse %s PF name nicSelector, probably incorrect range character usage" % pf_name
    if not bounds[0].isdigit():
        return "failed to parse %s PF name nicSelector, start range is incorrect" % pf_name
    if not bounds[1].isdigit():
        return "failed to parse %s PF name nicSelector, end range is incorrect" % pf_name
    if int(bounds[1]) < int(bounds[0]):
        return "failed to parse %s PF name nicSelector, end range shall not be smaller than start range" % pf_name
    if int(bounds[1]) >= int(num_vfs or 0):
        return "failed to parse %s PF name nicSelector, end range exceeds the maximum VF index" % pf_name
    return None


def sriov_node_policy_problems(policy):
    webhook = "the SR-IOV Network Operator"
    spec = policy.get("spec") or {}
    found = []
    resource = spec.get("resourceName") or ""
    if not _SRIOV_RESOURCE_NAME.match(resource):
        found.append(_problem(webhook, "spec.resourceName",
                              'resource name "%s" contains invalid characters, the accepted syntax of the regular '
                              'expressions is: "^[a-zA-Z0-9_]+$"' % resource,
                              "cluster_rdma_nics[].resource must be openshift.io/<letters, digits and _>"))
    selector = spec.get("nicSelector") or {}
    if not any(selector.get(key) for key in ("vendor", "deviceID", "pfNames", "rootDevices", "netFilter")):
        found.append(_problem(webhook, "spec.nicSelector",
                              "at least one of these parameters (vendor, deviceID, pfNames, rootDevices or netFilter) "
                              "has to be defined in nicSelector in CR %s" % policy.get("metadata", {}).get("name"),
                              "give sriov_nic_vendor and each cluster_rdma_nics[].pf"))
    for pf_name in selector.get("pfNames") or []:
        if "#" in pf_name:
            wrong = _pf_range_problem(pf_name, spec.get("numVfs"))
            if wrong:
                found.append(_problem(webhook, "spec.nicSelector.pfNames", wrong,
                                      "cluster_rdma_nics[].pf as <pf> or <pf>#<first>-<last> with last below "
                                      "sriov_num_vfs"))
    if spec.get("deviceType") == "vfio-pci" and spec.get("isRdma"):
        found.append(_problem(webhook, "spec.deviceType",
                              "'deviceType: vfio-pci' conflicts with 'isRdma: true'; Set 'deviceType' to "
                              "(string)'netdevice' Or Set 'isRdma' to (bool)'false'",
                              "sriov_device_type: netdevice (RDMA needs the kernel driver)"))
    return found


# Kubeflow Training Operator v1: PyTorchJob.

def pytorchjob_problems(job):
    webhook = "the Kubeflow Training Operator"
    spec = job.get("spec") or {}
    found = []
    name = job.get("metadata", {}).get("name", "")
    if not is_dns1035_label(name):
        found.append(_problem(webhook, "metadata.name", 'Invalid value: "%s": should match a DNS-1035 label' % name,
                              "train_run_id (the object is named after it)"))
    manager = (spec.get("runPolicy") or {}).get("managedBy")
    if manager is not None and manager not in _PYTORCH_MANAGERS:
        found.append(_problem(webhook, "spec.runPolicy.managedBy", 'Unsupported value: "%s"' % manager,
                              "leave runPolicy.managedBy unset"))
    replica_specs = spec.get("pytorchReplicaSpecs")
    if not replica_specs:
        return found + [_problem(webhook, "spec.pytorchReplicaSpecs", "Required value: must be required",
                                 "render the PyTorchJob through train_job_manifests")]
    if spec.get("elasticPolicy") is not None and "Worker" not in replica_specs:
        found.append(_problem(webhook, "spec.pytorchReplicaSpecs[Worker]",
                              "Required value: must be configured if elastic policy is used",
                              "render the PyTorchJob through train_job_manifests"))
    if (spec.get("elasticPolicy") or {}).get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
        found.append(_problem(webhook, "spec.elasticPolicy.nProcPerNode",
                              "Forbidden: must not be used with spec.nprocPerNode",
                              "give the processes per node once, as spec.nprocPerNode"))
    for replica_type, replica in replica_specs.items():
        field = "spec.pytorchReplicaSpecs[%s]" % replica_type
        if replica_type not in _PYTORCH_REPLICA_TYPES:
            found.append(_problem(webhook, field, 'Unsupported value: "%s": supported values: "Master", "Worker"'
                                  % replica_type, "use only Master and Worker replicas"))
            continue
        containers = _pod_spec((replica or {}).get("template")).get("containers") or []
        if not containers:
            found.append(_problem(webhook, field + ".template.spec.containers", "Required value: must be specified",
                                  "the StatefulSet's pod template needs its trainer container"))
        for index, container in enumerate(containers):
            if not container.get("image"):
                found.append(_problem(webhook, "%s.template.spec.containers[%d].image" % (field, index),
                                      "Required value: must be required", "cluster_image"))
        if containers and "pytorch" not in [container.get("name") for container in containers]:
            found.append(_problem(webhook, field + ".template.spec.containers",
                                  "Required value: must have at least one container with name pytorch",
                                  "the trainer container is named pytorch in pytorchjob mode"))
        replicas = (replica or {}).get("replicas")
        if replica_type == "Master" and replicas != 1:
            found.append(_problem(webhook, field + ".replicas", "Forbidden: must be 1", "one Master replica"))
        if replica_type == "Worker" and replicas is not None and int(replicas) < 1:
            found.append(_problem(webhook, field + ".replicas", "Forbidden: must be at least 1", "replicas >= 1"))
    return found


# Volcano: batch.volcano.sh Job.

def _volcano_policy_problems(policies, where):
    found, seen_events, seen_codes = [], set(), set()
    for policy in policies or []:
        events = ([policy["event"]] if policy.get("event") else []) + list(policy.get("events") or [])
        if events and policy.get("exitCode") is not None:
            found.append("must not specify event and exitCode simultaneously")
        elif not events and policy.get("exitCode") is None:
            found.append("either event and exitCode should be specified")
        for event in events:
            if event not in _VOLCANO_EVENTS:
                found.append('Invalid value: "%s": invalid policy event' % event)
            elif event in seen_events:
                found.append("duplicate event %s  across different policy" % event)
            seen_events.add(event)
        if policy.get("exitCode") is not None:
            if int(policy["exitCode"]) == 0:
                found.append("0 is not a valid error code")
            elif policy["exitCode"] in seen_codes:
                found.append("duplicate exitCode %s" % policy["exitCode"])
            seen_codes.add(policy["exitCode"])
        if policy.get("action") and policy["action"] not in _VOLCANO_ACTIONS:
            found.append('Invalid value: "%s": invalid policy action' % policy["action"])
    if "*" in seen_events and len(seen_events) > 1:
        found.append("if there's * here, no other policy should be here")
    return [(where, message) for message in found]


def volcano_job_problems(job):
    webhook = "Volcano"
    spec = job.get("spec") or {}
    name = job.get("metadata", {}).get("name", "")
    run_fix = "train_run_id (the objects are named after it)"
    found = []
    for key, message in (("minAvailable", "job 'minAvailable' must be >= 0."),
                         ("maxRetry", "'maxRetry' cannot be less than zero."),
                         ("ttlSecondsAfterFinished", "'ttlSecondsAfterFinished' cannot be less than zero.")):
        if int(spec.get(key) or 0) < 0:
            found.append(_problem(webhook, "spec." + key, message, "render the Job through train_job_manifests"))
    tasks = spec.get("tasks") or []
    if not tasks:
        return found + [_problem(webhook, "spec.tasks", "No task specified in job spec",
                                 "render the Job through train_job_manifests")]
    names = set()
    policy_problems = []
    for index, task in enumerate(tasks):
        task_name, field = task.get("name", ""), "spec.tasks[%d]" % index
        replicas, minimum = int(task.get("replicas") or 0), task.get("minAvailable")
        if replicas < 0:
            found.append(_problem(webhook, field + ".replicas", "'replicas' < 0 in task: %s, job: %s" % (task_name, name),
                                  "replicas >= 1"))
        if minimum is not None and int(minimum) > replicas:
            found.append(_problem(webhook, field + ".minAvailable", "'minAvailable' is greater than 'replicas' in "
                                  "task: %s, job: %s" % (task_name, name), "replicas"))
        if not is_dns1123_label(task_name):
            found.append(_problem(webhook, field + ".name", "a lowercase RFC 1123 label must consist of lower case "
                                  "alphanumeric characters or '-', and must start and end with an alphanumeric "
                                  "character", "task names are lower-case DNS labels"))
        if task_name in names:
            found.append(_problem(webhook, field + ".name", "duplicated task name %s" % task_name,
                                  "one task per name"))
        names.add(task_name)
        pod_name = "%s-%s-%d" % (name, task_name, index)
        if not _is_qualified_name(pod_name):
            found.append(_problem(webhook, field, "create pod with name %s validate failed" % pod_name, run_fix))
        policy_problems += _volcano_policy_problems(task.get("policies"), field + ".policies")
    if not _is_qualified_name(name):
        found.append(_problem(webhook, "metadata.name", "create job with name %s validate failed" % name, run_fix))
    if sum(int(task.get("replicas") or 0) for task in tasks) < int(spec.get("minAvailable") or 0):
        found.append(_problem(webhook, "spec.minAvailable", "job 'minAvailable' should not be greater than total "
                              "replicas in tasks", "replicas"))
    policy_problems += _volcano_policy_problems(spec.get("policies"), "spec.policies")
    found += [_problem(webhook, where, message, "render the Job through train_job_manifests")
              for where, message in policy_problems]
    for plugin in (spec.get("plugins") or {}):
        if plugin not in _VOLCANO_PLUGINS:
            found.append(_problem(webhook, "spec.plugins", "unable to find job plugin: %s" % plugin,
                                  "use the plugins Volcano registers: %s" % ", ".join(_VOLCANO_PLUGINS)))
    return found


# JobSet.

def _replicated_job_problems(jobset_name, replicated_jobs, webhook, fix):
    found = []
    for index, replicated in enumerate(replicated_jobs):
        field = "spec.replicatedJobs[%d]" % index
        replicas = int(replicated.get("replicas", 1))
        job_spec = (replicated.get("template") or {}).get("spec") or {}
        job_name = "%s-%s-%d" % (jobset_name, replicated.get("name", ""), replicas - 1)
        if not is_dns1035_label(job_name):
            found.append(_problem(webhook, field + ".name", "JobSet name is too long, job names generated for this "
                                  "JobSet will exceed 63 characters" if len(job_name) > _LABEL_LIMIT else
                                  "a DNS-1035 label must consist of lower case alphanumeric characters or '-' "
                                  "(generated job name %s)" % job_name, fix))
        completions = job_spec.get("completions")
        if job_spec.get("completionMode", "Indexed") == "Indexed" and completions is not None:
            pod_name = "%s-%d%s" % (job_name, int(completions) - 1, _POD_SUFFIX)
            if not is_dns1035_label(pod_name):
                found.append(_problem(webhook, field + ".name", "JobSet name is too long, pod names generated for "
                                      "this JobSet will exceed 63 characters (%s)" % pod_name, fix))
        if index == 0 and replicated.get("dependsOn"):
            found.append(_problem(webhook, field + ".dependsOn", "DependsOn can't be set for the first ReplicatedJob",
                                  "render the JobSet through train_job_manifests"))
    return found


def _jobset_policy_problems(spec, webhook):
    found = []
    names = [replicated.get("name") for replicated in spec.get("replicatedJobs") or []]
    fix = "render the JobSet through train_job_manifests"
    rules = (spec.get("failurePolicy") or {}).get("rules") or []
    seen = set()
    for index, rule in enumerate(rules):
        field = "spec.failurePolicy.rules[%d]" % index
        rule_name = rule.get("name") or "failurePolicyRule%d" % index
        if rule.get("action") in _JOBSET_GATED_ACTIONS:
            found.append(_problem(webhook, field + ".action", "RestartJob and RestartJobAndIgnoreMaxRestarts failure "
                                  "policy actions are not allowed when RestartJob feature gate is disabled", fix))
        if not 1 <= len(rule_name) <= 128 or not _JOBSET_RULE_NAME.match(rule_name):
            found.append(_problem(webhook, field + ".name", "invalid failure policy rule name '%s'" % rule_name, fix))
        if rule_name in seen:
            found.append(_problem(webhook, field + ".name", "rule names are not unique, rules with indices have the "
                                  "same name '%s'" % rule_name, fix))
        seen.add(rule_name)
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in names:
                found.append(_problem(webhook, field, "invalid replicatedJob name '%s' in failure policy does not "
                                      "appear in .spec.ReplicatedJobs" % target, fix))
        for reason in rule.get("onJobFailureReasons") or []:
            if reason not in _JOBSET_FAILURE_REASONS:
                found.append(_problem(webhook, field, "invalid job failure reason '%s' in failure policy is not a "
                                      "recognized job failure reason" % reason, fix))
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in names:
            found.append(_problem(webhook, "spec.successPolicy", "invalid replicatedJob name '%s' does not appear in "
                                  ".spec.ReplicatedJobs" % target, fix))
    return found


def jobset_problems(jobset):
    webhook = "JobSet"
    spec = jobset.get("spec") or {}
    name = jobset.get("metadata", {}).get("name", "")
    found = []
    subdomain = (spec.get("network") or {}).get("subdomain")
    if subdomain and not (is_dns1123_subdomain(subdomain) and is_dns1035_label(subdomain)):
        found.append(_problem(webhook, "spec.network.subdomain", ".spec.network.subdomain is too long, must be less "
                              "than 63 characters" if len(subdomain) > _LABEL_LIMIT else
                              "a DNS-1035 label must consist of lower case alphanumeric characters or '-'",
                              "train_run_id (the subdomain is named after it)"))
    found += _replicated_job_problems(name, spec.get("replicatedJobs") or [], webhook,
                                      "a shorter train_run_id (the JobSet is named after it)")
    return found + _jobset_policy_problems(spec, webhook)


# Kubeflow Trainer v2: TrainingRuntime, ClusterTrainingRuntime, TrainJob.

def training_runtime_problems(runtime):
    webhook = "Kubeflow Trainer"
    replicated_jobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
    found = []
    for index, replicated in enumerate(replicated_jobs):
        template = replicated.get("template") or {}
        ancestor = ((template.get("metadata") or {}).get("labels") or {}).get(TRAINER_ANCESTOR_LABEL)
        if ancestor not in _TRAINER_ANCESTOR_CONTAINERS:
            continue
        field = "spec.template.spec.replicatedJobs[%d]" % index
        if int(replicated.get("replicas", 1)) != 1:
            found.append(_problem(webhook, field + ".replicas", "Invalid value: %s: always must be 1"
                                  % replicated.get("replicas"), "numNodes of the TrainJob sets the node count"))
        containers = _pod_spec(((template.get("spec") or {}).get("template"))).get("containers") or []
        if _TRAINER_ANCESTOR_CONTAINERS[ancestor] not in [container.get("name") for container in containers]:
            found.append(_problem(webhook, field + ".template.spec.template.spec.containers",
                                  "must contain the required container for the ancestor: %s" % ancestor,
                                  "the %s job's container is named %s (the trainer's is node in trainjob mode)"
                                  % (ancestor, _TRAINER_ANCESTOR_CONTAINERS[ancestor])))
    return found


def trainjob_problems(trainjob):
    webhook = "Kubeflow Trainer"
    spec = trainjob.get("spec") or {}
    trainer = spec.get("trainer") or {}
    found = []
    reserved = sorted(var.get("name") for var in trainer.get("env") or [] if var.get("name") in _TORCH_RESERVED_ENV)
    if reserved:
        found.append(_problem(webhook, "spec.trainer.env", "must not have reserved envs, invalid envs configured: %s"
                              % reserved, "leave %s to the runtime" % ", ".join(_TORCH_RESERVED_ENV)))
    for index, patch in enumerate(spec.get("runtimePatches") or []):
        if not _DOMAIN_PATH.match(patch.get("manager") or ""):
            found.append(_problem(webhook, "spec.runtimePatches[%d].manager" % index,
                                  'must be a domain-prefixed path (such as "acme.io/foo")',
                                  "render the TrainJob through train_job_manifests"))
    # Trainer makes a JobSet of the TrainJob's name with the replicated job
    # "node"; the JobSet webhook then judges its pod names.
    nodes = int(trainer.get("numNodes") or 1)
    pod_name = "%s-node-0-%d%s" % (trainjob.get("metadata", {}).get("name", ""), nodes - 1, _POD_SUFFIX)
    if not is_dns1035_label(pod_name):
        found.append(_problem("JobSet (made by Kubeflow Trainer)", "metadata.name", "JobSet name is too long, pod "
                              "names generated for this JobSet will exceed 63 characters (%s)" % pod_name,
                              "a shorter train_run_id (the TrainJob is named after it)"))
    return found


# Kueue: any workload with a queue.

def queue_label_problems(obj):
    queue = ((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
    if queue is None:
        return []
    fix = "train_queue_name: the name of a LocalQueue"
    # A label value first (the API server's limit), then Kueue's own rule.
    if len(queue) > _LABEL_LIMIT:
        return [_problem("the API server", "metadata.labels[%s]" % QUEUE_LABEL,
                         'Invalid value: "%s": must be no more than 63 characters' % queue, fix)]
    if is_dns1123_subdomain(queue):
        return []
    return [_problem("Kueue", "metadata.labels[%s]" % QUEUE_LABEL,
                     'Invalid value: "%s": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
                     "characters, '-' or '.'" % queue, fix)]


_RULES = {
    ("sriovnetwork.openshift.io", "SriovNetworkNodePolicy"): sriov_node_policy_problems,
    ("kubeflow.org", "PyTorchJob"): pytorchjob_problems,
    ("batch.volcano.sh", "Job"): volcano_job_problems,
    ("jobset.x-k8s.io", "JobSet"): jobset_problems,
    ("trainer.kubeflow.org", "TrainingRuntime"): training_runtime_problems,
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): training_runtime_problems,
    ("trainer.kubeflow.org", "TrainJob"): trainjob_problems,
}


def admission_problems(obj):
    """Every static webhook rule that obj breaks: a list of {webhook, field,
    message, fix}; empty when an operator would admit it."""
    group = (obj.get("apiVersion") or "").rpartition("/")[0]
    rules = _RULES.get((group, obj.get("kind")))
    return (rules(obj) if rules else []) + queue_label_problems(obj)


def check_admission(objects):
    """Raises AdmissionError naming every problem of every object, each with
    the webhook's words and the fix."""
    lines = []
    for obj in objects:
        for problem in admission_problems(obj):
            lines.append("%s %s: %s: %s (%s's admission webhook); fix: %s" % (
                obj.get("kind"), obj.get("metadata", {}).get("name"), problem["field"], problem["message"],
                problem["webhook"], problem["fix"]))
    if lines:
        raise AdmissionError("; ".join(lines))

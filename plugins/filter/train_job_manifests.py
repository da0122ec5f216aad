# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: train_job_manifests
short_description: The objects of one training run in a Job start mode (indexed Job, PyTorchJob, Volcano Job, JobSet, TrainJob)
version_added: 0.1.0
description:
  - Turns the StatefulSet the statefulset role renders into the objects of one run - a headless Service and an
    indexed Job (V(job)), a Kubeflow PyTorchJob (V(pytorchjob)), a Volcano Job (V(volcano)), a JobSet of one
    replicated job (V(jobset)), or the deployment's Kubeflow Trainer TrainingRuntime and the run's TrainJob
    (V(trainjob)) - whose pods are the StatefulSet's pods running C(mlinfra train start --wait) as one node each.
  - The objects are checked against the static rules of the operators' admission webhooks (Kubeflow Training
    Operator, Volcano, JobSet, Kubeflow Trainer, Kueue); one they would refuse fails with the webhook's words and
    the fix.
  - The node rank, the rendezvous host (pod 0) and each pod's own address come from what the mode's controller
    provides (the completion index, the replica-index label, C(VC_TASK_INDEX) and C(VC_WORKER_HOSTS)), as in the
    OKE host-network PyTorchJob and Volcano examples; the pods do not restart and keep off each other's nodes.
  - Fails when the pods' workspace is a claim per StatefulSet pod (C(cluster_storage_mode=per-pod)), which a Job's
    pods cannot mount.
author:
  - mlinfra maintainers (@mlinfra)
positional: mode, run_id, replicas, launch_args
options:
  _input:
    description: The StatefulSet manifest (the statefulset role's C(statefulset_manifests.statefulset)).
    type: dict
    required: true
  mode:
    description: The start mode.
    type: str
    choices: [job, pytorchjob, volcano, jobset, trainjob]
    required: true
  run_id:
    description: The run's id, also the rendezvous id; the objects' name is derived from it.
    type: str
    required: true
  replicas:
    description: Pods (nodes) of the run.
    type: int
    required: true
  launch_args:
    description: The launcher's arguments after the run directory and id (C(--nnodes) ... C(-- ARGS)).
    type: list
    elements: str
    required: true
  run_dir:
    description: Directory of the runs, relative to the pods' working directory (the workspace).
    type: str
    default: mlinfra-runs
  port:
    description: Rendezvous port.
    type: int
    default: 29500
  resolve_timeout:
    description: Seconds each pod waits for pod 0's name to resolve.
    type: int
    default: 600
  ttl_seconds:
    description: Seconds a finished run's object (and its pods, with their logs) is kept.
    type: int
    default: 86400
  volcano_queue:
    description: Volcano queue of a V(volcano) run.
    type: str
    default: default
  queue_name:
    description: Kueue LocalQueue of the run's workload (not in V(volcano) mode); empty for none.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Render an indexed Job of two nodes
  ansible.builtin.set_fact:
    run_objects: >-
      {{ statefulset_manifests.statefulset | mlinfra.multinode.train_job_manifests('job', 'llama3-run1', 2,
         ['--nnodes', '2', '--nproc-per-node', '4']) }}
"""

RETURN = r"""
_value:
  description: The objects to apply, in order (the Service first in V(job) mode, the TrainingRuntime first in V(trainjob) mode).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.train_jobs import TrainJobError, manifests


def train_job_manifests(statefulset, mode, run_id, replicas, launch_args, run_dir="mlinfra-runs", port=29500,
                        resolve_timeout=600, ttl_seconds=86400, volcano_queue="default", queue_name=""):
    if not isinstance(statefulset, dict) or statefulset.get("kind") != "StatefulSet":
        raise AnsibleFilterError("train_job_manifests takes the StatefulSet manifest, got %s"
                                 % (statefulset.get("kind") if isinstance(statefulset, dict)
                                    else type(statefulset).__name__))
    try:
        return manifests(statefulset, mode, str(run_id), replicas, list(launch_args), run_dir, port,
                         resolve_timeout=resolve_timeout, ttl_seconds=ttl_seconds, volcano_queue=volcano_queue,
                         queue_name=queue_name or "")
    except TrainJobError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"train_job_manifests": train_job_manifests}

# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The verdict filters: the roles' only way to a verdict. Each filter is
documented beside this file (node_verdicts.yml, ...); the rules are in
plugins/module_utils/report/verdicts.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.report import degradation
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import port_counters
from ansible_collections.mlinfra.multinode.plugins.module_utils.report import verdicts


def _list(value, name):
    if value is None:
        return []
    if not isinstance(value, list):
        raise AnsibleFilterError("%s takes a list, got %s" % (name, type(value).__name__))
    return value


def node_verdicts(nodes, probes, execs, timeout, namespace, not_probed=None):
    return verdicts.node_verdicts(_list(nodes, "node_verdicts"), _list(probes, "probes"), _list(execs, "execs"),
                                  timeout, namespace, not_probed)


def pod_verdicts(execs, detected, replicas, app_name):
    return verdicts.pod_verdicts(_list(execs, "pod_verdicts"), _list(detected, "detected"), replicas, app_name)


def bench_verdict(execs, blocker=None, thresholds=None, pairwise=False, expected=None, probe_counters=None):
    return verdicts.bench_verdict(_list(execs, "bench_verdict"), blocker, _list(thresholds, "thresholds"), pairwise,
                                  expected, probe_counters)


def bench_line(result):
    if not isinstance(result, dict) or "status" not in result:
        raise AnsibleFilterError("bench_line takes bench_verdict's result")
    return verdicts.bench_line(result)


def verify_report(meta, nodes, pods, bench, notes, previous):
    return verdicts.verify_report(_list(nodes, "nodes"), _list(pods, "pods"), bench, _list(notes, "notes"),
                                  previous or {}, meta)


def fabric_fitness(report, fail_on):
    try:
        return verdicts.fabric_fitness(report, fail_on)
    except ValueError as error:
        raise AnsibleFilterError("%s; fix the -e value or the inventory's group_vars" % error)


def fitness_line(report, fitness, fail_on, report_path):
    return verdicts.fitness_line(report, fitness, fail_on, report_path)


def run_state(pods):
    return verdicts.run_state(_list(pods, "run_state"))


def job_run_state(pods, replicas, seen_before, run=None):
    return verdicts.job_run_state(_list(pods, "job_run_state"), replicas, seen_before, run or None)


def run_object_status(run):
    if not isinstance(run, dict):
        raise AnsibleFilterError("run_object_status expects a run's object (a dict, as k8s_info returns it), got %s"
                                 % type(run).__name__)
    return verdicts.run_object_status(run)


def queue_admission(workloads, queue_name):
    return verdicts.queue_admission(_list(workloads, "queue_admission"), queue_name)


def local_queue_problem(found, queue_name, namespace):
    if not isinstance(found, dict):
        raise AnsibleFilterError("local_queue_problem expects k8s_info's answer (a dict), got %s" % type(found).__name__)
    return verdicts.local_queue_problem(found, queue_name, namespace)


def runs_in_progress(exec_pods, job_pods):
    return verdicts.runs_in_progress(_list(exec_pods, "runs_in_progress"), _list(job_pods, "job_pods"))


def runs_going(runs):
    return verdicts.runs_going(_list(runs, "runs_going"))


def soak_report(meta, runs, judged):
    return verdicts.soak_report(_list(runs, "soak_report"), _list(judged, "judged"), meta)


def soak_run_facts(pods, run, nodes=None):
    return degradation.run_facts(int(run), _list(pods, "soak_run_facts"), nodes)


def node_port_deltas(before, after, nodes=None):
    return port_counters.node_port_deltas(_list(before, "node_port_deltas"), _list(after, "after"),
                                          None if nodes is None else set(_list(nodes, "nodes")))


class FilterModule(object):
    def filters(self):
        return {
            "node_verdicts": node_verdicts,
            "runs_in_progress": runs_in_progress,
            "pod_verdicts": pod_verdicts,
            "bench_verdict": bench_verdict,
            "bench_line": bench_line,
            "verify_report": verify_report,
            "fabric_fitness": fabric_fitness,
            "fitness_line": fitness_line,
            "run_state": run_state,
            "job_run_state": job_run_state,
            "runs_going": runs_going,
            "run_object_status": run_object_status,
            "queue_admission": queue_admission,
            "local_queue_problem": local_queue_problem,
            "soak_report": soak_report,
            "soak_run_facts": soak_run_facts,
            "node_port_deltas": node_port_deltas,
        }

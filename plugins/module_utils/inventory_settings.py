# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The inventory's variables, checked and converted in one place.

Role argument specs check a value's type but leave the variable as it was
given: ``-e cluster_host_network=false`` reaches a template as the string
"false", which Jinja takes as true. Every playbook's first task (the cluster
role's) passes the variables it can see through check_settings; each is
converted as the roles read it (booleans as Jinja's bool filter reads them:
true/false, yes/no, on/off, 1/0 in any case) and checked for range and
format, and the settings are checked against each other. A refusal names
the variable, the value and the fix, before anything on the cluster changes.

Checks that need the cluster (does a node exist, does it offer the GPUs)
stay in the cluster role; these need only the variables.
"""

from __future__ import absolute_import, division, print_function

import difflib
import math
import re

from .workload.image_reference import parse_image_reference
from .fabric.nccl_env import OVERRIDE_MAX_LENGTH, override_error
from .common.errors import MlinfraError
from .common.labels import LABEL_KEY, LABEL_VALUE, parse_selector

__metaclass__ = type

# The words Jinja's `bool` filter reads (in any case): the roles read each
# boolean through it, so a word it would take as false (y, t, ...: argument
# specs accept those) is refused here rather than read two ways.
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Kubernetes quantities: a number and a suffix; sizes must name their unit
# (a storage size of "100" is 100 bytes, never what was meant).
SIZE = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)$")
CPU = re.compile(r"^([0-9]+(\.[0-9]{1,3})?|[0-9]+m)$")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Namespaces of the platform itself: a deployment there mixes its pods,
# RBAC and privileges with the cluster's own components.
SYSTEM_NAMESPACES = re.compile(r"^(kube-.*|openshift(-.*)?|default)$")
# Jumbo frames at most (9216 is the largest MTU of common RoCE switches);
# IPv6 and RoCE need at least 1280.
MTU_RANGE = (1280, 9216)
# Ports the collection opens in the pods: 1024 and up. The ones below are
# privileged and well known (22, 80, 443, ...), and a rendezvous there
# clashes with the node's own services under host networking.
PORT_RANGE = (1024, 65535)
# The most runs one soak makes: a soak keeps its privileged probes for its
# length, and 1000 runs of the shortest benchmark already take hours.
SOAK_RUNS_MAX = 1000


class Refused(MlinfraError, ValueError):
    """One variable's value cannot be used: why, and the fix."""

    def __init__(self, problem, fix):
        super(Refused, self).__init__(problem)
        self.problem, self.fix = problem, fix


# ------------------------------------------------------------- conversions

def to_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise Refused("is not a boolean", "give true or false (yes/no, on/off and 1/0 are read the same)")


def setting_bool(settings, name):
    """One boolean of a mapping of settings, read as to_bool reads it: for
    code that gets the variables as they were given (-e x=false is text)."""
    try:
        return to_bool(settings[name])
    except Refused as refused:
        raise Refused("%s %s" % (name, refused.problem), refused.fix)


def to_int(value, low=None, high=None):
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        raise Refused("is not a whole number", "give a whole number")
    try:
        number = int(value.strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise Refused("is not a whole number", "give a whole number")
    _check_range(number, low, high)
    return number


def to_float(value, low=None, high=None):
    if isinstance(value, bool):
        raise Refused("is not a number", "give a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise Refused("is not a number", "give a number")
    if math.isnan(number) or math.isinf(number):
        raise Refused("is not a number", "give a number")
    _check_range(number, low, high)
    return number


def _check_range(number, low, high):
    if low is not None and number < low or high is not None and number > high:
        span = "from %s to %s" % (low, high) if high is not None else "%s or more" % low
        raise Refused("is out of range", "give a number %s" % span)


def to_text(value, pattern=None, what=None, max_length=None, empty=True):
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise Refused("is not text", "give %s" % (what or "one line of text"))
    text = str(value)
    if not text and empty:
        return text
    if CONTROL.search(text):
        raise Refused("holds a line break or another control character", "give %s" % (what or "one line of text"))
    if pattern is not None and not pattern.match(text) or max_length is not None and len(text) > max_length:
        # "is not a DNS label", "fix: give a DNS label (lower-case ...)".
        raise Refused("is not %s" % re.split(r" \(|,? such as ", what)[0], "give %s" % what)
    return text


def to_list(value, element):
    if not isinstance(value, (list, tuple)):
        raise Refused("is not a list", "give a list, e.g. -e '{\"NAME\": [...]}' on the command line")
    return [element(item) for item in value]


def to_dict(value):
    if not isinstance(value, dict):
        raise Refused("is not a mapping", "give a mapping, e.g. -e '{\"NAME\": {...}}' on the command line")
    return dict(value)


# --------------------------------------------------------------- the table

def _choice(*choices):
    def convert(value):
        if value not in choices:
            raise Refused("is not one of %s" % ", ".join(choices), "give one of %s" % ", ".join(choices))
        return value
    return convert


def _bool(value):
    return to_bool(value)


def _count(low=0, high=None):
    return lambda value: to_int(value, low, high)


def _number(low=0, high=None):
    return lambda value: to_float(value, low, high)


def _fraction(value):
    """A fraction strictly between 0 and 1 (0.15: 15%): at 0 every run
    would count as degraded, at 1 none."""
    number = to_float(value)
    if not 0 < number < 1:
        raise Refused("is out of range", "give a fraction above 0 and below 1, such as 0.15 for 15%")
    return number


def _text(pattern=None, what=None, max_length=None, empty=True):
    return lambda value: to_text(value, pattern, what, max_length, empty)


def _nccl_overrides(value):
    overrides = to_dict(value)
    refused = [error for error in (override_error(name, item) for name, item in overrides.items()) if error]
    if refused:
        raise Refused("; ".join(refused), "name NCCL variables only (NCCL_DEBUG, NCCL_IB_HCA, ...), with one-line "
                                          "values of at most %d characters (NCCL_IB_TC a number of 0 to 255); a "
                                          "null value removes a detected one" % OVERRIDE_MAX_LENGTH)
    return dict((name, None if item is None else str(item)) for name, item in overrides.items())


def _scalar_map(value):
    """A mapping of one-line names to scalars (a string must be one line)."""
    mapping = to_dict(value)
    for key, item in mapping.items():
        to_text(key, what="one-line names as keys")
        if isinstance(item, str) or not isinstance(item, (bool, int, float, type(None))):
            to_text(item, what="one-line text, a number or a boolean as each value")
    return mapping


def _ipam_map(value):
    """Network name to a CIDR range, or to an IPAM configuration (a mapping)
    that the sriov role passes on as it is."""
    mapping = to_dict(value)
    for key, item in mapping.items():
        to_text(key, what="network names as keys")
        if not isinstance(item, dict):
            to_text(item, what="a CIDR range such as 192.168.100.0/24, or an IPAM configuration, as each value")
    return mapping


def _node_selector(value):
    """A label selector in kubectl's syntax; the API server matches it."""
    text = to_text(value)
    try:
        parse_selector(text)
    except ValueError as error:
        raise Refused("is not a label selector: %s" % error, "give a label selector as kubectl get nodes -l takes "
                      "it, e.g. nvidia.com/gpu.present=true or feature.node.kubernetes.io/rdma.capable=true")
    return text


def _label_map(value):
    mapping = to_dict(value)
    for key, item in mapping.items():
        to_text(key, LABEL_KEY, "a label key such as example.com/name")
        to_text(item, LABEL_VALUE, "a label value (at most 63 letters, digits, '-', '_', '.')")
    return mapping


def _image(value):
    text = to_text(value, what="an image reference such as registry.example.com/team/image:tag", empty=False)
    parsed = parse_image_reference(text)
    if not parsed["valid"]:
        raise Refused("is not an image reference: %s" % parsed["error"],
                      "give an image reference such as registry.example.com/team/image:tag")
    return text


def _dict_list(value):
    return to_list(value, to_dict)


NIC_FIELDS = ("name", "resource", "pf", "netdev")
_INTERFACE = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,14}$")
_RESOURCE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _nic(value):
    """One RDMA NIC: its network's name and the extended resource of its
    virtual functions (both required), the physical function and the name
    inside the pod."""
    nic = to_dict(value)
    example = "{name: eno5np0-network, resource: openshift.io/eno5np0rdma, pf: eno5np0, netdev: net1}"
    unknown = sorted(set(nic) - set(NIC_FIELDS))
    if unknown:
        raise Refused("entry %r has %s, which a NIC does not (it has %s)" % (
            nic.get("name"), ", ".join(unknown), ", ".join(NIC_FIELDS)), "write each NIC as %s" % example)
    for field in ("name", "resource"):
        if not nic.get(field):
            raise Refused("entry %r has no %s" % (nic.get("name"), field), "write each NIC as %s" % example)
    try:
        to_text(nic["name"], DNS_SUBDOMAIN, "a network name", 253, empty=False)
        to_text(nic["resource"], _RESOURCE, "a resource name", 253, empty=False)
        for field in ("pf", "netdev"):
            if nic.get(field) is not None:
                to_text(nic[field], _INTERFACE, "an interface name", 15)
    except Refused as refused:
        raise Refused("entry %r: %s" % (nic.get("name"), refused.problem),
                      "write each NIC as %s" % example)
    return nic


def _nic_list(value):
    return to_list(value, _nic)


TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
TOLERATION_OPERATORS = ("Exists", "Equal")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _toleration(value):
    """A pod toleration as the API server takes it, refused here before any
    object is made (the API server's 422 names no variable)."""
    toleration = to_dict(value)
    fix = ("give tolerations as {key, operator: Exists or Equal, value, effect: NoSchedule, PreferNoSchedule or "
           "NoExecute}, e.g. {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}")
    unknown = sorted(set(toleration) - set(TOLERATION_FIELDS))
    if unknown:
        raise Refused("has a toleration with unknown field(s) %s" % ", ".join(map(str, unknown)), fix)
    operator = toleration.get("operator", "Equal")
    if operator not in TOLERATION_OPERATORS:
        raise Refused("has a toleration whose operator %r is not Exists or Equal" % (operator,), fix)
    effect = toleration.get("effect", "")
    if effect not in ("",) + TOLERATION_EFFECTS:
        raise Refused("has a toleration whose effect %r is not NoSchedule, PreferNoSchedule or NoExecute"
                      % (effect,), fix)
    key = toleration.get("key", "")
    if key:
        to_text(key, LABEL_KEY, "a taint key such as nvidia.com/gpu as each toleration's key")
    elif operator != "Exists":
        raise Refused("has a toleration without a key whose operator is not Exists", fix)
    if operator == "Exists" and toleration.get("value") not in (None, ""):
        raise Refused("has a toleration with operator Exists and a value", fix)
    if toleration.get("value") not in (None, ""):
        to_text(toleration["value"], LABEL_VALUE, "a label value (at most 63 letters, digits, '-', '_', '.') as "
                                                  "each toleration's value")
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None:
        if effect != "NoExecute":
            raise Refused("has a toleration with tolerationSeconds whose effect is not NoExecute", fix)
        to_int(seconds, 0)
    return toleration


NAME = _text(DNS_LABEL, "a DNS label (lower-case letters, digits, '-'; at most 63)", 63, empty=False)
SUBDOMAIN = _text(DNS_SUBDOMAIN, "a DNS subdomain (lower-case letters, digits, '-', '.'; at most 253)", 253)
IMAGE_REFERENCE = _image
SIZE_TEXT = _text(SIZE, "a Kubernetes quantity with its unit, such as 100Gi", empty=False)
PORT = _count(*PORT_RANGE)
SECONDS = _count(1)
ONE_LINE = _text()
_WORKSPACE_PATH = re.compile(r"^(?!/)(?!.*\.\.)[A-Za-z0-9._/-]+$")
_WORKSPACE_PATH_WHAT = "a relative path inside the workspace (letters, digits, '.', '_', '-', '/'; no '..')"
WORKSPACE_PATH = _text(_WORKSPACE_PATH, _WORKSPACE_PATH_WHAT, empty=False)

# The variables a user sets, each with its conversion. A variable that no
# role has defined yet and no -e gives is simply not checked.
SETTINGS = {
    # cluster role: what every role reads
    "cluster_name": _text(DNS_SUBDOMAIN, "a name of lower-case letters, digits, '-' and '.'", 253, empty=False),
    "cluster_kubeconfig": ONE_LINE,
    "cluster_context": ONE_LINE,
    "cluster_platform": _choice("openshift", "kubernetes"),
    "cluster_namespace": NAME,
    "cluster_app_name": _text(DNS_LABEL, "a DNS label of at most 52 characters (pod names add -N)", 52, empty=False),
    "cluster_gpu_nodes": lambda value: to_list(value, SUBDOMAIN),
    "cluster_gpu_node_selector": _node_selector,
    "cluster_gpu_nodes_exclude": lambda value: to_list(value, SUBDOMAIN),
    "replicas": _count(0),
    "cluster_gpus_per_node": _count(1),
    "cluster_network_mode": _choice("rdma", "tcp"),
    "cluster_host_network": _bool,
    "cluster_rdma_nics": _nic_list,
    "cluster_rdma_network_type": _choice("sriov", "host-device", "macvlan", "ipoib"),
    "cluster_rdma_mtu": _count(*MTU_RANGE),
    "cluster_rdma_shared_resource": _text(LABEL_KEY, "a resource name such as rdma/rdma_shared_device_a"),
    "cluster_security_mode": _choice("privileged", "ipc_lock"),
    "cluster_storage_mode": _choice("per-pod", "shared"),
    "cluster_storage_class": SUBDOMAIN,
    "cluster_storage_size": SIZE_TEXT,
    "cluster_shared_claim_name": SUBDOMAIN,
    "cluster_shm_size": SIZE_TEXT,
    "cluster_pod_cpu": _text(CPU, "a CPU quantity such as 32 or 500m", empty=False),
    "cluster_pod_memory": SIZE_TEXT,
    "cluster_image": IMAGE_REFERENCE,
    "cluster_image_pull_policy": _choice("Always", "IfNotPresent", "Never"),
    "cluster_node_tolerations": lambda value: to_list(value, _toleration),
    "cluster_pod_ready_timeout": SECONDS,
    "cluster_api_timeout": _count(1, 600),
    "cluster_lock_wait": _count(0, 3600),
    "cluster_verification_max_age": _count(0, 3650),
    "cluster_nccl_env_overrides": _nccl_overrides,
    "cluster_offline": _bool,
    "cluster_nodes_must_take_pods": _bool,
    "cluster_nodes_before_sriov": _bool,
    "cluster_allow_system_namespace": _bool,
    "cluster_allow_existing_namespace": _bool,
    "cluster_allow_unknown_settings": _bool,
    "cluster_check_nodes": _bool,
    # sriov
    "sriov_operator_namespace": NAME,
    "sriov_create_operator_namespace": _bool,
    "sriov_create_policies": _bool,
    "sriov_device_type": _choice("netdevice", "vfio-pci"),
    "sriov_is_rdma": _bool,
    # The sriov role names the fix for a PCI id YAML read as a number.
    "sriov_nic_vendor": ONE_LINE,
    "sriov_nic_device_id": ONE_LINE,
    "sriov_node_label": _text(LABEL_KEY, "a label key such as example.com/sriov"),
    "sriov_node_selector": _label_map,
    "sriov_num_vfs": _count(1, 256),
    "sriov_ipam_ranges": _ipam_map,
    "sriov_sync_timeout": _count(0),
    "sriov_attachment_timeout": _count(0),
    # image
    "image_build": _bool,
    "image_build_retry": _bool,
    "image_build_timeout": SECONDS,
    "image_build_poll_seconds": SECONDS,
    "image_build_resources": to_dict,
    "image_base": IMAGE_REFERENCE,
    "image_registry": _text(re.compile(r"^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*$"), "a registry such as "
                            "registry.example.com/team"),
    # The image role checks the build's pins (exact versions, the package of
    # a CUDA major version) when it builds; unused otherwise.
    "image_nccl_package": ONE_LINE,
    "image_nccl_version": ONE_LINE,
    "image_torch_version": ONE_LINE,
    "image_torchtitan_version": ONE_LINE,
    # statefulset
    "statefulset_rendezvous_port": PORT,
    "statefulset_require_verified_nodes": _bool,
    # autodetect
    "autodetect_require_agreement": _bool,
    # verify
    "verify_node_checks": _bool,
    "verify_pod_checks": _bool,
    "verify_bench": _bool,
    "verify_bench_pairwise": _bool,
    "verify_bench_single_pod": _bool,
    "verify_label_nodes": _bool,
    "verify_require_gpudirect": _bool,
    "verify_fail_on": _choice("fail", "warn", "never"),
    "verify_probe_image": IMAGE_REFERENCE,
    "verify_probe_parallel": _count(1),
    "verify_probe_timeout": SECONDS,
    "verify_bench_port": PORT,
    "verify_bench_timeout": SECONDS,
    "verify_bench_nproc_per_pod": _count(1),
    # The sizes, collectives and gates: the bench_settings filter checks them
    # together (a gate must lie within the sizes measured).
    "verify_bench_min_size": ONE_LINE,
    "verify_bench_max_size": ONE_LINE,
    "verify_bench_line_rate_from_size": ONE_LINE,
    "verify_bench_line_rate_fraction": _number(0, 1),
    "verify_bench_nic_line_rate_gbps": _number(0),
    "verify_min_link_rate_gbps": _number(0),
    "verify_bench_ops": lambda value: to_list(value, ONE_LINE),
    "verify_bench_extra_args": lambda value: to_list(value, ONE_LINE),
    "verify_bench_min_busbw": lambda value: to_list(value, ONE_LINE),
    "verify_bench_master_addr": ONE_LINE,
    "verify_report_dir": ONE_LINE,
    # soak
    "soak_runs": _count(1, SOAK_RUNS_MAX),
    "soak_threshold": _fraction,
    "soak_workload": _choice("bench", "train"),
    "soak_fail_on_degraded": _bool,
    "soak_recreate_pods": _bool,
    "soak_node_counters": _bool,
    "soak_baseline": ONE_LINE,
    "soak_save_baseline": ONE_LINE,
    "soak_report_dir": _text(re.compile(r"^.+$"), "a directory path", empty=False),
    # train
    "train_start_mode": _choice("exec", "job", "pytorchjob", "volcano", "jobset", "trainjob"),
    "train_workload": _choice("torchtitan", "script", "demo"),
    "train_run_id": _text(re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"),
                          "a run id of letters, digits, '.', '_' and '-' (at most 63)"),
    "train_steps": _count(1),
    "train_timeout": SECONDS,
    "train_queue_timeout": SECONDS,
    "train_poll_interval": SECONDS,
    "train_progress_interval": SECONDS,
    "train_job_resolve_timeout": SECONDS,
    "train_job_ttl": _count(0),
    "train_nproc_per_pod": _count(1),
    "train_rdzv_port": PORT,
    "train_rdzv_host": ONE_LINE,
    "train_local_addr": ONE_LINE,
    "train_run_dir": WORKSPACE_PATH,
    "train_logs_dir": ONE_LINE,
    # Empty unless train_workload is script (the train role says so).
    "train_script": _text(_WORKSPACE_PATH, _WORKSPACE_PATH_WHAT),
    "train_config": ONE_LINE,
    "train_default_config": ONE_LINE,
    "train_baseline": ONE_LINE,
    "train_volcano_queue": NAME,
    "train_queue_name": _text(DNS_LABEL, "a LocalQueue name (lower-case letters, digits, '-'; at most 63)", 63),
    "train_args": lambda value: to_list(value, ONE_LINE),
    "train_overrides": _scalar_map,
    "train_compile": _bool,
    "train_float8": _bool,
    "train_stop": _bool,
    "train_stop_running": _bool,
    # deploy.yml, scale.yml and teardown.yml: -e stop_running=true (the
    # train role reads it as train_stop_running).
    "stop_running": _bool,
    # train.yml: -e stop=true (read as train_stop).
    "stop": _bool,
    "train_local_batch_size": _count(1),
    "train_seq_len": _count(1),
    "train_dp_shard": _count(-1),
    "train_dp_replicate": _count(1),
    "train_tp": _count(1),
    "train_pp": _count(1),
    "train_cp": _count(1),
    "train_dataset": ONE_LINE,
    "train_dataset_path": ONE_LINE,
    "train_hf_assets_path": ONE_LINE,
    # playbooks/discover.yml
    "discover_output": _text(re.compile(r"^.+$"), "a file path", empty=False),
    "discover_probe_nodes": _bool,
    # teardown
    "purge_workspaces": _bool,
    "purge_image": _bool,
    "purge_sriov_policies": _bool,
}


# ------------------------------------------------------ across variables

# TorchTitan's own settings (the train role's shortcuts into its JobConfig,
# and train_overrides), which no other workload reads.
TORCHTITAN_SETTINGS = ("train_overrides", "train_config", "train_compile", "train_float8", "train_dp_shard",
                       "train_dp_replicate", "train_tp", "train_pp", "train_cp", "train_hf_assets_path",
                       "train_dataset", "train_dataset_path")
# The shortcuts the demo (files/train/tiny_lm.py) takes too, as its own
# arguments (train_jobs.launch_args).
DEMO_SHORTCUTS = ("train_steps", "train_local_batch_size", "train_seq_len")


def _is_set(name, value):
    return value not in (None, "", {}, []) and not (name == "train_float8" and value is False)


def _workload_conflicts(values):
    """One (variable, value, problem, fix) per training setting the chosen
    workload does not read: each names only its own rule."""
    workload = values.get("train_workload")
    if workload not in ("script", "demo"):
        return []
    found = []
    if workload == "script" and not values.get("train_script"):
        found.append(("train_script", values.get("train_script"), "train_script is empty, and train_workload is "
                      "script, which runs it", "set train_script to the script's path in the "
                      "workspace (-e train_script=path/to/train.py)"))
    unread = TORCHTITAN_SETTINGS + (DEMO_SHORTCUTS if workload == "script" else ())
    own = "its own arguments as train_args (-e '{\"train_args\": [\"--steps\", \"100\"]}')" if workload == "demo" \
        else "the script's own arguments as train_args (-e '{\"train_args\": [...]}')"
    for name in unread:
        if _is_set(name, values.get(name)):
            found.append((name, values[name], "%s is a TorchTitan setting and train_workload is %s, which does not "
                          "read it" % (name, workload), "leave %s out and give %s%s" % (
                              name, own, "; the demo takes train_steps, train_local_batch_size and train_seq_len"
                              if workload == "demo" else "")))
    return found


def _node_list_conflicts(values):
    """The GPU nodes are named (cluster_gpu_nodes) or chosen by label
    (cluster_gpu_node_selector, less cluster_gpu_nodes_exclude): one of the
    two. A selector's count is known once the cluster role has listed the
    nodes, so replicas is checked against it there."""
    nodes, selector = values.get("cluster_gpu_nodes") or [], values.get("cluster_gpu_node_selector") or ""
    exclude = values.get("cluster_gpu_nodes_exclude") or []
    found = []
    if "cluster_gpu_nodes" not in values:
        return found
    # A selector refused (or not seen yet: a role default) is not "none".
    selector_known = "cluster_gpu_node_selector" in values
    if nodes and selector:
        found.append(("cluster_gpu_nodes", nodes, "cluster_gpu_nodes names nodes and cluster_gpu_node_selector '%s' "
                      "chooses them by label: give one of the two" % selector,
                      "set cluster_gpu_nodes=[] to choose by label, or cluster_gpu_node_selector='' to name them"))
    elif not nodes and not selector and selector_known:
        found.append(("cluster_gpu_nodes", nodes, "cluster_gpu_nodes is empty and so is cluster_gpu_node_selector: "
                      "no GPU node is given", "name the nodes in cluster_gpu_nodes, or choose them by label with "
                      "cluster_gpu_node_selector (e.g. nvidia.com/gpu.present=true)"))
    elif len(set(nodes)) != len(nodes):
        found.append(("cluster_gpu_nodes", nodes, "cluster_gpu_nodes must name each node once",
                      "list each GPU node once in cluster_gpu_nodes"))
    if nodes and exclude:
        found.append(("cluster_gpu_nodes_exclude", exclude, "cluster_gpu_nodes_exclude leaves nodes out of what "
                      "cluster_gpu_node_selector chooses, and the nodes are named in cluster_gpu_nodes instead",
                      "take the nodes out of cluster_gpu_nodes and set cluster_gpu_nodes_exclude=[]"))
    if nodes and "replicas" in values and values["replicas"] > len(nodes):
        found.append(("replicas", values["replicas"], "replicas=%d but only %d cluster_gpu_nodes are named (one pod "
                      "per node)" % (values["replicas"], len(nodes)), "lower replicas or add nodes to cluster_gpu_nodes"))
    return found


def _across(values):
    """(variables, value shown, problem, fix) for settings that contradict
    each other; each needs every variable it names to have converted."""
    def has(*names):
        return all(name in values for name in names)

    found = []
    found.extend(_node_list_conflicts(values))
    if has("cluster_network_mode", "cluster_host_network", "cluster_rdma_nics"):
        mode, host, nics = values["cluster_network_mode"], values["cluster_host_network"], values["cluster_rdma_nics"]
        if mode == "rdma" and not host and not nics:
            found.append(("cluster_rdma_nics", nics, "cluster_rdma_nics is empty, but cluster_network_mode=rdma needs "
                          "cluster_rdma_nics (the SR-IOV NICs each pod gets) unless cluster_host_network is true",
                          "set cluster_rdma_nics, or cluster_network_mode=tcp"))
        if mode == "tcp" and nics:
            found.append(("cluster_rdma_nics", [nic.get("name") for nic in nics], "cluster_rdma_nics lists RDMA "
                          "NICs but cluster_network_mode=tcp attaches none", "set cluster_rdma_nics=[] or "
                          "cluster_network_mode=rdma"))
        if mode == "rdma" and host and nics:
            found.append(("cluster_host_network", True, "cluster_host_network is true: host networking gives the pods "
                          "the node's own NICs, so the SR-IOV NICs of cluster_rdma_nics would never be attached",
                          "set cluster_host_network=false, or cluster_rdma_nics=[] on clusters without SR-IOV"))
    found.extend(_workload_conflicts(values))
    if has("soak_runs") and values["soak_runs"] < 2 and not values.get("soak_baseline"):
        found.append(("soak_runs", values["soak_runs"], "soak_runs=1 leaves no other run to judge it against, and no "
                      "soak_baseline is given", "run at least 2 (-e soak_runs=N), or give soak_baseline (a baseline "
                      "saved by soak_save_baseline)"))
    if has("soak_workload", "verify_bench") and values["soak_workload"] == "bench" and not values["verify_bench"]:
        found.append(("soak_workload", "bench", "soak_workload=bench repeats the benchmark, which verify_bench=false "
                      "turns off", "set verify_bench=true, or soak_workload=train"))
    if has("cluster_namespace") and SYSTEM_NAMESPACES.match(values["cluster_namespace"]) \
            and not values.get("cluster_allow_system_namespace", False):
        found.append(("cluster_namespace", values["cluster_namespace"],
                      "cluster_namespace is a namespace of the platform itself",
                      "choose a namespace of the deployment's own, or set cluster_allow_system_namespace=true"))
    if has("cluster_namespace", "sriov_operator_namespace") \
            and values["cluster_namespace"] == values["sriov_operator_namespace"]:
        found.append(("cluster_namespace", values["cluster_namespace"], "cluster_namespace is the SR-IOV "
                      "operator's namespace (sriov_operator_namespace)", "choose a namespace of the deployment's own"))
    return found


# ------------------------------------------------------------------- names

# The roles' prefixes: a variable named so is meant for the collection.
ROLE_PREFIXES = ("cluster", "sriov", "image", "statefulset", "autodetect", "verify", "soak", "train", "purge")
_PREFIXED = re.compile(r"^(%s)_" % "|".join(ROLE_PREFIXES))
# Short names a playbook takes with -e, and the role variable each sets: a
# refusal names the one typed.
ALIASES = {"stop": "train_stop", "stop_running": "train_stop_running"}
DOCS = "docs/inventory.md"


def unknown_names(names, known, offered):
    """[(name, the nearest offered name or None)] for each of ``names`` that
    looks meant for the collection but is not one of its variables
    (``known``: everything the roles and playbooks define, their own facts
    included): a role's prefix (verify_bench_pairwse), or close to a short
    name the playbooks take (replica for replicas). ``offered``: the names
    a user sets, to suggest from."""
    offered = sorted(offered)
    short = [name for name in offered if not _PREFIXED.match(name)]
    found = []
    for name in sorted(set(names) - set(known)):
        if _PREFIXED.match(name):
            nearest = difflib.get_close_matches(name, offered, 1, 0.75)
        else:
            nearest = difflib.get_close_matches(name, short, 1, 0.8)
            if not nearest:
                continue
        found.append((name, nearest[0] if nearest else None))
    return found


def _name_errors(values, variables, names, collection, given):
    """Unknown names, and required settings that are not set."""
    errors = []
    if not values.get("cluster_allow_unknown_settings"):
        for name, nearest in unknown_names(names, collection["known"], collection["offered"]):
            where = "given with -e" if name in given else "set in the inventory or the play"
            problem = "%s (%s) is not a variable of mlinfra.multinode%s" % (
                name, where, "; did you mean %s?" % nearest if nearest else "")
            fix = "%s (%s lists every one), or set cluster_allow_unknown_settings=true to pass names the collection " \
                  "does not know" % ("write %s" % nearest if nearest else "correct the name", DOCS)
            # Its value is not the problem: not shown.
            errors.append(_error(name, variables.get(name), problem, fix, shown=False))
    for name in collection.get("required", ()):
        if name not in names or variables.get(name) is None:
            errors.append(_error(name, None, "%s is not set" % name, "set it in the inventory's group_vars (%s, ### %s)"
                                 % (DOCS, name), shown=False))
    return errors


# ------------------------------------------------------------------ entry

def _converted(variables):
    """(values, errors) of the known settings among ``variables``."""
    values, errors = {}, []
    for name in sorted(SETTINGS):
        if name not in variables:
            continue
        if variables[name] is None:
            # A role default of null: not set, and the role decides.
            values[name] = None
            continue
        try:
            values[name] = SETTINGS[name](variables[name])
        except Refused as refused:
            errors.append(_error(name, variables[name], "%s %s" % (name, refused.problem), refused.fix))
    return values, errors


def check_settings(variables, names=None, collection=None, given=()):
    """{"values": converted values by name, "errors": [{variable, value,
    problem, fix, message}]} for the known variables among ``variables``
    (a mapping of name to value as Ansible sees it), and for the settings
    it lacks that a role gives a literal default (``collection["defaults"]``):
    a role's defaults are seen only inside it, so the playbook's first check
    would otherwise not know them. The values then hold every setting as the
    roles will see it, converted once, for them to use.

    With ``collection`` ({"known", "offered", "required"}: the names the
    roles and playbooks define, those a user sets, and those that must be
    set), ``names`` (every variable name the play sees) are checked too:
    a name that looks meant for the collection but is not one of its
    variables is refused with the nearest one, and a required one that is
    missing is named. ``given``: the names given with -e."""
    values, errors = _converted(variables)
    for name, value, problem, fix in _across(values):
        errors.append(_error(name, value, problem, fix))
    # The roles' defaults the play cannot see yet join the values, converted,
    # but not the checks across settings: a default matters only where its
    # role runs, and the check its dependency on the cluster role runs there
    # sees it (site.yml's verify_bench=false is no contradiction of the
    # soak's default workload in a play that runs no soak).
    unseen = dict((name, value) for name, value in ((collection or {}).get("defaults") or {}).items()
                  if name not in variables)
    default_values, default_errors = _converted(unseen)
    values.update(default_values)
    errors += default_errors
    # -e stop=maybe is refused as stop, not as the train_stop it sets.
    refused = set(error["variable"] for error in errors)
    errors = [error for error in errors if not any(
        error["variable"] == target and alias in refused for alias, target in ALIASES.items())]
    if collection is not None:
        errors = _name_errors(values, variables, names if names is not None else list(variables), collection,
                              set(given)) + errors
    return {"values": values, "errors": errors}


def _error(name, value, problem, fix, shown=True):
    """One refusal; its message quotes the value unless ``shown`` is false
    (a misspelt name, a missing one: the value is not the problem)."""
    got = ""
    if shown:
        got = repr(value)
        got = " (got %s)" % (got if len(got) <= 80 else got[:77] + "...")
    return {"variable": name, "value": value, "problem": problem, "fix": fix,
            "message": "%s%s; fix: %s" % (problem, got, fix)}

# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The statefulset role's objects, built as data from the checked settings:
the namespace, the service account, the SCC and RBAC that let it run the
pods (OpenShift), the headless Service, the shared workspace claim and the
StatefulSet.

Every value from the inventory becomes the value of one field and the
objects are serialised once, by whoever applies or writes them: no value is
pasted into YAML text, so none can add a field (a storage class holding a
line break and ``volumeName: x`` is a class name the API server refuses, not
a second field of the claim).

``settings`` maps the variable names of the inventory (docs/inventory.md) to
their values, as the cluster role's checked_settings has checked them; the
booleans are read again here the way Ansible reads them, since a variable
reaches a role as it was given (``-e cluster_host_network=false`` is text).

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ..common.labels import parse_selector
from ..inventory_settings import setting_bool
from .node_choice import VERIFIED_LABEL
from ..cluster.ownership import owner_labels
from ..pod_runtime import CONFIG_MAPS, PROGRAM, PROGRAMS, RUNTIME, TRAIN_ASSETS, volume_items

# Where the image installs the in-pod code (files/Containerfile), and where
# the autodetect role's ConfigMaps are mounted over it.
PLUGINS_DIR = "/opt/mlinfra/plugins"
CODE_DIR = PLUGINS_DIR + "/module_utils"
BIN_DIR = "/opt/mlinfra/files/bin"
TRAIN_DIR = "/opt/mlinfra/files/train"
# A ConfigMap's files as executables (0755).
EXECUTABLE_MODE = 493


def workload_manifests(settings):
    """{"base": [objects], "claims": [the shared claim, or none],
    "statefulset": the StatefulSet}, in the order they are applied."""
    return {"base": base_objects(settings),
            "claims": [shared_claim(settings)] if settings["cluster_storage_mode"] == "shared" else [],
            "statefulset": statefulset(settings)}


def workload_labels(settings):
    return dict(owner_labels(settings["cluster_app_name"]), **{
        "app.kubernetes.io/name": settings["cluster_app_name"],
        "app.kubernetes.io/part-of": settings["cluster_name"]})


def _own_labels(settings):
    """The labels of the claims, which outlive a deployment of the cluster."""
    return dict(owner_labels(settings["cluster_app_name"]), **{"app.kubernetes.io/name": settings["cluster_app_name"]})


def _host_network(settings):
    return setting_bool(settings, "cluster_host_network")


def shared_claim_name(settings):
    return settings["cluster_shared_claim_name"] or settings["cluster_app_name"] + "-workspace"


# The names the pods' code ConfigMaps had before they were named for what
# they hold: teardown.yml removes them too, from a deployment made then.
FORMER_CODE_CONFIG_MAPS = ("autodetect-code", "autodetect-bin", "autodetect-train")


def probe_account_name(settings):
    """The verify role's probes' ServiceAccount (probe_manifests)."""
    return settings["cluster_app_name"] + "-probe"


def deployment_refs(settings):
    """Every object of the deployment's names that deploy.yml and
    verify-rdma.yml may have made, whatever the other settings were then
    (a deployment made with cluster_security_mode=ipc_lock still has its
    SCC after the inventory says privileged): what teardown.yml deletes
    once cluster_ownership has found it is the deployment's own. The
    claims and the training runs' objects are found by their labels."""
    namespace, app = settings["cluster_namespace"], settings["cluster_app_name"]
    rbac, admission = "rbac.authorization.k8s.io/v1", "admissionregistration.k8s.io/v1"
    scc_role = "%s-%s-scc" % (namespace, app)

    def ref(api_version, kind, name, namespaced=True):
        metadata = {"name": name, "namespace": namespace} if namespaced else {"name": name}
        return {"apiVersion": api_version, "kind": kind, "metadata": metadata}

    return ([ref("apps/v1", "StatefulSet", app), ref("v1", "Service", app + "-headless")]
            + [ref("v1", "ConfigMap", "%s-%s" % (app, suffix)) for suffix in CONFIG_MAPS + FORMER_CODE_CONFIG_MAPS]
            + [ref("v1", "ServiceAccount", app), ref(rbac, "RoleBinding", app + "-scc"),
               ref(rbac, "ClusterRole", scc_role, namespaced=False),
               ref("v1", "ServiceAccount", probe_account_name(settings)),
               ref(rbac, "RoleBinding", probe_account_name(settings) + "-scc"),
               ref("security.openshift.io/v1", "SecurityContextConstraints", ipc_lock_scc_name(settings),
                   namespaced=False),
               ref(admission, "ValidatingAdmissionPolicyBinding", host_path_policy_name(settings), namespaced=False),
               ref(admission, "ValidatingAdmissionPolicy", host_path_policy_name(settings), namespaced=False)])


def ipc_lock_scc_name(settings):
    return "%s-%s-ipc-lock" % (settings["cluster_namespace"], settings["cluster_app_name"])


def base_objects(settings):
    """Namespace, service account, SCC access (OpenShift) and the headless Service."""
    namespace, app = settings["cluster_namespace"], settings["cluster_app_name"]
    objects = [
        # Applied only while it does not exist: one made by someone else
        # (cluster_allow_existing_namespace) is not touched.
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": owner_labels(app)}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": app, "namespace": namespace, "labels": workload_labels(settings)}},
    ]
    if settings["cluster_platform"] == "openshift":
        if settings["cluster_security_mode"] == "ipc_lock":
            objects.append(ipc_lock_scc(settings))
            if _host_network(settings):
                objects.extend(host_path_policy(settings))
        objects.extend(scc_access(settings))
    objects.append(headless_service(settings))
    return objects


def ipc_lock_scc(settings):
    """OpenShift's restricted-v2 plus the IPC_LOCK capability that RDMA's
    memory registration needs (and, with the host network, that network,
    its ports and /dev/infiniband from the host): users from the
    namespace's range, every other capability dropped, the runtime's
    seccomp profile, no privilege escalation, restricted-v2's volumes.
    restricted-v2 differs only in allowing NET_BIND_SERVICE instead."""
    host = _host_network(settings)
    return {
        "apiVersion": "security.openshift.io/v1",
        "kind": "SecurityContextConstraints",
        "metadata": {"name": ipc_lock_scc_name(settings), "labels": workload_labels(settings)},
        # Required by the API. 0 sorts as restricted-v2's null does (an unset
        # priority counts as 0) and, unlike null, survives a client-side
        # `oc apply`, which drops null fields and is then refused.
        "priority": 0,
        "allowPrivilegedContainer": False,
        "allowPrivilegeEscalation": False,
        "allowedCapabilities": ["IPC_LOCK"],
        "defaultAddCapabilities": [],
        "requiredDropCapabilities": ["ALL"],
        "allowHostNetwork": host,
        "allowHostPorts": host,
        "allowHostDirVolumePlugin": host,
        "allowHostIPC": False,
        "allowHostPID": False,
        "readOnlyRootFilesystem": False,
        "runAsUser": {"type": "MustRunAsRange"},
        "seLinuxContext": {"type": "MustRunAs"},
        "fsGroup": {"type": "MustRunAs"},
        "supplementalGroups": {"type": "RunAsAny"},
        "seccompProfiles": ["runtime/default"],
        "volumes": ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                    "projected", "secret"] + (["hostPath"] if host else []),
        "users": [],
        "groups": [],
    }


def host_path_policy_name(settings):
    return "%s-%s-host-paths" % (settings["cluster_namespace"], settings["cluster_app_name"])


# The only directory of the host the pods mount (pod_volumes).
HOST_PATHS = ("/dev/infiniband",)


def host_path_policy(settings):
    """An SCC allows hostPath volumes or none, whatever their path: the
    IPC_LOCK SCC with the host network would let the deployment's account
    mount / itself. The API server's own admission (a ValidatingAdmissionPolicy,
    bound to the namespace) refuses a pod of that account that mounts any
    other directory of the host."""
    namespace, app = settings["cluster_namespace"], settings["cluster_app_name"]
    name = host_path_policy_name(settings)
    # Both names are DNS labels (checked_settings): safe inside a CEL string.
    allowed = ", ".join("'%s'" % path for path in HOST_PATHS)
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": name, "labels": workload_labels(settings)},
         "spec": {
             "failurePolicy": "Fail",
             "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                     "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
             "matchConditions": [{"name": "deployment-account",
                                  "expression": "object.spec.?serviceAccountName.orValue('default') == '%s'" % app}],
             "validations": [{
                 "expression": "object.spec.?volumes.orValue([]).all(v, !has(v.hostPath) || v.hostPath.path in [%s])"
                               % allowed,
                 "message": "pods of service account %s/%s may mount only %s from the host (mlinfra.multinode's "
                            "policy %s: its SCC allows the host network and hostPath volumes)"
                            % (namespace, app, ", ".join(HOST_PATHS), name)}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": name, "labels": workload_labels(settings)},
         "spec": {"policyName": name, "validationActions": ["Deny"],
                  "matchResources": {"namespaceSelector": {"matchLabels": {
                      "kubernetes.io/metadata.name": namespace}}}}},
    ]


def scc_access(settings):
    """A ClusterRole to use the pods' SCC (privileged, or the IPC_LOCK one),
    bound to the deployment's service account only."""
    namespace, app = settings["cluster_namespace"], settings["cluster_app_name"]
    role = "%s-%s-scc" % (namespace, app)
    scc = "privileged" if settings["cluster_security_mode"] == "privileged" else ipc_lock_scc_name(settings)
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": role, "labels": workload_labels(settings)},
         "rules": [{"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"],
                    "resourceNames": [scc], "verbs": ["use"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": app + "-scc", "namespace": namespace, "labels": workload_labels(settings)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": app, "namespace": namespace}]},
    ]


def headless_service(settings):
    """Headless: stable DNS names <app>-N.<app>-headless for the rendezvous,
    also while pods are not Ready yet (torchrun's rendezvous happens before
    that)."""
    app, port = settings["cluster_app_name"], int(settings["statefulset_rendezvous_port"])
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": app + "-headless", "namespace": settings["cluster_namespace"],
                     "labels": workload_labels(settings)},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": {"app.kubernetes.io/name": app},
                 "ports": [{"name": "rendezvous", "port": port, "targetPort": port, "protocol": "TCP"}]},
    }


def _claim_spec(settings, access_mode):
    spec = {"accessModes": [access_mode]}
    if settings["cluster_storage_class"]:
        spec["storageClassName"] = settings["cluster_storage_class"]
    spec["resources"] = {"requests": {"storage": settings["cluster_storage_size"]}}
    return spec


def shared_claim(settings):
    """The one workspace every pod mounts (cluster_storage_mode: shared)."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": shared_claim_name(settings), "namespace": settings["cluster_namespace"],
                         "labels": _own_labels(settings)},
            "spec": _claim_spec(settings, "ReadWriteMany")}


def _rdma_pod(settings):
    """The pod gets SR-IOV NICs of its own (not with host networking, where
    it uses the node's)."""
    return settings["cluster_network_mode"] == "rdma" and not _host_network(settings)


def pod_resources(settings):
    """GPUs, a VF of each RDMA NIC and the shared RDMA device, each as
    requests and limits alike."""
    resources = {"nvidia.com/gpu": int(settings["cluster_gpus_per_node"])}
    if _rdma_pod(settings):
        for nic in settings["cluster_rdma_nics"]:
            resources[nic["resource"]] = 1
    if settings["cluster_network_mode"] == "rdma" and settings["cluster_rdma_shared_resource"]:
        resources[settings["cluster_rdma_shared_resource"]] = 1
    return resources


def pod_networks(settings):
    """Multus: one attachment per RDMA NIC, named inside the pod as the
    inventory says (netdev, such as net1..net4)."""
    return [dict({"name": nic["name"]}, **({"interface": nic["netdev"]} if nic.get("netdev") else {}))
            for nic in settings["cluster_rdma_nics"]]


def autodetect_args(settings):
    """The init container's arguments. User values win over detection:
    passed on as --set=NAME=VALUE, in the order of their names; a null value
    leaves the variable out (--unset=NAME)."""
    run_dir = settings["statefulset_run_dir"]
    args = ["--mode", settings["cluster_network_mode"], "--output", run_dir + "/nccl.env",
            "--json", run_dir + "/nccl.json"]
    overrides = settings["cluster_nccl_env_overrides"] or {}
    for name in sorted(overrides):
        value = overrides[name]
        args.append("--unset=%s" % name if value is None else "--set=%s=%s" % (name, value))
    return args


def _mount(name, path, read_only=False):
    return dict({"name": name, "mountPath": path}, **({"readOnly": True} if read_only else {}))


def _env(name, value):
    return {"name": name, "value": value}


def _field_env(name, path):
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def code_mounts():
    """The pod runtime and the program, where the image has them too."""
    return [_mount(RUNTIME, CODE_DIR, True), _mount(PROGRAMS, BIN_DIR, True)]


def code_volumes(settings):
    """The volumes of code_mounts: the autodetect role's ConfigMaps, the
    runtime's keys put back at their paths below module_utils."""
    app = settings["cluster_app_name"]
    return [
        {"name": RUNTIME, "configMap": {"name": "%s-%s" % (app, RUNTIME),
                                        "items": volume_items(settings["pod_runtime_keys"])}},
        {"name": PROGRAMS, "configMap": {"name": "%s-%s" % (app, PROGRAMS), "defaultMode": EXECUTABLE_MODE}},
    ]


def autodetect_container(settings):
    run_dir = settings["statefulset_run_dir"]
    mounts = [_mount("mlinfra-run", run_dir)] + code_mounts()
    if _host_network(settings):
        mounts.append(_mount("dev-infiniband", "/dev/infiniband"))
    return {
        "name": "autodetect",
        "image": settings["cluster_image"],
        "imagePullPolicy": settings["cluster_image_pull_policy"],
        "command": ["python3", BIN_DIR + "/" + PROGRAM, "autodetect"],
        "args": autodetect_args(settings),
        "env": [_env("MLINFRA_PLUGINS_DIR", PLUGINS_DIR), _env("MLINFRA_RUN_DIR", run_dir)],
        # It reads /proc and /sys (and lists /dev/infiniband) and writes
        # nccl.env to the run directory: no privilege, no capability.
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }


def trainer_container(settings):
    namespace, app = settings["cluster_namespace"], settings["cluster_app_name"]
    run_dir, port = settings["statefulset_run_dir"], int(settings["statefulset_rendezvous_port"])
    resources = pod_resources(settings)
    requests = dict(resources, cpu=str(settings["cluster_pod_cpu"]), memory=settings["cluster_pod_memory"])
    if settings["cluster_security_mode"] == "privileged":
        security = {"privileged": True}
    else:
        # What the ipc_lock SCC admits (and Kubernetes' restricted Pod
        # Security Standard asks, but for the added capability): memory
        # locking for RDMA, nothing else.
        security = {"allowPrivilegeEscalation": False, "capabilities": {"add": ["IPC_LOCK"], "drop": ["ALL"]},
                    "seccompProfile": {"type": "RuntimeDefault"}}
    mounts = [_mount("workspace", "/workspace"), _mount("shm", "/dev/shm"), _mount("mlinfra-run", run_dir)] \
        + code_mounts() + [_mount(TRAIN_ASSETS, TRAIN_DIR, True)]
    if _host_network(settings):
        mounts.append(_mount("dev-infiniband", "/dev/infiniband"))
    return {
        "name": "trainer",
        "image": settings["cluster_image"],
        "imagePullPolicy": settings["cluster_image_pull_policy"],
        "workingDir": "/workspace",
        # An idle development pod: training is started into it by exec, by
        # the train role or by hand.
        "command": ["/bin/bash", "-c", "trap 'exit 0' TERM; sleep infinity & wait"],
        "env": [
            _field_env("POD_NAME", "metadata.name"),
            _field_env("NODE_NAME", "spec.nodeName"),
            _env("MASTER_ADDR", "%s-0.%s-headless.%s.svc.cluster.local" % (app, app, namespace)),
            _env("MASTER_PORT", str(port)),
            _env("MLINFRA_TRANSPORT", settings["cluster_network_mode"]),
            _env("MLINFRA_PLUGINS_DIR", PLUGINS_DIR),
            # Where the autodetect init container left nccl.env and nccl.json
            # (the autodetect role reads nccl.json back from every pod).
            _env("MLINFRA_RUN_DIR", run_dir),
            # Every bash started in the pod (oc exec/rsh, the launcher) reads
            # the environment the autodetect init container wrote.
            _env("BASH_ENV", run_dir + "/nccl.env"),
            _env("HF_HOME", "/workspace/.cache/huggingface"),
            _env("TORCH_HOME", "/workspace/.cache/torch"),
        ],
        "ports": [{"name": "rendezvous", "containerPort": port, "protocol": "TCP"}],
        "resources": {"requests": requests, "limits": dict(resources)},
        "securityContext": security,
        "readinessProbe": {"exec": {"command": ["test", "-s", run_dir + "/nccl.env"]}, "periodSeconds": 10},
        "volumeMounts": mounts,
    }


def pod_volumes(settings):
    app = settings["cluster_app_name"]
    volumes = [
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": settings["cluster_shm_size"]}},
        {"name": "mlinfra-run", "emptyDir": {}},
    ] + code_volumes(settings) + [{"name": TRAIN_ASSETS, "configMap": {"name": "%s-%s" % (app, TRAIN_ASSETS)}}]
    if _host_network(settings):
        volumes.append({"name": "dev-infiniband", "hostPath": {"path": HOST_PATHS[0]}})
    if settings["cluster_storage_mode"] == "shared":
        volumes.append({"name": "workspace", "persistentVolumeClaim": {"claimName": shared_claim_name(settings)}})
    return volumes


def node_affinity(settings):
    if settings["cluster_gpu_nodes"] or not settings.get("cluster_gpu_node_selector"):
        expressions = [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(settings["cluster_gpu_nodes"])}]
    else:
        # Written without a cluster (render.yml): the nodes are not chosen
        # yet, so the selector itself selects them. A deployment uses the
        # nodes the cluster role chose.
        expressions = parse_selector(settings["cluster_gpu_node_selector"])
    if setting_bool(settings, "statefulset_require_verified_nodes"):
        # Only nodes verify-rdma.yml -e verify_label_nodes=true passed.
        expressions.append({"key": VERIFIED_LABEL, "operator": "In", "values": ["true"]})
    else:
        # Never a node it failed; one it has not checked is taken. The
        # cluster role's node check (node_choice) counts the same nodes.
        expressions.append({"key": VERIFIED_LABEL, "operator": "NotIn", "values": ["false"]})
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": expressions}]}}


def pod_template(settings):
    app = settings["cluster_app_name"]
    metadata = {"labels": workload_labels(settings)}
    if _rdma_pod(settings):
        metadata["annotations"] = {"k8s.v1.cni.cncf.io/networks": json.dumps(pod_networks(settings))}
    spec = {
        "serviceAccountName": app,
        # Training is started by exec from outside; nothing in the pod calls
        # the API, so no token is mounted for a process there to use.
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 30,
    }
    if _host_network(settings):
        spec.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    spec.update({
        "affinity": {
            "nodeAffinity": node_affinity(settings),
            # One pod per node: each pod is a whole node of the job.
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname",
                 "labelSelector": {"matchLabels": {"app.kubernetes.io/name": app}}}]},
        },
        # A plain copy: copy.deepcopy of the lazy containers a filter gets
        # from Ansible copies their templar (and ansible-core warns).
        "tolerations": json.loads(json.dumps(list(settings["cluster_node_tolerations"]))),
        "initContainers": [autodetect_container(settings)],
        "containers": [trainer_container(settings)],
        "volumes": pod_volumes(settings),
    })
    return {"metadata": metadata, "spec": spec}


def statefulset(settings):
    app = settings["cluster_app_name"]
    spec = {
        "replicas": int(settings["replicas"]),
        "serviceName": app + "-headless",
        # All pods start together: a training job needs every rank anyway.
        "podManagementPolicy": "Parallel",
        # Scaling down (even to 0) or deleting the StatefulSet keeps each
        # pod's workspace; teardown.yml deletes the claims only when asked by
        # name.
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
        "selector": {"matchLabels": {"app.kubernetes.io/name": app}},
        "template": pod_template(settings),
    }
    if settings["cluster_storage_mode"] != "shared":
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "workspace", "labels": _own_labels(settings)},
                                         "spec": _claim_spec(settings, "ReadWriteOnce")}]
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": app, "namespace": settings["cluster_namespace"],
                         "labels": workload_labels(settings)},
            "spec": spec}


# --- what a live StatefulSet cannot take -------------------------------------

# Kubernetes refuses (422) an update of a StatefulSet's claim templates; these
# settings shape them.
_CLAIM_SETTINGS = (
    ("cluster_storage_mode", lambda templates: "per-pod" if templates else "shared"),
    ("cluster_storage_class", lambda templates: (templates[0]["spec"].get("storageClassName") or "") if templates else None),
    ("cluster_storage_size", lambda templates: str(((templates[0]["spec"].get("resources") or {}).get("requests") or {})
                                                   .get("storage", "")) if templates else None),
)


# What each claim setting is of a claim, for the message.
_CLAIM_PROPERTY = {"cluster_storage_class": "class", "cluster_storage_size": "size"}


def _workspace_templates(statefulset):
    return [template for template in (statefulset.get("spec") or {}).get("volumeClaimTemplates") or []
            if (template.get("metadata") or {}).get("name") == "workspace"]


def unchangeable_settings(live, wanted):
    """The settings whose change a live StatefulSet cannot take, as
    [{variable, live, wanted, message}]: the deployed one (``live``, as the
    API returns it) against the one these settings build (``wanted``).
    Empty when the update can be applied. The message names the variable,
    both values and the fix."""
    live_templates, wanted_templates = _workspace_templates(live), _workspace_templates(wanted)
    meta = live.get("metadata") or {}
    found = []
    for variable, read in _CLAIM_SETTINGS:
        deployed, asked = read(live_templates), read(wanted_templates)
        if deployed is None or asked is None or deployed == asked:
            continue
        if variable == "cluster_storage_mode":
            # The other mode's claims have other names: new ones are made.
            other_way = "or run teardown.yml (it keeps the workspace claims) and then deploy.yml"
        else:
            # A teardown keeps the claims, and the next deploy takes them
            # again as they are: only new claims have another class or size.
            other_way = ("or, for new claims, copy what the workspaces hold elsewhere, run teardown.yml -e "
                         "purge_workspaces=true (it deletes the claims and their data) and then deploy.yml; a "
                         "teardown that keeps the claims keeps their %s" % _CLAIM_PROPERTY[variable])
        found.append({
            "variable": variable, "live": deployed, "wanted": asked,
            "message": "%s=%r, but the StatefulSet %s/%s was deployed with %s=%r, and Kubernetes does not change "
                       "the workspace claims of a live StatefulSet; fix: deploy with %s=%r, %s"
                       % (variable, asked, meta.get("namespace"), meta.get("name"), variable, deployed,
                          variable, deployed, other_way),
        })
        if variable == "cluster_storage_mode":
            break  # the class and size of a template that is not there say nothing more
    return found

"""The statefulset role's objects (plugins/module_utils/workload/statefulset_manifests.py),
built from the settings of the real inventories: what each setting changes,
and that no value, however hostile, adds a field (it once did, when the
objects were YAML text from a template)."""

import json

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import Refused
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.probe_manifests import probe_manifests
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.statefulset_manifests import (
    FORMER_CODE_CONFIG_MAPS, deployment_refs, unchangeable_settings, workload_manifests)

from manifest_checks import HOSTILE, inventory_settings, key_paths, paths_holding, round_trip


def build(inventory="local", **changes):
    return workload_manifests(inventory_settings(inventory, **changes))


def kinds(manifests):
    return [obj["kind"] for obj in manifests["base"]]


def pod_spec(manifests):
    return manifests["statefulset"]["spec"]["template"]["spec"]


def container(manifests, name):
    spec = pod_spec(manifests)
    return [found for found in spec["initContainers"] + spec["containers"] if found["name"] == name][0]


def mounts(manifests, name):
    return dict((mount["name"], mount["mountPath"]) for mount in container(manifests, name)["volumeMounts"])


def all_objects(manifests):
    return manifests["base"] + manifests["claims"] + [manifests["statefulset"]]


def test_the_local_inventory_gets_a_statefulset_with_four_sr_iov_nics_and_a_claim_per_pod():
    manifests = build()
    assert kinds(manifests) == ["Namespace", "ServiceAccount", "Service"]
    assert manifests["claims"] == []
    statefulset = manifests["statefulset"]
    assert statefulset["metadata"] == {"name": "h-kim", "namespace": "mlinfra-local", "labels": {
        "app.kubernetes.io/name": "h-kim", "app.kubernetes.io/part-of": "local",
        "app.kubernetes.io/managed-by": "mlinfra.multinode", "app.kubernetes.io/instance": "h-kim"}}
    assert statefulset["spec"]["replicas"] == 2
    networks = json.loads(statefulset["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
    assert networks == [{"name": "eno%dnp0-network" % n, "interface": "net%d" % (n - 4)} for n in (5, 6, 7, 8)]
    trainer = container(manifests, "trainer")
    assert trainer["resources"]["limits"] == dict([("nvidia.com/gpu", 4)] + [
        ("openshift.io/eno%dnp0rdma" % n, 1) for n in (5, 6, 7, 8)])
    assert trainer["resources"]["requests"] == dict(trainer["resources"]["limits"], cpu="32", memory="256Gi")
    assert trainer["securityContext"] == {"privileged": True}
    claim = statefulset["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}}
    assert "hostNetwork" not in pod_spec(manifests)


def test_host_networking_takes_the_nodes_network_and_infiniband_devices_and_no_nics():
    manifests = build("oke")
    spec = pod_spec(manifests)
    assert (spec["hostNetwork"], spec["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")
    assert "annotations" not in manifests["statefulset"]["spec"]["template"]["metadata"]
    for name in ("autodetect", "trainer"):
        assert mounts(manifests, name)["dev-infiniband"] == "/dev/infiniband"
    assert {"name": "dev-infiniband", "hostPath": {"path": "/dev/infiniband"}} in spec["volumes"]
    assert container(manifests, "trainer")["resources"]["limits"] == {"nvidia.com/gpu": 8}


@pytest.mark.parametrize("given, host", [(True, True), ("true", True), ("yes", True), (False, False),
                                         ("false", False), ("off", False), ("0", False)])
def test_booleans_are_read_as_ansible_reads_them(given, host):
    spec = pod_spec(build(cluster_host_network=given))
    assert spec.get("hostNetwork", False) is host
    assert ("dev-infiniband" in [volume["name"] for volume in spec["volumes"]]) is host


def test_a_word_that_is_no_boolean_is_refused_with_its_name():
    with pytest.raises(Refused, match="statefulset_require_verified_nodes is not a boolean"):
        build(statefulset_require_verified_nodes="maybe")


def test_verified_nodes_and_a_shared_rdma_device():
    manifests = build(statefulset_require_verified_nodes="true", cluster_rdma_shared_resource="rdma/shared_a")
    terms = pod_spec(manifests)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][1] == {
        "key": "mlinfra.io/rdma-verified", "operator": "In", "values": ["true"]}
    assert container(manifests, "trainer")["resources"]["limits"]["rdma/shared_a"] == 1
    # tcp mode attaches no RDMA device, shared or not.
    tcp = build(cluster_network_mode="tcp", cluster_rdma_nics=[], cluster_rdma_shared_resource="rdma/shared_a")
    assert container(tcp, "trainer")["resources"]["limits"] == {"nvidia.com/gpu": 4}


def test_shared_storage_is_one_claim_that_every_pod_mounts():
    manifests = build(cluster_storage_mode="shared", cluster_storage_class="fast-rwx", cluster_shared_claim_name="")
    claim, = manifests["claims"]
    assert claim["metadata"]["name"] == "h-kim-workspace"
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "storageClassName": "fast-rwx",
                             "resources": {"requests": {"storage": "100Gi"}}}
    assert "volumeClaimTemplates" not in manifests["statefulset"]["spec"]
    assert {"name": "workspace", "persistentVolumeClaim": {"claimName": "h-kim-workspace"}} in \
        pod_spec(manifests)["volumes"]
    named = build(cluster_storage_mode="shared", cluster_shared_claim_name="team-ws")
    assert named["claims"][0]["metadata"]["name"] == "team-ws"
    assert "storageClassName" not in named["claims"][0]["spec"]


@pytest.mark.parametrize("platform, mode, expected_kinds, scc", [
    ("kubernetes", "privileged", ["Namespace", "ServiceAccount", "Service"], None),
    ("kubernetes", "ipc_lock", ["Namespace", "ServiceAccount", "Service"], None),
    ("openshift", "privileged", ["Namespace", "ServiceAccount", "ClusterRole", "RoleBinding", "Service"], "privileged"),
    ("openshift", "ipc_lock", ["Namespace", "ServiceAccount", "SecurityContextConstraints", "ClusterRole",
                               "RoleBinding", "Service"], "mlinfra-local-h-kim-ipc-lock"),
])
def test_the_pods_scc_on_openshift_only(platform, mode, expected_kinds, scc):
    manifests = build(cluster_platform=platform, cluster_security_mode=mode)
    assert kinds(manifests) == expected_kinds
    roles = [obj for obj in manifests["base"] if obj["kind"] == "ClusterRole"]
    assert [role["rules"][0]["resourceNames"] for role in roles] == ([[scc]] if scc else [])
    expected = {"privileged": True} if mode == "privileged" else {
        "allowPrivilegeEscalation": False, "capabilities": {"add": ["IPC_LOCK"], "drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"}}
    assert container(manifests, "trainer")["securityContext"] == expected


@pytest.mark.parametrize("host", [False, True])
def test_the_ipc_lock_scc_allows_the_host_only_with_host_networking(host):
    manifests = build(cluster_platform="openshift", cluster_security_mode="ipc_lock", cluster_host_network=host,
                      cluster_rdma_nics=[])
    scc = [obj for obj in manifests["base"] if obj["kind"] == "SecurityContextConstraints"][0]
    assert (scc["allowHostNetwork"], scc["allowHostPorts"], scc["allowHostDirVolumePlugin"]) == (host, host, host)
    assert ("hostPath" in scc["volumes"]) is host
    assert scc["allowedCapabilities"] == ["IPC_LOCK"] and scc["allowPrivilegedContainer"] is False


def test_the_host_paths_an_ipc_lock_scc_allows_are_held_to_dev_infiniband_by_a_policy():
    manifests = build(cluster_platform="openshift", cluster_security_mode="ipc_lock", cluster_host_network=True,
                      cluster_rdma_nics=[])
    assert kinds(manifests) == ["Namespace", "ServiceAccount", "SecurityContextConstraints",
                                "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterRole",
                                "RoleBinding", "Service"]
    policy, binding = [obj for obj in manifests["base"] if obj["kind"].startswith("ValidatingAdmission")]
    name = "mlinfra-local-h-kim-host-paths"
    assert policy["metadata"]["name"] == binding["metadata"]["name"] == binding["spec"]["policyName"] == name
    # Pods of the deployment's account (the one the SCC is bound to) in its
    # namespace; the expressions are run by the API server in
    # tests/integration/test_deploy.py.
    assert policy["spec"]["matchConditions"][0]["expression"].endswith("== 'h-kim'")
    assert binding["spec"]["matchResources"] == {"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "mlinfra-local"}}}
    assert binding["spec"]["validationActions"] == ["Deny"]
    (rule,) = policy["spec"]["validations"]
    assert "['/dev/infiniband']" in rule["expression"]
    assert [volume["hostPath"]["path"] for volume in pod_spec(manifests)["volumes"] if "hostPath" in volume] == [
        "/dev/infiniband"]
    # Without the host network the SCC allows no hostPath: no policy.
    for changes in ({"cluster_host_network": False}, {"cluster_security_mode": "privileged"},
                    {"cluster_platform": "kubernetes"}):
        settings = dict({"cluster_platform": "openshift", "cluster_security_mode": "ipc_lock",
                         "cluster_host_network": True, "cluster_rdma_nics": []}, **changes)
        assert "ValidatingAdmissionPolicy" not in kinds(build(**settings)), changes


def named(objects):
    return [(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace")) for obj in objects]


@pytest.mark.parametrize("inventory", ["local", "moc", "oke", "barcelona"])
def test_teardown_names_every_object_any_settings_make(inventory):
    """deployment_refs is what teardown.yml deletes by name: every object of
    the statefulset role's and the probes' manifests, whichever platform,
    security and network settings made them (the claims and the training
    runs' objects go by their labels)."""
    every = set()
    for platform in ("openshift", "kubernetes"):
        for mode in ("privileged", "ipc_lock"):
            for host in (False, True):
                settings = inventory_settings(inventory, cluster_platform=platform, cluster_security_mode=mode,
                                              cluster_host_network=host,
                                              **({"cluster_rdma_nics": []} if host else {}))
                manifests = workload_manifests(settings)
                every.update(named(manifests["base"] + [manifests["statefulset"]]))
                every.update(("ConfigMap", volume["configMap"]["name"], settings["cluster_namespace"])
                             for volume in pod_spec(manifests)["volumes"] if "configMap" in volume)
                every.update(named(obj for obj in probe_manifests(dict(
                    settings, verify_probe_image="probe:1", verify_probe_timeout=60, stay_seconds=60))
                    if obj["kind"] != "Pod"))
    # The namespace stays (teardown never deletes it).
    every.discard(("Namespace", inventory_settings(inventory)["cluster_namespace"], None))
    # And the code ConfigMaps of a deployment made before they were named for what they hold.
    every.update(("ConfigMap", "%s-%s" % (settings["cluster_app_name"], former), settings["cluster_namespace"])
                 for former in FORMER_CODE_CONFIG_MAPS)
    refs = deployment_refs(inventory_settings(inventory))
    assert set(named(refs)) == every
    # Bindings go before what they bind.
    order = [ref[0] for ref in named(refs)]
    assert order.index("ValidatingAdmissionPolicyBinding") < order.index("ValidatingAdmissionPolicy")


# OpenShift's restricted-v2 SCC, the fields that make it restricted: the
# ipc_lock SCC keeps every one of them and allows IPC_LOCK where
# restricted-v2 allows NET_BIND_SERVICE.
RESTRICTED_V2 = {
    "allowPrivilegedContainer": False, "allowPrivilegeEscalation": False, "allowHostIPC": False,
    "allowHostPID": False, "requiredDropCapabilities": ["ALL"], "defaultAddCapabilities": [],
    "runAsUser": {"type": "MustRunAsRange"}, "seLinuxContext": {"type": "MustRunAs"},
    "fsGroup": {"type": "MustRunAs"}, "supplementalGroups": {"type": "RunAsAny"},
    "seccompProfiles": ["runtime/default"],
    "volumes": ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
                "secret"],
}


def test_the_ipc_lock_scc_is_restricted_v2_with_ipc_lock_and_the_pods_ask_for_no_more():
    manifests = build(cluster_platform="openshift", cluster_security_mode="ipc_lock")
    scc = [obj for obj in manifests["base"] if obj["kind"] == "SecurityContextConstraints"][0]
    assert {key: scc[key] for key in RESTRICTED_V2} == RESTRICTED_V2
    # The API requires the field; 0 sorts as unset does.
    assert scc["priority"] == 0
    for name in ("autodetect", "trainer"):
        security = container(manifests, name)["securityContext"]
        assert security["allowPrivilegeEscalation"] is False and "privileged" not in security
        assert security["capabilities"]["drop"] == ["ALL"]
        assert set(security["capabilities"].get("add", [])) <= set(scc["allowedCapabilities"])
        assert "runAsUser" not in security  # the namespace's range decides


def test_user_nccl_values_reach_the_init_container_sorted_by_name():
    args = container(build("oke"), "autodetect")["args"]
    assert args[:6] == ["--mode", "rdma", "--output", "/run/mlinfra/nccl.env", "--json", "/run/mlinfra/nccl.json"]
    sets = args[6:]
    assert sets == sorted(sets) and len(sets) == 6
    assert "--set=NCCL_IB_TC=41" in sets


def test_a_null_nccl_value_leaves_the_variable_out_rather_than_setting_the_text_none():
    args = container(build("oke", cluster_nccl_env_overrides={"NCCL_IB_GID_INDEX": None, "NCCL_DEBUG": "WARN"}),
                     "autodetect")["args"]
    assert args[6:] == ["--set=NCCL_DEBUG=WARN", "--unset=NCCL_IB_GID_INDEX"]


def test_the_rendezvous_port_is_a_number_where_kubernetes_wants_one_and_text_in_the_environment():
    manifests = build(statefulset_rendezvous_port="29600")
    service = manifests["base"][-1]
    assert service["spec"]["ports"] == [{"name": "rendezvous", "port": 29600, "targetPort": 29600, "protocol": "TCP"}]
    trainer = container(manifests, "trainer")
    assert trainer["ports"][0]["containerPort"] == 29600
    assert {"name": "MASTER_PORT", "value": "29600"} in trainer["env"]
    assert {"name": "MASTER_ADDR", "value": "h-kim-0.h-kim-headless.mlinfra-local.svc.cluster.local"} in trainer["env"]


def test_no_object_is_shared_between_two_places():
    # A dict in two places would be written with YAML anchors and aliases.
    manifests = build("oke", cluster_platform="openshift", cluster_security_mode="ipc_lock")
    seen = {}

    def walk(value, path):
        if isinstance(value, (dict, list)):
            assert id(value) not in seen, "%s is also %s" % (path, seen.get(id(value)))
            seen[id(value)] = path
            for key, item in (value.items() if isinstance(value, dict) else enumerate(value)):
                walk(item, path + (key,))

    walk(all_objects(manifests), ())
    assert len(seen) > 50


@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("setting, mode", [("cluster_storage_class", "shared"), ("cluster_storage_class", "per-pod"),
                                           ("cluster_shared_claim_name", "shared")])
def test_a_hostile_storage_class_or_claim_name_is_one_value_and_adds_no_field(hostile, setting, mode):
    plain = build(cluster_storage_mode=mode, **{setting: "fast"})
    hostile_build = build(cluster_storage_mode=mode, **{setting: hostile})
    for before, after in zip(all_objects(plain), all_objects(hostile_build)):
        assert key_paths(after) == key_paths(before)
        assert paths_holding(after, hostile) == paths_holding(before, "fast")
    where = paths_holding(all_objects(hostile_build), hostile)
    if setting == "cluster_storage_class":
        assert [path[-1] for path in where] == ["storageClassName"]
    else:
        assert [path[-2:] for path in where] == [("metadata", "name"), ("persistentVolumeClaim", "claimName")]
    assert round_trip(all_objects(hostile_build)) == all_objects(hostile_build)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_and_values_elsewhere_add_no_field(hostile):
    changes = dict(cluster_name=hostile, cluster_image=hostile, cluster_pod_memory=hostile, cluster_shm_size=hostile,
                   cluster_storage_size=hostile, cluster_gpu_nodes=["node-a", hostile],
                   cluster_nccl_env_overrides={"NCCL_IB_HCA": hostile},
                   cluster_rdma_nics=[{"name": "rdma-a", "resource": "openshift.io/rdmaa", "netdev": hostile}])
    plain = dict((name, "plain") for name in changes if isinstance(changes[name], str))
    plain.update(cluster_gpu_nodes=["node-a", "plain"], cluster_nccl_env_overrides={"NCCL_IB_HCA": "plain"},
                 cluster_rdma_nics=[{"name": "rdma-a", "resource": "openshift.io/rdmaa", "netdev": "plain"}])
    before, after = all_objects(build(**plain)), all_objects(build(**changes))
    assert [key_paths(obj) for obj in after] == [key_paths(obj) for obj in before]
    assert paths_holding(after, hostile) == paths_holding(before, "plain")
    assert round_trip(after) == after
    # The NIC's name inside the pod is data of the JSON annotation, whole.
    annotation = after[-1]["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
    assert json.loads(annotation) == [{"name": "rdma-a", "interface": hostile}]
    assert "--set=NCCL_IB_HCA=" + hostile in container({"statefulset": after[-1]}, "autodetect")["args"]


def as_deployed(statefulset):
    """The StatefulSet as the API server returns it: the defaults it fills
    in, and a status."""
    live = json.loads(json.dumps(statefulset))
    for template in live["spec"].get("volumeClaimTemplates", []):
        template["spec"]["volumeMode"] = "Filesystem"
        template["status"] = {"phase": "Pending"}
    live["spec"]["revisionHistoryLimit"] = 10
    live["status"] = {"replicas": 2, "readyReplicas": 2}
    return live


def test_a_deployed_statefulset_takes_the_same_settings_and_any_change_outside_its_claims():
    live = as_deployed(build()["statefulset"])
    assert unchangeable_settings(live, build()["statefulset"]) == []
    assert unchangeable_settings(live, build(replicas=4, cluster_pod_cpu="8")["statefulset"]) == []


@pytest.mark.parametrize("deployed, now, variable, live_value, wanted_value", [
    ({}, {"cluster_storage_mode": "shared"}, "cluster_storage_mode", "per-pod", "shared"),
    ({"cluster_storage_mode": "shared"}, {}, "cluster_storage_mode", "shared", "per-pod"),
    ({}, {"cluster_storage_size": "200Gi"}, "cluster_storage_size", "100Gi", "200Gi"),
    ({}, {"cluster_storage_class": "fast"}, "cluster_storage_class", "", "fast"),
])
def test_a_change_of_the_workspace_claims_is_named_with_the_fix(deployed, now, variable, live_value, wanted_value):
    live = as_deployed(build(**deployed)["statefulset"])
    [conflict] = unchangeable_settings(live, build(**now)["statefulset"])
    assert (conflict["variable"], conflict["live"], conflict["wanted"]) == (variable, live_value, wanted_value)
    if variable == "cluster_storage_mode":
        other_way = "or run teardown.yml (it keeps the workspace claims) and then deploy.yml"
    else:
        # A teardown that keeps the claims keeps their size and class: the
        # next deploy takes them again as they are.
        other_way = ("or, for new claims, copy what the workspaces hold elsewhere, run teardown.yml -e "
                     "purge_workspaces=true (it deletes the claims and their data) and then deploy.yml; a teardown "
                     "that keeps the claims keeps their %s" % variable.split("_")[-1])
    assert conflict["message"] == (
        "%s=%r, but the StatefulSet mlinfra-local/h-kim was deployed with %s=%r, and Kubernetes does not change "
        "the workspace claims of a live StatefulSet; fix: deploy with %s=%r, %s"
        % (variable, wanted_value, variable, live_value, variable, live_value, other_way))

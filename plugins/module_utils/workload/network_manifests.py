# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The sriov role's objects, one per RDMA NIC, built as data from the
checked settings:

==================================  ==========================================
cluster_rdma_network_type           objects, in the order they are applied
==================================  ==========================================
sriov                               a SriovNetworkNodePolicy per NIC (unless
                                    sriov_create_policies is false), then a
                                    SriovNetwork per NIC
host-device, macvlan, ipoib         a NetworkAttachmentDefinition per NIC
==================================  ==========================================

Every value from the inventory becomes the value of one field (a CNI
configuration is JSON text made by json.dumps), and the objects are
serialised once, by whoever applies or writes them: no value can add a
field. ``settings`` maps the inventory's variable names to their values as
the cluster role's checked_settings and the sriov role's validate.yml have
checked them; ``ipam`` maps each NIC's name to its IPAM configuration (the
rdma_ipam filter's result). Whether there is anything to attach at all (not
in tcp mode, nor with host networking) the role decides.

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from .admission_rules import AdmissionError, check_admission
from ..inventory_settings import setting_bool
from ..cluster.ownership import MANAGED_BY
from ..common.errors import MlinfraError
CNI_VERSION = "0.3.1"
# The SR-IOV operator publishes a policy's resourceName under this prefix;
# the inventory names the resource as the pods request it.
_OPERATOR_RESOURCE_PREFIX = re.compile(r"^openshift\.io/")


class NetworkManifestError(MlinfraError, ValueError):
    """An RDMA NIC that cannot be rendered; the message says why."""


def network_manifests(settings, ipam):
    """The objects of every NIC in cluster_rdma_nics, all of one kind before
    the next, checked against the SR-IOV operator's admission rules."""
    nics = settings["cluster_rdma_nics"]
    if settings["cluster_rdma_network_type"] == "sriov":
        builders = ([node_policy] if setting_bool(settings, "sriov_create_policies") else []) + [sriov_network]
        objects = [build(settings, nic, ipam) for build in builders for nic in nics]
    else:
        objects = [attachment(settings, nic, ipam) for nic in nics]
    try:
        check_admission(objects)
    except AdmissionError as exc:
        raise NetworkManifestError(str(exc))
    return objects


def _network_labels(settings):
    # The cluster's, not one deployment's: the node policies serve every
    # deployment of the cluster.
    return {"app.kubernetes.io/part-of": settings["cluster_name"], "app.kubernetes.io/managed-by": MANAGED_BY}


def _nic_field(nic, field):
    if not nic.get(field):
        raise NetworkManifestError("the cluster_rdma_nics entry %r has no %s" % (nic.get("name"), field))
    return nic[field]


def _nic_ipam(nic, ipam):
    name = _nic_field(nic, "name")
    if name not in ipam:
        raise NetworkManifestError("no IPAM configuration for the RDMA NIC %s" % name)
    return ipam[name]


def operator_resource_name(nic):
    """The resourceName of a policy or SriovNetwork: the inventory's resource
    without the operator's openshift.io/ prefix."""
    return _OPERATOR_RESOURCE_PREFIX.sub("", _nic_field(nic, "resource"))


def node_policy(settings, nic, ipam=None):
    """One SriovNetworkNodePolicy: the NIC's VFs on the selected nodes."""
    nic_selector = {"vendor": str(settings["sriov_nic_vendor"]), "pfNames": [_nic_field(nic, "pf")]}
    if settings["sriov_nic_device_id"]:
        nic_selector["deviceID"] = str(settings["sriov_nic_device_id"])
    # No selector given: the nodes the sriov role labels (those of cluster_gpu_nodes).
    node_selector = dict(settings["sriov_node_selector"] or {settings["sriov_node_label"]: "true"})
    return {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovNetworkNodePolicy",
        "metadata": {"name": _nic_field(nic, "name"), "namespace": settings["sriov_operator_namespace"],
                     "labels": _network_labels(settings)},
        "spec": {
            "resourceName": operator_resource_name(nic),
            "nodeSelector": node_selector,
            "numVfs": int(settings["sriov_num_vfs"]),
            "mtu": int(settings["cluster_rdma_mtu"]),
            "nicSelector": nic_selector,
            "deviceType": settings["sriov_device_type"],
            "isRdma": setting_bool(settings, "sriov_is_rdma"),
        },
    }


def sriov_network(settings, nic, ipam):
    """One SriovNetwork; the operator renders from it the
    NetworkAttachmentDefinition of the same name in networkNamespace."""
    return {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovNetwork",
        "metadata": {"name": _nic_field(nic, "name"), "namespace": settings["sriov_operator_namespace"],
                     "labels": _network_labels(settings)},
        "spec": {
            "networkNamespace": settings["cluster_namespace"],
            "resourceName": operator_resource_name(nic),
            "ipam": json.dumps(_nic_ipam(nic, ipam)),
        },
    }


def cni_config(settings, nic, ipam):
    """The CNI configuration of a NIC's NetworkAttachmentDefinition."""
    network_type = settings["cluster_rdma_network_type"]
    config = {"cniVersion": CNI_VERSION, "name": _nic_field(nic, "name"), "type": network_type}
    if network_type == "host-device":
        # The whole device moves into the pod, so its MTU stays the host's.
        config["device"] = _nic_field(nic, "pf")
    elif network_type == "macvlan":
        # Bridge mode: pods on one node reach each other through the NIC.
        config.update(master=_nic_field(nic, "pf"), mode="bridge", mtu=int(settings["cluster_rdma_mtu"]))
    else:
        config["master"] = _nic_field(nic, "pf")
    config["ipam"] = _nic_ipam(nic, ipam)
    return config


def attachment(settings, nic, ipam):
    """One NetworkAttachmentDefinition, on clusters without the SR-IOV
    operator. The resourceName annotation makes Multus attach the device the
    device plugin allocated to the pod for that resource."""
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": _nic_field(nic, "name"), "namespace": settings["cluster_namespace"],
                     "labels": _network_labels(settings),
                     "annotations": {"k8s.v1.cni.cncf.io/resourceName": _nic_field(nic, "resource")}},
        "spec": {"config": json.dumps(cni_config(settings, nic, ipam))},
    }

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cluster_ownership
short_description: Sort the objects a play would touch into the deployment's own, another owner's, and absent
version_added: 0.1.0
description:
  - Reads the live object of each entry of O(objects) and sorts it by its labels - the deployment's own
    (C(app.kubernetes.io/managed-by=mlinfra.multinode) and C(app.kubernetes.io/instance=<instance>)), another
    owner's, or absent - and reads the labels of the O(namespace).
  - With O(refuse=true) (deploy.yml) it fails, before anything is changed, when any object belongs to another
    owner, or when the namespace exists, is not the deployment's and O(allow_existing_namespace) is false; the
    message names each object and the fix. With O(refuse=false) (teardown.yml) it only sorts, so that the play
    deletes the deployment's own objects and leaves the others.
  - A namespace the collection did not label but that holds objects of the deployment (made by a version before
    the labels) counts as the deployment's. A kind the cluster does not serve counts as absent.
author:
  - mlinfra maintainers (@mlinfra)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - mlinfra.multinode.read_only
  - mlinfra.multinode.cluster_client
options:
  objects:
    description: The objects, as C(mlinfra.multinode.object_refs) lists them (C(apiVersion), C(kind),
      C(metadata.name) and, for a namespaced kind, C(metadata.namespace)).
    type: list
    elements: dict
    required: true
  instance:
    description: The deployment's C(cluster_app_name).
    type: str
    required: true
  namespace:
    description: The deployment's namespace (C(cluster_namespace)).
    type: str
    required: true
  allow_existing_namespace:
    description: Use a namespace that exists and is not the deployment's (C(cluster_allow_existing_namespace)).
    type: bool
    default: false
  refuse:
    description: Fail when an object or the namespace belongs to another owner.
    type: bool
    default: true
  action:
    description: What would touch the objects, for the message (for example C(deploy.yml)).
    type: str
    default: deploy.yml
"""

EXAMPLES = r"""
- name: Refuse to take over another owner's objects
  mlinfra.multinode.cluster_ownership:
    objects: "{{ (autodetect_manifests + statefulset_manifests.base) | mlinfra.multinode.object_refs }}"
    instance: "{{ cluster_app_name }}"
    namespace: "{{ cluster_namespace }}"
    allow_existing_namespace: "{{ cluster_allow_existing_namespace | bool }}"
    timeout: "{{ cluster_api_timeout | int }}"

- name: Know which of the named objects teardown may delete
  mlinfra.multinode.cluster_ownership:
    objects:
      - {apiVersion: v1, kind: ConfigMap, metadata: {namespace: "{{ cluster_namespace }}", name: "{{ cluster_app_name }}-pod-runtime"}}
    instance: "{{ cluster_app_name }}"
    namespace: "{{ cluster_namespace }}"
    refuse: false
  register: owned
"""

RETURN = r"""
owned:
  description: The entries of O(objects) that exist and are the deployment's, as given.
  returned: always
  type: list
  elements: dict
  contains: &ref
    apiVersion:
      description: The object's apiVersion.
      type: str
    kind:
      description: The object's kind.
      type: str
    metadata:
      description: C(name), and C(namespace) for a namespaced kind.
      type: dict
      contains:
        name:
          description: The object's name.
          type: str
        namespace:
          description: The object's namespace; absent for a cluster-scoped kind.
          type: str
foreign:
  description: The entries that exist and are another owner's.
  returned: always
  type: list
  elements: dict
  contains:
    apiVersion:
      description: The object's apiVersion.
      type: str
    kind:
      description: The object's kind.
      type: str
    metadata:
      description: C(name), C(namespace) for a namespaced kind, and the live object's C(labels).
      type: dict
      contains:
        name:
          description: The object's name.
          type: str
        namespace:
          description: The object's namespace; absent for a cluster-scoped kind.
          type: str
        labels:
          description: The live object's labels.
          type: dict
absent:
  description: The entries that do not exist, as given.
  returned: always
  type: list
  elements: dict
  contains: *ref
namespace_labels:
  description: The namespace's labels; null when it does not exist.
  returned: always
  type: dict
"""

import copy

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster import ownership

try:
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError, ResourceNotFoundError
    from urllib3.exceptions import HTTPError
except ImportError:  # AnsibleK8SModule reports the missing library
    DynamicApiError = NotFoundError = ResourceNotFoundError = HTTPError = Exception


def argument_spec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(objects=dict(type="list", elements="dict", required=True),
                instance=dict(type="str", required=True),
                namespace=dict(type="str", required=True),
                allow_existing_namespace=dict(type="bool", default=False),
                refuse=dict(type="bool", default=True),
                action=dict(type="str", default="deploy.yml"),
                timeout=dict(type="int", default=30))
    return spec


def live_labels(client, ref, timeout):
    """The live object's labels ({} when it has none), or None when absent."""
    try:
        resource = client.resource(ref["kind"], ref["apiVersion"])
    except ResourceNotFoundError:
        return None  # the cluster does not serve the kind: no such object
    metadata = ref["metadata"]
    try:
        found = client.get(resource, name=metadata["name"], namespace=metadata.get("namespace"),
                           _request_timeout=timeout)
    except NotFoundError:
        return None
    return dict((found.to_dict().get("metadata") or {}).get("labels") or {})


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    for ref in params["objects"]:
        if not ref.get("apiVersion") or not ref.get("kind") or not (ref.get("metadata") or {}).get("name"):
            module.fail_json(msg="each entry of objects needs apiVersion, kind and metadata.name (as object_refs "
                                 "gives them), got %r" % (ref,))
    try:
        client = get_api_client(module=module)
        namespace_labels = live_labels(client, {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": params["namespace"]}}, params["timeout"])
        live = [live_labels(client, ref, params["timeout"]) for ref in params["objects"]]
    # The client's own words: the api_faults callback names a lost API
    # (refused, reset, timed out) or a kubeconfig gone from them.
    except (CoreException, DynamicApiError, HTTPError, OSError) as exc:
        # The client's words first: they say what happened to the API.
        module.fail_json(msg="%s (while reading the objects %s would touch)" % (exc, params["action"]))
    sorted_out = ownership.sort_out(params["objects"], live, params["instance"])
    result = dict(changed=False, namespace_labels=namespace_labels, **sorted_out)
    if params["refuse"]:
        problem = ownership.namespace_problem(namespace_labels, params["instance"], params["namespace"],
                                              params["allow_existing_namespace"], bool(sorted_out["owned"]))
        if problem:
            module.fail_json(msg=problem, **result)
        if sorted_out["foreign"]:
            module.fail_json(msg=ownership.takeover_message(sorted_out["foreign"], params["instance"],
                                                            params["namespace"], params["action"]), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

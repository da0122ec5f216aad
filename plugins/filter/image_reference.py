# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: image_reference
short_description: The parts of a container image reference, or why it is not one
version_added: 0.1.0
description:
  - Splits an image reference such as V(image-registry.openshift-image-registry.svc:5000/team/trainer:0.1.0) into
    its registry, repository path, tag and digest, following the grammar container registries and runtimes use
    (lower-case path components separated by V(/), an optional V(:tag) and an optional V(@algorithm:hex) digest).
  - A first component with a V(.) or a V(:), or V(localhost), is a registry host; otherwise there is no registry
    (the runtime's default one).
  - Never fails on a bad reference; C(valid) is false and C(error) says what is wrong, so that a task can name the
    variable that holds it and the fix.
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description: The image reference.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Fail clearly on a malformed image
  ansible.builtin.assert:
    that: image.valid
    fail_msg: "cluster_image is not an image reference: {{ image.error }}"
  vars:
    image: "{{ cluster_image | mlinfra.multinode.image_reference }}"
"""

RETURN = r"""
_value:
  description: The parts of the reference.
  type: dict
  contains:
    valid:
      description: Whether the text is a well-formed image reference.
      type: bool
    error:
      description: What is wrong with it; empty when valid.
      type: str
    registry:
      description: Registry host, with its port; empty when the reference names none.
      type: str
    repository:
      description: The path after the registry, for example V(team/trainer).
      type: str
    namespace:
      description: The repository path without its last component, for example V(team); empty for a single component.
      type: str
    name:
      description: The last component of the path, for example V(trainer).
      type: str
    tag:
      description: The tag; empty when the reference has none (runtimes then pull V(latest)).
      type: str
    digest:
      description: The digest, for example V(sha256:...); empty when the reference has none.
      type: str
    mutable:
      description: True when the reference names V(latest), explicitly or by having neither tag nor digest.
      type: bool
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.image_reference import parse_image_reference


def image_reference(text):
    if not isinstance(text, str):
        raise AnsibleFilterError("image_reference takes a string, got %s" % type(text).__name__)
    return parse_image_reference(text)


class FilterModule(object):
    def filters(self):
        return {"image_reference": image_reference}

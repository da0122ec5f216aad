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

import re

from ansible.errors import AnsibleFilterError

# Grammar of github.com/distribution/reference (the one registries,
# containerd, CRI-O and buildah share), written out.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = re.compile(r"^%s(?:\.%s)*(?::[0-9]+)?$" % (_DOMAIN_COMPONENT, _DOMAIN_COMPONENT))
_PATH_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}$")
# Repository names (registry and path) longer than this are refused by registries.
_NAME_MAX = 255


def _result(**parts):
    result = dict(valid=False, error="", registry="", repository="", namespace="", name="", tag="", digest="",
                  mutable=False)
    result.update(parts)
    return result


def _parse(text):
    if not text:
        return "it is empty"
    if text != text.strip() or any(c.isspace() for c in text):
        return "it contains white space"
    name, dummy, digest = text.partition("@")
    if digest and not _DIGEST.match(digest):
        return "the digest '%s' is not algorithm:hex (for example sha256:<64 hex digits>)" % digest
    # A ':' after the last '/' starts the tag; one before it is a registry port.
    tag = ""
    last_slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > last_slash:
        name, tag = name[:colon], name[colon + 1:]
        if not _TAG.match(tag):
            return "the tag '%s' is not a tag (letters, digits, '_', '.', '-'; at most 128; not starting with '.' or '-')" % tag
    components = name.split("/")
    registry = ""
    if len(components) > 1 and ("." in components[0] or ":" in components[0] or components[0] == "localhost"):
        registry = components.pop(0)
        if not _DOMAIN.match(registry):
            return "the registry '%s' is not a host name with an optional :port" % registry
    for component in components:
        if not _PATH_COMPONENT.match(component):
            return ("the path component '%s' is not lower-case letters and digits separated by '.', '_', '__' or '-'"
                    % component)
    if len(name) > _NAME_MAX:
        return "the name is longer than %d characters" % _NAME_MAX
    return _result(valid=True, registry=registry, repository="/".join(components), namespace="/".join(components[:-1]),
                   name=components[-1], tag=tag, digest=digest, mutable=not digest and tag in ("", "latest"))


def image_reference(text):
    if not isinstance(text, str):
        raise AnsibleFilterError("image_reference takes a string, got %s" % type(text).__name__)
    parsed = _parse(text)
    if isinstance(parsed, str):
        return _result(error=parsed)
    return parsed


class FilterModule(object):
    def filters(self):
        return {"image_reference": image_reference}

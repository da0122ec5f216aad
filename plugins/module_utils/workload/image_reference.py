# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Container image references parsed as registries and runtimes parse them:
the image_reference filter and inventory_settings (cluster_image and the
other image variables) share this."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

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


def parse_image_reference(text):
    """The parts of a reference, with valid and (when invalid) error."""
    parsed = _parse(text)
    if isinstance(parsed, str):
        return _result(error=parsed)
    return parsed

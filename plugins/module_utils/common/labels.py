# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Kubernetes labels: the syntax of keys and values, and label selectors
(``nvidia.com/gpu.present=true,pool in (a,b),!excluded``) read into the
requirements a node affinity's ``matchExpressions`` take.

The API server matches a selector itself (the cluster role hands it to a
node list); this reading is for the early, clear refusal of a malformed one
before anything is made, and for manifests written without a cluster
(render.yml), where the chosen nodes are not known. The grammar is
apimachinery's ``labels.Parse``: requirements separated by commas, each
``key``, ``!key``, ``key=value``, ``key==value``, ``key!=value``,
``key in (v1,v2)``, ``key notin (v1,v2)``, ``key>N`` or ``key<N``.

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
# A label key's prefix (a DNS subdomain) is at most 253 characters.
_KEY_PREFIX_MAX = 253

_SET = re.compile(r"^(?P<key>\S+)\s+(?P<operator>in|notin)\s*\((?P<values>[^()]*)\)$")
_COMPARED = re.compile(r"^(?P<key>[^\s!=<>]+)\s*(?P<operator>==|!=|=|>|<)\s*(?P<value>.*)$")
_OPERATORS = {"=": "In", "==": "In", "!=": "NotIn", "in": "In", "notin": "NotIn", ">": "Gt", "<": "Lt"}


def is_label_key(text):
    text = str(text)
    return bool(LABEL_KEY.match(text)) and len(text.rpartition("/")[0]) <= _KEY_PREFIX_MAX


def _split(selector):
    """The requirements of ``selector``: split at the commas outside
    parentheses (``in (a,b)`` holds commas of its own)."""
    parts, depth, current = [], 0, []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts]


def _requirement(text):
    found = _SET.match(text)
    if found:
        values = [value.strip() for value in found.group("values").split(",")]
        return found.group("key"), _OPERATORS[found.group("operator")], values
    found = _COMPARED.match(text)
    if found:
        return found.group("key"), _OPERATORS[found.group("operator")], [found.group("value")]
    if text.startswith("!"):
        return text[1:].strip(), "DoesNotExist", []
    return text, "Exists", []


def parse_selector(selector):
    """The requirements of a label selector as ``matchExpressions`` entries
    (``{key, operator, values}``); ValueError naming the requirement that is
    malformed. An empty selector has none."""
    selector = str(selector or "").strip()
    if not selector:
        return []
    requirements = []
    for text in _split(selector):
        if not text:
            raise ValueError("has an empty requirement (two commas, or one at an end)")
        key, operator, values = _requirement(text)
        if not is_label_key(key):
            raise ValueError("requirement %r: %r is not a label key (such as nvidia.com/gpu.present)" % (text, key))
        for value in values:
            if not LABEL_VALUE.match(value):
                raise ValueError("requirement %r: %r is not a label value (at most 63 letters, digits, '-', '_', '.')"
                                 % (text, value))
            if operator in ("Gt", "Lt") and not value.isdigit():
                raise ValueError("requirement %r: %r must be a whole number" % (text, value))
        if operator in ("In", "NotIn") and values == [""] and text.endswith(")"):
            raise ValueError("requirement %r: the set of values is empty" % (text,))
        expression = {"key": key, "operator": operator}
        if values:
            expression["values"] = values
        requirements.append(expression)
    return requirements

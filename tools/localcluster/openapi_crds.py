"""CustomResourceDefinitions generated from an API's published OpenAPI
definitions, for kinds that their platform serves from an API server of its
own rather than as CRDs (OpenShift's BuildConfig, Build and ImageStream).

The schema of each kind is its definition in the Swagger 2.0 document the API
project publishes (openshift/api's openapi/openapi.json), with every `$ref`
resolved, turned into the structural schema a CRD needs:

- Kubernetes' special types become what CRDs use for them: IntOrString and
  Quantity `x-kubernetes-int-or-string`, RawExtension an object that keeps
  unknown fields, the top-level metadata `{type: object}` (the API server
  knows ObjectMeta itself).
- What a CRD schema cannot carry is left out: defaults (the platform's API
  server fills them in from its code), read-only and patch-strategy markers,
  discriminated unions, list and map merge markers (they only steer
  server-side apply's merging).
- A definition that refers to itself keeps unknown fields at the point where
  it would recurse.

So a field the platform does not have is refused here as it is there; the
defaults and cross-field rules its API server adds in code are not.
"""

from __future__ import annotations

from typing import NamedTuple

REF_PREFIX = "#/definitions/"
INT_OR_STRING = ("io.k8s.apimachinery.pkg.util.intstr.IntOrString", "io.k8s.apimachinery.pkg.api.resource.Quantity")
ANY_OBJECT = ("io.k8s.apimachinery.pkg.runtime.RawExtension",)
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
# The keys of an OpenAPI v2 schema that a CRD's structural schema keeps.
KEPT = ("description", "type", "format", "enum", "required", "items", "properties", "additionalProperties",
        "minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "nullable")


class Kind(NamedTuple):
    definition: str     # its name among the document's definitions
    group: str
    version: str
    kind: str
    plural: str
    short_names: tuple
    status: bool        # served with a status subresource


class SchemaError(ValueError):
    pass


def _resolve(definitions, name, stack):
    if name in INT_OR_STRING:
        return {"x-kubernetes-int-or-string": True}
    if name in ANY_OBJECT:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if name == OBJECT_META:
        # Nested object metadata (templates): kept as given.
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if name in stack:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if name not in definitions:
        raise SchemaError("the document has no definition %s" % name)
    return _convert(definitions, definitions[name], stack + (name,))


def _convert(definitions, schema, stack):
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith(REF_PREFIX):
            raise SchemaError("a reference outside the document's definitions: %s" % ref)
        resolved = dict(_resolve(definitions, ref[len(REF_PREFIX):], stack))
        if schema.get("description"):
            resolved["description"] = schema["description"]
        return resolved
    converted = {}
    for key in KEPT:
        if key not in schema:
            continue
        value = schema[key]
        if key == "properties":
            value = dict((name, _convert(definitions, sub, stack)) for name, sub in sorted(value.items()))
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            value = _convert(definitions, value, stack)
        converted[key] = value
    if "type" not in converted and not converted.get("x-kubernetes-int-or-string"):
        # An empty schema (any JSON value) is not structural.
        converted.update({"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    return converted


def crd(document, kind):
    """The CustomResourceDefinition of one kind of the document."""
    definitions = document.get("definitions") or {}
    if kind.definition not in definitions:
        raise SchemaError("the document has no definition %s" % kind.definition)
    schema = _convert(definitions, definitions[kind.definition], (kind.definition,))
    schema["properties"]["metadata"] = {"type": "object"}
    version = {"name": kind.version, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    if kind.status:
        version["subresources"] = {"status": {}}
    names = {"kind": kind.kind, "listKind": kind.kind + "List", "plural": kind.plural,
             "singular": kind.kind.lower()}
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.%s" % (kind.plural, kind.group),
                     "annotations": {"mlinfra.io/generated-from": kind.definition}},
        "spec": {"group": kind.group, "names": names, "scope": "Namespaced", "versions": [version]},
    }

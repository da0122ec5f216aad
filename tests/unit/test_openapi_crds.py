"""tools/localcluster/openapi_crds.py: OpenShift's build and image kinds as
CRDs whose schemas come from openshift/api's published OpenAPI document (the
real one, from the pinned module, read through upstream_crds.py)."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "upstream_crds", Path(__file__).resolve().parents[2] / "tools" / "localcluster" / "upstream_crds.py")
upstream_crds = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(upstream_crds)
# The generator upstream_crds.py uses, the module it loaded from beside it.
openapi_crds = upstream_crds.openapi_crds


@pytest.fixture(scope="module")
def generated():
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain on PATH")
    (module, path, kinds), = upstream_crds.OPENAPI_SOURCES
    document = json.loads((upstream_crds.module_dir(module, upstream_crds.pinned_versions()[module]) / path).read_text())
    return dict((kind.kind, openapi_crds.crd(document, kind)) for kind in kinds)


def schema_of(crd):
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def walk(schema, path="."):
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from walk(sub, path + "." + name)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from walk(schema[key], path + "[]")


def test_the_three_kinds_the_image_role_creates(generated):
    assert sorted(generated) == ["Build", "BuildConfig", "ImageStream"]
    assert generated["BuildConfig"]["spec"]["names"]["shortNames"] == ["bc"]
    assert all(crd["spec"]["versions"][0]["subresources"] == {"status": {}} for crd in generated.values())


def test_every_node_is_structural_and_nothing_is_left_unresolved(generated):
    for kind, crd in generated.items():
        text = json.dumps(crd)
        assert "$ref" not in text and '"default"' not in text and "x-kubernetes-patch" not in text, kind
        for path, node in walk(schema_of(crd)):
            assert "type" in node or node.get("x-kubernetes-int-or-string"), (kind, path)


def test_the_fields_the_image_role_sets_are_typed_as_openshift_types_them(generated):
    spec = schema_of(generated["BuildConfig"])["properties"]["spec"]["properties"]
    build_args = spec["strategy"]["properties"]["dockerStrategy"]["properties"]["buildArgs"]["items"]
    assert build_args["required"] == ["name"] and build_args["properties"]["value"]["type"] == "string"
    assert spec["output"]["properties"]["to"]["properties"]["kind"]["type"] == "string"
    assert set(spec["source"]["properties"]) >= {"dockerfile", "configMaps", "type"}
    # Quantities take numbers and strings, as the API server takes them.
    limits = spec["resources"]["properties"]["limits"]["additionalProperties"]
    assert limits == {"x-kubernetes-int-or-string": True}
    assert "lookupPolicy" in schema_of(generated["ImageStream"])["properties"]["spec"]["properties"]
    assert schema_of(generated["Build"])["properties"]["metadata"] == {"type": "object"}


def test_a_definition_that_refers_to_itself_keeps_unknown_fields_where_it_would_recurse():
    document = {"definitions": {"x.Node": {"type": "object", "required": ["spec"], "properties": {
        "spec": {"type": "object", "properties": {"child": {"$ref": "#/definitions/x.Node", "description": "d"}}},
        "metadata": {"$ref": "#/definitions/" + openapi_crds.OBJECT_META}}}}}
    kind = openapi_crds.Kind("x.Node", "x.example.com", "v1", "Node", "nodes", (), False)
    crd = openapi_crds.crd(document, kind)
    child = schema_of(crd)["properties"]["spec"]["properties"]["child"]
    assert child == {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "description": "d"}
    assert "subresources" not in crd["spec"]["versions"][0] and crd["metadata"]["name"] == "nodes.x.example.com"


def test_a_missing_definition_is_named():
    kind = openapi_crds.Kind("x.Gone", "x.example.com", "v1", "Gone", "gones", (), False)
    with pytest.raises(openapi_crds.SchemaError, match="no definition x.Gone"):
        openapi_crds.crd({"definitions": {}}, kind)
    document = {"definitions": {"x.Gone": {"type": "object", "properties": {"a": {"$ref": "#/definitions/x.Elsewhere"}}}}}
    with pytest.raises(openapi_crds.SchemaError, match="no definition x.Elsewhere"):
        openapi_crds.crd(document, kind)

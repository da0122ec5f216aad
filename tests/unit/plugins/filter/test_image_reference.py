"""The image_reference filter, called as Ansible calls it (its FilterModule)."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.filter.image_reference import FilterModule

image_reference = FilterModule().filters()["image_reference"]

INTERNAL = "image-registry.openshift-image-registry.svc:5000"


def test_an_openshift_internal_registry_reference():
    ref = image_reference(INTERNAL + "/b-efficient-memory-offloading-765cab/h-kim:latest")
    assert ref == {"valid": True, "error": "", "registry": INTERNAL,
                   "repository": "b-efficient-memory-offloading-765cab/h-kim",
                   "namespace": "b-efficient-memory-offloading-765cab", "name": "h-kim", "tag": "latest",
                   "digest": "", "mutable": True}


@pytest.mark.parametrize("text,registry,repository,tag,digest,mutable", [
    ("ubuntu", "", "ubuntu", "", "", True),
    ("ubuntu:24.04", "", "ubuntu", "24.04", "", False),
    ("nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04", "nvcr.io", "nvidia/cuda", "12.8.1-base-ubuntu24.04", "", False),
    ("localhost/trainer:v1", "localhost", "trainer", "v1", "", False),
    ("localhost:5000/a/b/c", "localhost:5000", "a/b/c", "", "", True),
    ("iad.ocir.io/mlinfra/trainer:0.1.0", "iad.ocir.io", "mlinfra/trainer", "0.1.0", "", False),
    ("quay.io/org/img@sha256:" + "a" * 64, "quay.io", "org/img", "", "sha256:" + "a" * 64, False),
    ("quay.io/org/img:latest@sha256:" + "b" * 64, "quay.io", "org/img", "latest", "sha256:" + "b" * 64, False),
    ("my_org/my__img.v2-x", "", "my_org/my__img.v2-x", "", "", True),
])
def test_well_formed_references(text, registry, repository, tag, digest, mutable):
    ref = image_reference(text)
    assert ref["valid"], ref["error"]
    assert (ref["registry"], ref["repository"], ref["tag"], ref["digest"], ref["mutable"]) == (
        registry, repository, tag, digest, mutable)
    assert ref["name"] == repository.rsplit("/", 1)[-1]


@pytest.mark.parametrize("text,words", [
    ("", "empty"),
    ("quay.io/org/img :1", "white space"),
    ("quay.io/Org/img:1", "path component 'Org'"),
    ("quay.io/org/img:", "tag ''"),
    ("quay.io/org/img:-x", "tag '-x'"),
    ("quay.io/org/img@sha256:xyz", "digest 'sha256:xyz'"),
    ("quay.io//img:1", "path component ''"),
    ("bad_host.io/img:1", "registry 'bad_host.io'"),
    ("quay.io/org/" + "a" * 250, "longer than 255"),
])
def test_malformed_references_say_why(text, words):
    ref = image_reference(text)
    assert not ref["valid"]
    assert words in ref["error"]
    assert ref["registry"] == ref["repository"] == ref["tag"] == ""


def test_refuses_what_is_not_a_string():
    with pytest.raises(AnsibleFilterError, match="takes a string"):
        image_reference(["quay.io/org/img"])

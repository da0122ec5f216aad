"""The image role against the local cluster, with cluster_platform=openshift:
through playbooks/deploy.yml with --tags autodetect,image (the autodetect
ConfigMaps are the build context), and alone (image_role.yml) where what the
role does before its first change, or its teardown, is the point.

No OpenShift build controller runs on the local cluster, where BuildConfig,
Build and ImageStream are custom resources whose schemas are generated from
openshift/api's OpenAPI document (tools/localcluster/openapi_crds.py).
The tests play that controller: while a playbook waits for a build, the test
finds the Build the role created and sets its status.phase (Running, then
Complete or Failed) through the status subresource with the kubernetes
client, as OpenShift's build controller does with the outcome of a build pod.
"""

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ansible_cli import run_playbook
from kubernetes import client

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
APP = "h-kim"
REGISTRY = "image-registry.openshift-image-registry.svc:5000"
BUILD_GROUP, IMAGE_GROUP = "build.openshift.io", "image.openshift.io"
# The image role alone (after the cluster role), one entry point.
IMAGE_ROLE = str(ROOT / "tests" / "integration" / "image_role.yml")


@pytest.fixture
def image_ns(api_client):
    """A namespace name for one test, deleted (with all it holds) afterwards."""
    name = "img-%s" % uuid.uuid4().hex[:6]
    yield name
    try:
        client.CoreV1Api(api_client).delete_namespace(name)
    except client.ApiException as err:
        assert err.status == 404


def openshift(namespace, **extra):
    """Extra vars that make the local inventory an OpenShift cluster that builds its image."""
    return dict({"cluster_namespace": namespace, "cluster_platform": "openshift",
                 "cluster_image": "%s/%s/%s:0.1.0" % (REGISTRY, namespace, APP),
                 "image_build_poll_seconds": 1, "image_build_timeout": 90}, **extra)


def deploy(extra, check=False):
    return run_playbook("deploy.yml", "local", extra, check=check, tags="autodetect,image")


def image_role(entry_point, extra, check=False):
    return run_playbook(IMAGE_ROLE, "local", dict(extra, entry_point=entry_point), check=check)


def deploy_in_background(extra, **kwargs):
    """deploy() in a thread, for a playbook that waits for a build the test completes."""
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(deploy, extra, **kwargs)
    pool.shutdown(wait=False)
    return future


def objects(api_client, namespace, group, plural):
    return client.CustomObjectsApi(api_client).list_namespaced_custom_object(group, "v1", namespace, plural)["items"]


def builds(api_client, namespace):
    return sorted(objects(api_client, namespace, BUILD_GROUP, "builds"), key=lambda b: b["metadata"]["creationTimestamp"])


def namespace_exists(api_client, namespace):
    try:
        client.CoreV1Api(api_client).read_namespace(namespace)
        return True
    except client.ApiException as err:
        assert err.status == 404
        return False


def play_build_controller(api_client, namespace, phase, seen=(), timeout=120, **status):
    """What OpenShift's build controller does with a new Build: it runs it
    (phase Running), then records the outcome. Waits for a Build whose uid is
    not in `seen`; returns it as the role created it."""
    custom = client.CustomObjectsApi(api_client)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = [b for b in builds(api_client, namespace) if b["metadata"]["uid"] not in seen]
        if new:
            name = new[0]["metadata"]["name"]
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            custom.patch_namespaced_custom_object_status(BUILD_GROUP, "v1", namespace, "builds", name,
                                                         {"status": {"phase": "Running", "startTimestamp": now}})
            custom.patch_namespaced_custom_object_status(BUILD_GROUP, "v1", namespace, "builds", name,
                                                         {"status": dict(status, phase=phase, completionTimestamp=now)})
            return new[0]
        time.sleep(0.5)
    raise AssertionError("no new Build in %s within %ss" % (namespace, timeout))


def build_and_complete(api_client, extra, seen=()):
    running = deploy_in_background(extra)
    build = play_build_controller(api_client, extra["cluster_namespace"], "Complete", seen,
                                  output={"to": {"imageDigest": "sha256:" + "1" * 64}})
    run = running.result()
    assert not run.failed, run.failure_messages() or run.stderr
    return run, build


def test_a_build_is_started_once_per_change_of_its_inputs(api_client, image_ns):
    first, build = build_and_complete(api_client, openshift(image_ns))
    assert first.changed > 0
    assert "build %s Complete, sha256:1111" % build["metadata"]["name"] in first.results("Report the image")[0]["msg"]

    stream = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        IMAGE_GROUP, "v1", image_ns, "imagestreams", APP)
    assert stream["metadata"]["labels"]["app.kubernetes.io/name"] == APP + "-image"
    bc = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        BUILD_GROUP, "v1", image_ns, "buildconfigs", APP)
    containerfile = (ROOT / "files" / "Containerfile").read_text()
    assert bc["spec"]["source"]["dockerfile"] == containerfile
    assert bc["spec"]["source"]["configMaps"] == [
        {"configMap": {"name": APP + "-pod-runtime"}, "destinationDir": "plugins/module_utils"},
        {"configMap": {"name": APP + "-programs"}, "destinationDir": "files/bin"},
        {"configMap": {"name": APP + "-train-assets"}, "destinationDir": "files/train"}]
    assert bc["spec"]["output"]["to"] == {"kind": "ImageStreamTag", "name": APP + ":0.1.0"}
    assert bc["spec"]["triggers"] == [] and bc["spec"]["runPolicy"] == "Serial"
    args = dict((a["name"], a["value"]) for a in bc["spec"]["strategy"]["dockerStrategy"]["buildArgs"])
    assert args["TORCHTITAN_VERSION"] == "0.2.2" and args["BASE_IMAGE"].startswith("nvcr.io/nvidia/cuda:")

    # The Build is one of the BuildConfig's builds, as `oc start-build` would make it.
    assert build["metadata"]["name"].startswith(APP + "-")
    assert build["spec"]["source"] == bc["spec"]["source"] and build["spec"]["strategy"] == bc["spec"]["strategy"]
    assert build["metadata"]["labels"]["openshift.io/build-config.name"] == APP
    assert build["metadata"]["annotations"]["openshift.io/build.number"] == "1"
    assert build["metadata"]["annotations"]["mlinfra.multinode/build-inputs"].startswith("sha256:")
    assert [(o["kind"], o["name"], o["uid"]) for o in build["metadata"]["ownerReferences"]] == [
        ("BuildConfig", APP, bc["metadata"]["uid"])]

    again = deploy(openshift(image_ns))
    assert not again.failed, again.failure_messages()
    assert again.changed == 0
    assert [b["metadata"]["uid"] for b in builds(api_client, image_ns)] == [build["metadata"]["uid"]]

    # A changed input: check mode says so and starts nothing ...
    newer = openshift(image_ns, image_torchtitan_version="0.2.1")
    check = deploy(newer, check=True)
    assert not check.failed, check.failure_messages()
    assert check.changed > 0
    assert len(builds(api_client, image_ns)) == 1

    # ... a real run starts one more build, numbered after the first.
    changed, second = build_and_complete(api_client, newer, seen={build["metadata"]["uid"]})
    assert changed.changed > 0
    assert second["metadata"]["name"] != build["metadata"]["name"]
    assert second["metadata"]["annotations"]["openshift.io/build.number"] == "2"
    assert {"name": "TORCHTITAN_VERSION", "value": "0.2.1"} in second["spec"]["strategy"]["dockerStrategy"]["buildArgs"]
    assert [b["status"]["phase"] for b in builds(api_client, image_ns)] == ["Complete", "Complete"]


def test_a_failed_build_fails_the_play_with_its_reason_and_log_command(api_client, image_ns):
    extra = openshift(image_ns)
    running = deploy_in_background(extra)
    build = play_build_controller(api_client, image_ns, "Failed", reason="DockerBuildFailed",
                                  message="Docker build strategy has failed.",
                                  logSnippet="E: Unable to locate package perftest")
    run = running.result()
    assert run.failed
    messages = " ".join(run.failure_messages())
    name = build["metadata"]["name"]
    ended = "build %s of %s ended Failed, DockerBuildFailed: Docker build strategy has failed." % (
        name, extra["cluster_image"])
    for words in (ended,
                  "last log lines: E: Unable to locate package perftest",
                  "logs: oc logs build/%s -n %s" % (name, image_ns),
                  "-e image_build_retry=true"):
        assert words in messages, messages

    # The same inputs: the same failed build, and no new one.
    again = deploy(extra)
    assert again.failed
    assert "oc logs build/%s" % name in " ".join(again.failure_messages())
    assert [b["metadata"]["uid"] for b in builds(api_client, image_ns)] == [build["metadata"]["uid"]]

    # image_build_retry: the failed build is replaced by a new one of the same name.
    retried, rebuilt = build_and_complete(api_client, dict(extra, image_build_retry=True),
                                          seen={build["metadata"]["uid"]})
    assert retried.changed > 0
    assert rebuilt["metadata"]["name"] == name
    assert [b["status"]["phase"] for b in builds(api_client, image_ns)] == ["Complete"]


def test_check_mode_on_a_fresh_namespace_creates_nothing(api_client, image_ns):
    run = deploy(openshift(image_ns), check=True)
    assert not run.failed, run.failure_messages() or run.stderr
    assert run.changed > 0
    said = run.results("Say what check mode cannot dry-run in a namespace")
    assert any("would create ImageStream/%s and BuildConfig/%s" % (APP, APP) in r.get("msg", "") for r in said)
    assert not namespace_exists(api_client, image_ns)


def test_on_kubernetes_the_prebuilt_image_is_checked_and_nothing_is_created(api_client, image_ns):
    run = deploy({"cluster_namespace": image_ns, "cluster_image": "registry.local/mlinfra/trainer:latest"})
    assert not run.failed, run.failure_messages() or run.stderr
    warning = run.results("Warn about a tag that moves")[0]["msg"]
    assert "moving tag (latest)" in warning and "cluster_image_pull_policy: Always" in warning
    assert "prebuilt image registry.local/mlinfra/trainer:latest" in run.results("Say that the pods run a prebuilt image")[0]["msg"]
    for group, plural in ((BUILD_GROUP, "buildconfigs"), (BUILD_GROUP, "builds"), (IMAGE_GROUP, "imagestreams")):
        assert objects(api_client, image_ns, group, plural) == []


# The image role alone: in deploy.yml the roles before it (autodetect) may
# create things before its checks run.
@pytest.mark.parametrize("extra,words", [
    ({"cluster_image": REGISTRY + "/elsewhere/h-kim:0.1.0"}, "cluster_image must name an ImageStream of namespace"),
    ({"cluster_image": "quay.io/org/h-kim:0.1.0"}, "cluster_image must name an ImageStream of namespace"),
    ({"cluster_image": "{registry}/{ns}/h-kim@sha256:" + "a" * 64}, "names a digest, which a build cannot push to"),
    ({"image_torch_version": "latest"}, "must be exact versions such as 2.10.0"),
    ({"image_base": "ubuntu:latest"}, "image_base must be an image pinned by a tag other than latest"),
    ({"cluster_platform": "kubernetes", "cluster_image": "Registry.local/Trainer:1"},
     "cluster_image is not an image reference: the path component 'Trainer'"),
    ({"cluster_platform": "kubernetes", "image_build": True}, "only OpenShift builds images"),
])
def test_bad_input_fails_before_anything_is_created(api_client, image_ns, extra, words):
    extra = dict((k, v.format(registry=REGISTRY, ns=image_ns) if isinstance(v, str) else v) for k, v in extra.items())
    run = image_role("main", dict(openshift(image_ns), **extra))
    assert run.failed
    messages = " ".join(run.failure_messages())
    assert words in messages and "fix:" in messages, messages
    assert not namespace_exists(api_client, image_ns)


def test_without_the_autodetect_configmaps_it_says_to_run_that_role_first(api_client, image_ns):
    client.CoreV1Api(api_client).create_namespace({"metadata": {"name": image_ns}})
    check = image_role("main", openshift(image_ns), check=True)
    assert not check.failed, check.failure_messages()
    said = check.results("before the autodetect ConfigMaps exist")[0]["msg"]
    assert "would start a build of files/Containerfile" in said and APP + "-pod-runtime" in said
    run = image_role("main", openshift(image_ns))
    assert run.failed
    messages = " ".join(run.failure_messages())
    assert "%s-pod-runtime, %s-programs, %s-train-assets not found" % (APP, APP, APP) in messages, messages
    assert "--tags autodetect,image" in messages
    assert objects(api_client, image_ns, IMAGE_GROUP, "imagestreams") == []


def test_teardown_keeps_the_image_stream_unless_purged(api_client, image_ns):
    build_and_complete(api_client, openshift(image_ns))
    teardown_vars = {"cluster_namespace": image_ns, "cluster_platform": "openshift"}
    down = image_role("teardown", teardown_vars)
    assert not down.failed, down.failure_messages() or down.stderr
    assert down.changed > 0
    assert objects(api_client, image_ns, BUILD_GROUP, "builds") == []
    assert objects(api_client, image_ns, BUILD_GROUP, "buildconfigs") == []
    assert [s["metadata"]["name"] for s in objects(api_client, image_ns, IMAGE_GROUP, "imagestreams")] == [APP]
    assert "delete them with -e purge_image=true" in down.results("Report the image that was kept")[0]["msg"]

    again = image_role("teardown", teardown_vars)
    assert not again.failed, again.failure_messages()
    assert again.changed == 0

    purge = image_role("teardown", dict(teardown_vars, purge_image=True))
    assert not purge.failed, purge.failure_messages()
    assert objects(api_client, image_ns, IMAGE_GROUP, "imagestreams") == []

"""files/Containerfile, checked where it can be without a container engine:
what it copies is what the image role's BuildConfig puts in the build
context, every version is pinned (and the same as the role's defaults), and
the in-pod code lands where the StatefulSet mounts it and runs it from."""

import re
from pathlib import Path

import yaml

from ansible_collections.mlinfra.multinode.plugins.filter.image_reference import image_reference
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.statefulset_manifests import workload_manifests
from manifest_checks import inventory_settings

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "files" / "Containerfile"
ROLE = ROOT / "roles" / "image"


def instructions(text):
    """(KEYWORD, arguments) of each instruction, continuation lines joined, comments dropped."""
    found, current = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        keyword, dummy, arguments = current.strip().partition(" ")
        found.append((keyword.upper(), arguments.strip()))
        current = ""
    assert not current, "the last instruction ends with a continuation"
    return found


def build_args():
    """ARG name to default (None without one)."""
    result = {}
    for keyword, arguments in instructions(CONTAINERFILE.read_text()):
        if keyword == "ARG":
            name, dummy, default = arguments.partition("=")
            result[name] = default or None
    return result


def role_yaml(path):
    return yaml.safe_load((ROLE / path).read_text())


def copies():
    """(source, destination) of each COPY."""
    result = []
    for keyword, arguments in instructions(CONTAINERFILE.read_text()):
        if keyword == "COPY":
            words = arguments.split()
            assert not any(w.startswith("--") for w in words), "COPY --from/--chown: check them here first"
            result.extend((source, words[-1]) for source in words[:-1])
    return result


def env():
    values = {}
    for keyword, arguments in instructions(CONTAINERFILE.read_text()):
        if keyword == "ENV":
            values.update(dict(re.findall(r"(\w+)=(\S+)", arguments)))
    return values


def test_every_build_argument_is_an_arg_whose_default_is_the_roles_default():
    args = build_args()
    passed = role_yaml("vars/main.yml")["image_build_args"]
    defaults = role_yaml("defaults/main.yml")
    assert set(passed) <= set(args), "the role passes build arguments the Containerfile does not declare"
    for name, template in passed.items():
        option = re.fullmatch(r"\{\{ (image_\w+) \}\}", template).group(1)
        assert args[name] == str(defaults[option]), "ARG %s=%s but %s: %s" % (name, args[name], option, defaults[option])
    assert all(default for default in args.values()), "an ARG without a default: %s" % args


def test_nothing_is_latest_or_unpinned():
    args = build_args()
    base = image_reference(args["BASE_IMAGE"])
    assert base["valid"] and not base["mutable"], args["BASE_IMAGE"]
    assert [a for k, a in instructions(CONTAINERFILE.read_text()) if k == "FROM"] == ["${BASE_IMAGE}"]
    assert "latest" not in " ".join(a for dummy, a in instructions(CONTAINERFILE.read_text()))
    pins = 0
    for keyword, arguments in instructions(CONTAINERFILE.read_text()):
        for command in re.findall(r"pip install ([^&]+)", arguments) if keyword == "RUN" else []:
            packages = [w.strip('"') for w in command.split() if not w.startswith("-")]
            assert packages and all("==" in p for p in packages), command
            pins += len(packages)
    assert pins == 3  # torch, torchtitan, NCCL
    for name in ("TORCH_VERSION", "NCCL_VERSION", "TORCHTITAN_VERSION"):
        assert re.fullmatch(r"[0-9]+(\.[0-9]+)+", args[name]), (name, args[name])


def test_what_it_copies_is_the_build_context_the_buildconfig_provides():
    context = [c["destinationDir"] for c in role_yaml("vars/main.yml")["image_context"]]
    assert sorted(source.rstrip("/") for source, dummy in copies()) == sorted(context)
    for directory in context:
        # The autodetect role fills its ConfigMaps from these directories of
        # the collection, so a build by hand from the collection's tree has
        # the same context.
        assert (ROOT / directory).is_dir() and any((ROOT / directory).iterdir()), directory


def test_the_in_pod_code_lands_where_the_statefulset_mounts_and_runs_it():
    pod = workload_manifests(inventory_settings("local"))["statefulset"]["spec"]["template"]["spec"]
    containers = pod["initContainers"] + pod["containers"]
    destination = dict((source.rstrip("/"), target.rstrip("/")) for source, target in copies())
    for volume, source in (("pod-runtime", "plugins/module_utils"), ("programs", "files/bin"),
                           ("train-assets", "files/train")):
        mounts = set(mount["mountPath"] for container in containers for mount in container["volumeMounts"]
                     if mount["name"] == volume)
        assert mounts == {destination[source]}, (volume, mounts, destination[source])
    command = pod["initContainers"][0]["command"]
    assert command[0] == "python3" and command[1].startswith(destination["files/bin"] + "/")
    assert (ROOT / "files" / "bin" / command[1].rsplit("/", 1)[1]).is_file()
    plugins_dirs = set(variable["value"] for container in containers for variable in container["env"]
                       if variable["name"] == "MLINFRA_PLUGINS_DIR")
    assert plugins_dirs == {env()["MLINFRA_PLUGINS_DIR"]} == {destination["plugins/module_utils"].rsplit("/", 1)[0]}
    assert env()["PATH"].split(":")[0] == destination["files/bin"]


def test_it_fits_an_inline_dockerfile():
    # OpenShift refuses a BuildConfig whose source.dockerfile is longer.
    assert len(CONTAINERFILE.read_bytes()) < 60 * 1000

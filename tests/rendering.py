"""render.yml's files as objects, and the server-side dry run that the local
cluster's API server (with the operators' own CRDs) judges them by."""

import yaml

from ansible_cli import run_playbook

FIELD_MANAGER = "mlinfra-render-test"


def render(inventory, directory, extra=None):
    """Runs render.yml into directory; {file stem: [objects]}."""
    run = run_playbook("render.yml", inventory, dict(extra or {}, render_dir=str(directory)))
    assert not run.failed, run.failure_messages() or run.stderr
    documents = {}
    for path in sorted(directory.glob("*.yaml")):
        documents[path.stem] = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return documents


def dry_run_apply(dyn, doc):
    """A server-side apply with dryRun=All: the API server's answer, or its
    refusal as an ApiException."""
    resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    kwargs = {"namespace": doc["metadata"]["namespace"]} if resource.namespaced else {}
    return resource.server_side_apply(body=doc, name=doc["metadata"]["name"], field_manager=FIELD_MANAGER,
                                      force_conflicts=True, dry_run="All", **kwargs)

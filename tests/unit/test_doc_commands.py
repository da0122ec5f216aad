"""The commands README.md's "Using it" table and docs/quickstart.md show:
each is read from the documents (tests/doc_commands.py), names a playbook
and settings the collection has, typed values its settings check takes,
and is run as written by an integration test (run_doc_command), which also
checks the last line the quickstart says it ends with."""

import ast
import glob
import os

import pytest
from ansible_collections.mlinfra.multinode.plugins.filter.checked_settings import collection_names
from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import SETTINGS, Refused
from doc_commands import REPO, DocCommand, doc_command, doc_commands

RUNNERS = ("run_doc_command", "doc_command_in_background")


def commands_the_integration_tests_run():
    """The first argument of every run_doc_command and
    doc_command_in_background call of tests/integration, as written."""
    found = {}
    for path in sorted(glob.glob(os.path.join(REPO, "tests", "integration", "test_*.py"))):
        with open(path) as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in RUNNERS and node.args \
                    and isinstance(node.args[0], ast.Constant):
                found.setdefault(node.args[0].value, []).append(os.path.basename(path))
    return found


def test_the_documents_show_the_commands_of_every_playbook_a_user_runs():
    commands = doc_commands()
    playbooks = set(command.playbook for command in commands)
    shipped = set(os.path.basename(path) for path in glob.glob(os.path.join(REPO, "playbooks", "*.yml")))
    # awx.yml runs against an AWX (tests/unit/test_awx_playbook.py), not the
    # local cluster.
    assert playbooks == shipped - {"awx.yml"}
    for command in commands:
        assert os.path.exists(os.path.join(REPO, "playbooks", command.playbook)), command.text
        assert command.inventory == "<cluster>" or os.path.isdir(os.path.join(REPO, "inventories", command.inventory))


def test_every_option_shown_is_a_known_setting_with_a_value_it_takes():
    known = collection_names()["known"] | {"stop", "stop_running", "replicas"}
    for command in doc_commands():
        for name, value in dict(command.optional, **command.required).items():
            assert name in known, "%s shows -e %s, which no role or playbook reads" % (command.text, name)
            if name in SETTINGS and not value.isupper():
                try:
                    SETTINGS[name](value)
                except Refused as error:
                    pytest.fail("%s types %s=%s, which the settings check refuses: %s" % (
                        command.text, name, value, error))


def test_every_command_of_the_documents_is_run_as_written_by_an_integration_test():
    run = commands_the_integration_tests_run()
    for text in run:
        doc_command(text)  # each names a command the documents show
    not_run = [command.text for command in doc_commands() if not set(command.texts) & set(run)]
    assert not_run == [], "no integration test runs these as written (run_doc_command): %s" % not_run


def test_a_run_takes_only_what_the_command_offers_with_the_values_typed():
    command = DocCommand("ansible-playbook playbooks/soak.yml -i inventories/<cluster> -e soak_runs=N "
                         "[-e soak_recreate_pods=true]", "README.md")
    assert command.extra_vars({"soak_runs": 3}) == {"soak_runs": 3}
    assert command.extra_vars({"soak_runs": 3, "soak_recreate_pods": True}) == {"soak_runs": 3,
                                                                                "soak_recreate_pods": True}
    with pytest.raises(ValueError, match="needs soak_runs"):
        command.extra_vars({})
    with pytest.raises(ValueError, match="offers no soak_baseline"):
        command.extra_vars({"soak_runs": 3, "soak_baseline": 1})
    with pytest.raises(ValueError, match="types soak_recreate_pods=true, not False"):
        command.extra_vars({"soak_runs": 3, "soak_recreate_pods": False})


def test_the_line_a_command_ends_with_is_a_pattern_of_its_placeholders():
    command = DocCommand("ansible-playbook playbooks/train.yml -i inventories/<cluster> -e stop=true", "quickstart")
    command.ends_with = ["run <id> succeeded on 2 pod(s) x 1 process(es): ...; logs: <dir>/", "nothing to stop"]
    pattern = command.last_line_pattern()
    assert pattern.match("nothing to stop") and not pattern.match("nothing to stop here")
    assert pattern.match("run h-kim-1 succeeded on 2 pod(s) x 1 process(es): 9 tokens/s; logs: /tmp/x/")
    assert not pattern.match("run h-kim-1 failed on 2 pod(s) x 1 process(es): 9 tokens/s; logs: /tmp/x/")
    assert not pattern.match("run h-kim-1 succeeded on 2 pod(s) x 1 process(es): 9 tokens/s; logs: /tmp/x/ more")

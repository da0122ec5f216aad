"""The command verify-rdma.yml runs in each node's probe pod and in each
training pod (node_cli.check_command): what mlinfra node-check's own parser
reads back from it is the inventory's expectations."""

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.node.cli import check_command, node_check_parser

SETTINGS = {"network_mode": "rdma", "gpus": 8, "mtu": 9000, "rdma_devices": 4, "require_gpudirect": True,
            "min_link_rate_gbps": 0, "nccl_ib_tc": None}


def parsed(command):
    """What the program reads: sh -c SCRIPT NAME ARGS... gives it ARGS."""
    assert command[:2] == ["sh", "-c"] and command[3] == "mlinfra node-check"
    return node_check_parser().parse_args(command[4:])


def test_a_probe_checks_the_node_against_the_inventory():
    command = check_command(SETTINGS)
    assert command[2].startswith('touch "$MLINFRA_PROBE_ALIVE" 2>/dev/null; exec python3 ')
    options = parsed(command)
    assert (options.format, options.fail_on, options.mode, options.min_gpus, options.expect_gpus) == (
        "json", "never", "rdma", 8, None)
    assert (options.min_mtu, options.expect_rdma_devices, options.require_gpudirect, options.in_pod) == (
        9000, 4, True, False)
    assert options.min_link_rate_gbps is None and options.nccl_ib_tc is None


def test_a_pod_checks_what_it_sees_with_its_gpus_exactly_and_the_options_set():
    command = check_command(dict(SETTINGS, require_gpudirect=False, min_link_rate_gbps="200", nccl_ib_tc=106),
                            in_pod=True)
    assert "MLINFRA_PROBE_ALIVE" not in command[2]
    options = parsed(command)
    assert (options.in_pod, options.expect_gpus, options.min_gpus, options.require_gpudirect) == (True, 8, None, False)
    assert (options.min_link_rate_gbps, options.nccl_ib_tc) == (200.0, 106)


@pytest.mark.parametrize("settings", [{"network_mode": "tcp"}, {"rdma_devices": 0}])
def test_rdma_devices_are_expected_only_in_rdma_mode_with_nics_named(settings):
    assert parsed(check_command(dict(SETTINGS, **settings))).expect_rdma_devices is None

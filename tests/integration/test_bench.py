"""The collective benchmark of verify-rdma.yml and soak.yml, run for real
across two pods of the local cluster: each fake pod's exec is a process of
this machine, so mlinfra pod-bench starts one torchrun node per pod and the
two nodes meet over gloo on 127.0.0.1 (inventories/local/group_vars/all/
verify.yml). The sums and gathered pieces are checked element by element by
the benchmark itself; NCCL is not there, so its transport is reported as not
judged."""

import json
import re
import struct
import zlib

import pytest
from ansible_cli import deployment, run_doc_command, run_playbook
from kubernetes import client

pytestmark = pytest.mark.integration

HEALTHY = ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr"]
APP = "h-kim"


@pytest.fixture(scope="module")
def deployed(api_client):
    """Two training pods on two healthy nodes, shared by the tests here."""
    with deployment(api_client, "bench", HEALTHY) as settings:
        yield settings


def png_size(path):
    """Width and height of a PNG, after checking its signature and the CRC of
    every chunk, and that its image data inflates."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, chunks = 8, {}
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset:offset + 4])
        kind, body = data[offset + 4:offset + 8], data[offset + 8:offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length:offset + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc
        chunks[kind] = chunks.get(kind, b"") + body
        offset += 12 + length
    assert zlib.decompress(chunks[b"IDAT"]) and b"IEND" in chunks
    return struct.unpack(">II", chunks[b"IHDR"][:8])


def test_the_benchmark_runs_across_the_pods_with_right_sums(deployed, tmp_path):
    run = run_playbook("verify-rdma.yml", "local", dict(deployed, verify_node_checks=False,
                                                        verify_report_dir=str(tmp_path),
                                                        verify_bench_ops=["all_reduce", "all_gather"]))
    assert not run.failed, run.failure_messages()
    report = json.loads((tmp_path / "latest.json").read_text())
    bench = report["bench"]
    assert bench["status"] == "pass" and bench["checks"] == [] and bench["error"] is None
    document = bench["document"]
    assert (document["world_size"], document["backend"], document["device"]) == (2, "gloo", "cpu")
    assert sorted(pod["node"] for pod in bench["pods"]) == HEALTHY
    for op in ("all_reduce", "all_gather"):
        rows = document["ops"][op]["rows"]
        # 4K to 1M, doubling (the local inventory's sizes).
        assert [row["size"] for row in rows] == [4096 << shift for shift in range(9)]
        assert all(row["status"] == "measured" and row["wrong"] == 0 and row["busbw_gbps"] > 0 for row in rows)
    for pod in bench["pods"]:
        assert pod["exit_code"] == 0
        # No NCCL on the CPU: the transport is not judged, and not passed either.
        assert pod["transport"]["status"] == "skip" and "no NCCL lines" in pod["transport"]["message"]
    stamp = report["time"].replace(":", "")
    saved = json.loads((tmp_path / ("bench-%s.json" % stamp)).read_text())
    assert saved == document and saved["results"] and saved["collective"] == "all_reduce"
    width, height = png_size(tmp_path / ("bench-%s.png" % stamp))
    assert width > 300 and height > 200
    markdown = (tmp_path / ("verify-%s.md" % stamp)).read_text()
    assert "## Collective benchmark: PASS" in markdown and "### all_gather" in markdown
    assert "| 1048576 |" in markdown and "bench-%s.png" % stamp in markdown
    # Each pod read its node's RDMA ports before and after the run (the
    # recorded node's counters stand still: nothing moved, no finding).
    for pod in bench["pods"]:
        ports = pod["port_counters"]
        assert sorted(ports) == ["mlx5_10/1", "mlx5_11/1", "mlx5_6/1", "mlx5_7/1"]
        assert all(port["errors"] == {} and port["bytes"] == 0 for port in ports.values())
        assert "| %s | %s | mlx5_6/1 | net1 | 0.0 | none | - |" % (pod["pod"], pod["node"]) in markdown
    assert "RDMA port counters during the benchmark:" in markdown
    # The gate from the fabric: the pods' rails are known (the snapshot's
    # four 400 Gb/s NICs), but gloo on the CPU never used them.
    expected = bench["expected"]
    assert (expected["status"], expected["bound_gbps"]) == ("skip", 200.0)
    assert ("Expected from the fabric (SKIP): the pods' rails carry 200.0 GB/s (pod h-kim-0: mlx5_6, mlx5_7, "
            "mlx5_10, mlx5_11); NCCL was not seen sending over the RDMA NICs") in markdown
    # Each pod's placement and rails, as it saw them.
    assert "| 64 on 0, 64 on 1 / 0, 1 | GPU0-mlx5_6 PXB, GPU1-mlx5_7 PXB, GPU2-mlx5_10 PXB, GPU3-mlx5_11 PXB |" in markdown


def test_a_gate_the_bandwidth_misses_fails_the_play_naming_the_size(deployed, tmp_path):
    # No CPU reaches 100000 GB/s: the gate from 256K on must fail, the smaller sizes have none.
    run = run_playbook("verify-rdma.yml", "local", dict(deployed, verify_node_checks=False,
                                                        verify_report_dir=str(tmp_path),
                                                        verify_bench_min_busbw=["256K=100000"]))
    assert run.failed
    message = " ".join(run.failure_messages())
    assert "benchmark FAIL" in message and "all_reduce 256K: busbw" in message
    assert "below the gate of 100000 GB/s" in message and "verify_bench_pairwise=true" in message
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["verdict"] == "fail" and report["bench"]["status"] == "fail"
    gates = [row["gate"] for row in report["bench"]["document"]["ops"]["all_reduce"]["rows"]]
    assert gates[:6] == [None] * 6 and [gate["status"] for gate in gates[6:]] == ["fail"] * 3


def test_pairwise_mode_measures_the_pair_of_pods(deployed, tmp_path):
    run = run_doc_command("ansible-playbook playbooks/verify-rdma.yml -i inventories/<cluster> [-e verify_bench_pairwise=true]",
                          inventory_values=dict(deployed, verify_node_checks=False, verify_report_dir=str(tmp_path)),
                          verify_bench_pairwise=True)
    assert not run.failed, run.failure_messages()
    document = json.loads((tmp_path / "latest.json").read_text())["bench"]["document"]
    assert document["mode"] == "pairwise"
    (pair,) = document["pairs"]
    assert pair["status"] == "measured" and pair["wrong"] == 0 and len(pair["nodes"]) == 2
    # Plotted pair by pair, and shown in the report beside its numbered table.
    (plot,) = tmp_path.glob("bench-*.png")
    assert png_size(plot) == (900, 540)
    (markdown,) = tmp_path.glob("verify-*.md")
    assert "![bus bandwidth of each node pair](%s)" % plot.name in markdown.read_text()
    assert "| 1 | %s |" % " - ".join(pair["nodes"]) in markdown.read_text()


def test_soak_runs_the_benchmark_on_fresh_pods_and_judges_every_run(api_client, deployed, tmp_path):
    core = client.CoreV1Api(api_client)
    namespace = deployed["cluster_namespace"]

    def pod_uids():
        return {pod.metadata.uid for pod in core.list_namespaced_pod(
            namespace, label_selector="app.kubernetes.io/name=%s" % APP).items}

    before = pod_uids()
    run = run_doc_command("ansible-playbook playbooks/soak.yml -i inventories/<cluster> -e soak_runs=N "
                          "[-e soak_recreate_pods=true]", soak_runs=2, soak_recreate_pods=True,
                          inventory_values=dict(deployed, soak_report_dir=str(tmp_path), soak_fail_on_degraded=False))
    assert not run.failed, run.failure_messages()
    after = pod_uids()
    assert len(after) == 2 and not after & before
    (soak_dir,) = tmp_path.glob("soak-*")
    report = json.loads((soak_dir / "soak.json").read_text())
    assert [entry["run"] for entry in report["runs"]] == [1, 2] and report["not_measured"] == []
    for entry in report["runs"]:
        assert entry["throughput"] > 0 and entry["unit"] == "GB/s" and isinstance(entry["degraded"], bool)
        assert json.loads((soak_dir / ("run-%02d.json" % entry["run"])).read_text())["world_size"] == 2
    # Both runs were judged; gloo on two shared cores is noisy, so the robust
    # baseline may rest on one of them.
    assert report["baseline"]["of_runs"] == 2 and report["baseline"]["runs"] in (1, 2)
    markdown = (soak_dir / "soak.md").read_text()
    assert "| 2 |" in markdown
    # Each run's figure against the baseline, drawn beside the report.
    assert png_size(soak_dir / "soak.png") == (900, 540) and "](soak.png)" in markdown
    # What the benchmark runs could not see (gloo on one machine: no NCCL
    # log, no gate, no RDMA byte) is said in the headline, its own section
    # and the last line, with the runs it concerns.
    words = "3 not checked: transport, gate, network traffic"
    assert report["not_checked_words"] == words
    assert markdown.splitlines()[0].endswith(", %s" % words), markdown.splitlines()[0]
    assert "- **gate** (runs 1, 2): no size had a bus bandwidth gate" in markdown.split("## Not checked", 1)[1]
    assert re.match(r"2 run\(s\), (none degraded|1 degraded \(run \d; the soak is set not to fail on them\)) \(baseline ",
                    run.last_words()), run.last_words()
    assert "; benchmark runs: %s; report: " % words in run.last_words(), run.last_words()
    # Normal noise on healthy nodes is attributed to nothing, and said so:
    # fresh pods in every run, the same placement, no counter that moved.
    attribution = report["attribution"]
    assert attribution["factors"] == [] and attribution["verdict"] in ("no run degraded", "nothing separates")
    assert ("**No run degraded: nothing to attribute.**" in markdown
            or "**Nothing measured separates the degraded run" in markdown)
    for entry in report["runs"]:
        facts = json.loads((soak_dir / ("run-%02d.facts.json" % entry["run"])).read_text())
        assert {pod["uid"] for pod in facts["pods"]} <= after | before
        assert all(pod["placement"]["known"] and not pod["placement"]["misses"] for pod in facts["pods"])
        # The probes, there for the whole soak, read the run's nodes' whole
        # ports around it (the recorded nodes' counters stand still).
        assert [node["node"] for node in facts["nodes"]] == sorted(pod["node"] for pod in facts["pods"])
        for node in facts["nodes"]:
            assert sorted(node["port_counters"]) == ["mlx5_10/1", "mlx5_11/1", "mlx5_6/1", "mlx5_7/1"]
            assert all(port["bytes"] == 0 and port["errors"] == {} for port in node["port_counters"].values())
            assert "| %d | %s | mlx5_6/1 0.0; mlx5_7/1 0.0; mlx5_10/1 0.0; mlx5_11/1 0.0 |" % (
                entry["run"], node["node"]) in markdown.split("## Each run's nodes, whole ports", 1)[1]
    # They go with the soak, and leave no account behind.
    probes = core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/name=%s-probe" % APP).items
    assert all(pod.metadata.deletion_timestamp for pod in probes)
    assert "%s-probe" % APP not in [account.metadata.name for account in core.list_namespaced_service_account(namespace).items]

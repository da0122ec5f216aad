"""The closing line of a training run (train role, every start mode), as an
operator reads it: the summary of one that succeeded, the cause of one that
did not."""

from ansible_collections.mlinfra.multinode.plugins.module_utils.train.summary import (failure_line, pod_fates,
                                                                                      summary_line)

RUN = {"metric": "tokens_per_sec_per_device", "unit": "tokens/s per device", "throughput": 13740.0, "mfu": None,
       "degraded": False, "reasons": []}
RANK0 = {"state": "succeeded", "first_loss": 5.5488, "latest_loss": 3.0886, "metrics": {"step": 30, "loss": 3.0886}}
RANK1 = {"state": "succeeded", "first_loss": 5.61, "latest_loss": 3.2, "metrics": {"step": 30}}


def test_the_line_says_where_how_fast_and_how_the_loss_fell():
    line = summary_line("demo", ["h-kim-0", "h-kim-1"], 1, RUN, [RANK0, RANK1], {}, "/logs/demo")
    assert line == ("run demo succeeded on 2 pod(s) x 1 process(es): 13740.0 tokens/s per device (rank 0's median); "
                    "loss 5.5488 -> 3.0886 over 30 steps; not degraded; logs and summary: /logs/demo/")


def test_the_loss_is_rank_zeros_and_a_pod_that_did_not_answer_is_passed_over():
    line = summary_line("demo", ["a", "b"], 8, RUN, [None, RANK1], {}, "/logs/demo/")
    assert "loss 5.6100 -> 3.2000 over 30 steps;" in line and "x 8 process(es)" in line
    assert line.endswith("logs and summary: /logs/demo/")


def test_a_loss_the_log_did_not_give_is_said_to_be_missing_not_dashed():
    for status in ({"state": "succeeded", "first_loss": None, "latest_loss": None, "metrics": None},
                   {"state": "succeeded"}, "no answer"):
        line = summary_line("r", ["p-0"], 1, RUN, [status], {}, "/l")
        assert "; loss not reported in the log of rank 0's pod; " in line and "-> -" not in line
    no_step = dict(RANK0, metrics=None)
    assert "; loss 5.5488 -> 3.0886; " in summary_line("r", ["p-0"], 1, RUN, [no_step], {}, "/l")


def test_mfu_degradation_and_baseline_are_named():
    run = dict(RUN, mfu=0.4826, degraded=True, reasons=["34.1% below the baseline 20000.0 tokens/s per device"])
    baseline = {"tokens_per_sec_per_device": {"value": 20000.0, "unit": "tokens/s per device"}}
    line = summary_line("slow", ["p-0", "p-1"], 1, run, [RANK0, RANK1], baseline, "/l")
    assert "13740.0 tokens/s per device (rank 0's median), MFU 48.3%; loss" in line
    assert ("; DEGRADED: 34.1% below the baseline 20000.0 tokens/s per device "
            "(baseline 20000.0 tokens/s per device); logs") in line


def test_a_throughput_that_could_not_be_read_is_not_a_number():
    line = summary_line("r", ["p-0"], 1, dict(RUN, throughput=None), [RANK0], {}, "/l")
    assert ": throughput not reported; loss 5.5488" in line
    # Not measured is not judged: never "not degraded".
    assert "; degradation not judged; logs" in line and "not degraded" not in line
    # A script's log with no trainer's lines: the line says so, and the run stays succeeded.
    line = summary_line("s", ["p-0"], 1, {"not_reported": "no throughput lines of a known trainer in rank 0's log"},
                        [RANK0], {}, "/l")
    assert line.startswith("run s succeeded on 1 pod(s) x 1 process(es): throughput not reported (no throughput "
                           "lines of a known trainer in rank 0's log); loss 5.5488")


def test_a_run_that_is_its_own_baseline_is_not_said_to_be_compared():
    """Without train_baseline, throughput_report's baseline of one run is
    that run's own figure: the line says nothing was compared."""
    itself = {"tokens_per_sec_per_device": {"value": 13740.0, "unit": "tokens/s per device", "source": "runs",
                                            "runs": 1, "of_runs": 1}}
    line = summary_line("r", ["p-0", "p-1"], 1, RUN, [RANK0, RANK1], itself, "/l")
    assert "; not degraded within the run; no other run to compare it with (train_baseline); logs" in line
    assert "(baseline" not in line
    several = {"tokens_per_sec_per_device": dict(itself["tokens_per_sec_per_device"], runs=3, of_runs=3)}
    assert "not degraded (baseline 13740.0 tokens/s per device)" in summary_line(
        "r", ["p-0"], 1, RUN, [RANK0], several, "/l")


def pod(name, uid, node, restarts=0, last=None, deleting=None):
    """A pod object as k8s_info returns it, with what the fates read."""
    container = {"name": "trainer", "restartCount": restarts}
    if last:
        container["lastState"] = {"terminated": last}
    metadata = {"name": name, "uid": uid}
    if deleting:
        metadata["deletionTimestamp"] = deleting
    return {"metadata": metadata, "spec": {"nodeName": node}, "status": {"containerStatuses": [container]}}


def node(name, ready="True", reason="KubeletReady", since="2026-11-28T04:00:00Z"):
    return {"metadata": {"name": name}, "status": {"conditions": [
        {"type": "MemoryPressure", "status": "False"},
        {"type": "Ready", "status": ready, "reason": reason, "lastTransitionTime": since}]}}


THEN = [pod("h-kim-0", "u0", "n1"), pod("h-kim-1", "u1", "n2")]
NODES = [node("n1"), node("n2"), node("n3")]


def test_pods_untouched_on_ready_nodes_have_no_fate():
    assert pod_fates(THEN, [pod("h-kim-0", "u0", "n1"), pod("h-kim-1", "u1", "n2")], NODES) == {}


def test_a_replaced_a_deleted_and_a_restarted_pod_are_each_named():
    now = [pod("h-kim-1", "u1-new", "n3")]
    fates = pod_fates(THEN, now, NODES)
    assert fates == {
        "h-kim-0": "pod h-kim-0 was deleted while the run ran and is not back",
        "h-kim-1": "pod h-kim-1 was replaced while the run ran (deleted, evicted, or recreated by a deploy or scale; "
                   "the new one is on node n3)"}
    oom = {"reason": "OOMKilled", "exitCode": 137}
    restarted = pod_fates(THEN, [pod("h-kim-0", "u0", "n1", restarts=1, last=oom), THEN[1]], NODES)
    assert restarted == {"h-kim-0": "a container of pod h-kim-0 restarted while the run ran "
                                    "(it ended: OOMKilled, exit status 137)"}
    deleting = pod_fates(THEN, [pod("h-kim-0", "u0", "n1", deleting="2026-11-28T04:01:00Z"), THEN[1]], NODES)
    assert deleting == {"h-kim-0": "pod h-kim-0 is being deleted (since 2026-11-28T04:01:00Z)"}
    # A replacement not placed yet.
    pending = {"metadata": {"name": "h-kim-1", "uid": "u9"}, "spec": {}, "status": {}}
    assert pod_fates(THEN, [THEN[0], pending], NODES)["h-kim-1"].endswith("the new one is on node none yet)")


def test_a_lost_node_is_named_with_its_reason_and_time_or_as_gone():
    lost = [node("n1"), node("n2", ready="Unknown", reason="NodeStatusUnknown", since="2026-11-28T04:02:00Z")]
    fates = pod_fates(THEN, THEN, lost)
    assert fates == {"h-kim-1": "node n2 is not Ready (NodeStatusUnknown, since 2026-11-28T04:02:00Z)"}
    # The node gone, and with it its pod (the pod garbage collector).
    fates = pod_fates(THEN, [THEN[0]], [node("n1")])
    assert fates == {"h-kim-1": "pod h-kim-1 was deleted while the run ran and is not back; node n2 is gone from the "
                                "cluster"}


def test_nodes_that_could_not_be_read_are_not_said_to_be_gone():
    assert pod_fates(THEN, THEN, None) == {}
    # The pods still say theirs.
    assert pod_fates(THEN, [THEN[0]], None) == {
        "h-kim-1": "pod h-kim-1 was deleted while the run ran and is not back"}


FAILED = {"state": "failed", "exit_code": 1, "error": "torchrun exited with 1; see log_tail",
          "log_tail": ["launcher line", "torchrun: ChildFailedError"]}
GONE = {"state": "failed", "exit_code": None, "error": "the launch's processes are gone and none recorded an exit "
        "status (the supervisor was killed, or the pod restarted); see log_tail", "log_tail": []}


def test_the_failure_line_gives_the_cause_first_then_each_rank_in_its_own_words():
    fates = pod_fates(THEN, [THEN[0], pod("h-kim-1", "u1-new", "n2")], NODES)
    statuses = [{"pod": "h-kim-0", "json": FAILED}, {"pod": "h-kim-1", "json": GONE}]
    logs = [{"pod": "h-kim-0", "stdout": "[rank0]: step 3\n[rank0]: RuntimeError: Connection closed by peer\nsummary"},
            {"pod": "h-kim-1", "stdout": ""}]
    line = failure_line("long-run-3", "failed", statuses, logs, "/logs/long-run-3", fates=fates)
    assert line == (
        "run long-run-3 failed: pod h-kim-1 was replaced while the run ran (deleted, evicted, or recreated by a deploy "
        "or scale; the new one is on node n2); h-kim-0 (rank 0) failed (exit status 1): torchrun exited with 1; see log_tail; "
        "h-kim-1 failed (exit status None): " + GONE["error"] + "; last lines of h-kim-0: [rank0]: step 3 | "
        "[rank0]: RuntimeError: Connection closed by peer; logs: /logs/long-run-3/")


def test_each_failed_pod_is_named_with_the_ranks_its_log_shows():
    # With c10d rendezvous the ranks a pod holds are known only from its
    # workers' lines; eight per node collapse to a span.
    eight = "\n".join("[rank%d]: step 3" % rank for rank in (15, 8, 9, 10, 11, 12, 13, 14, 8))
    statuses = [{"pod": "p-0", "json": FAILED}, {"pod": "p-1", "json": FAILED}, {"pod": "p-2", "json": FAILED}]
    logs = [{"pod": "p-0", "stdout": eight}, {"pod": "p-1", "stdout": "[rank1]:x\n[rank3]:y\n[rank4]:z"},
            {"pod": "p-2", "stdout": "torchrun: no worker started"}]
    line = failure_line("r", "failed", statuses, logs, "/l")
    assert "p-0 (ranks 8-15) failed (exit status 1)" in line
    assert "p-1 (ranks 1, 3-4) failed (exit status 1)" in line
    # No worker line and none in its status's tail: no rank is guessed.
    assert "p-2 failed (exit status 1)" in line
    # The status's own tail serves when the log could not be read.
    line = failure_line("r", "failed", [{"pod": "p-0", "json": dict(FAILED, log_tail=["[rank5]: boom"])}], [], "/l")
    assert line.startswith("run r failed: p-0 (rank 5) failed (exit status 1)")


def test_a_pod_that_gave_no_status_is_named_with_the_exec_s_error_never_an_empty_reason():
    statuses = [{"pod": "h-kim-0", "json": dict(FAILED, state="succeeded")},
                {"pod": "h-kim-1", "json": None, "error": 'pods "h-kim-1" not found', "stderr": ""}]
    line = failure_line("r", "failed", statuses, [], "/l/r/")
    assert line == 'run r failed: h-kim-1 gave no status (pods "h-kim-1" not found); logs: /l/r/'
    # A pod still running when another failed was stopped with it: said so, without its launcher's lines.
    statuses[0] = {"pod": "h-kim-0", "json": dict(FAILED, state="running", exit_code=None)}
    line = failure_line("r", "failed", statuses, [{"pod": "h-kim-0", "stdout": "[INFO] Starting torchrun..."}], "/l")
    assert line == ('run r failed: h-kim-0 was still running and was stopped; h-kim-1 gave no status '
                    '(pods "h-kim-1" not found); logs: /l/')
    # The launcher's tail when the log has no worker lines; the start mode's note first.
    line = failure_line("r", "timed-out", [{"pod": "p-0", "json": FAILED}], [{"pod": "p-0", "stdout": "x"}], "/l",
                        note="every rank was stopped after train_timeout=20 s;")
    assert line.startswith("run r timed-out: every rank was stopped after train_timeout=20 s; p-0 failed")
    assert "last lines of p-0: launcher line | torchrun: ChildFailedError; logs: /l/" in line


def test_a_stop_that_stopped_runs_names_them_and_what_was_left():
    from ansible_collections.mlinfra.multinode.plugins.module_utils.train.summary import stop_line
    pods = [{"pod": "p-0", "json": {"stopped": True, "run_id": "r1", "state": "stopped", "left": []}},
            {"pod": "p-1", "json": {"stopped": True, "run_id": "r1", "state": "stopped", "left": [41, 42]}}]
    assert stop_line(pods) == "stopped the run in p-0 (run r1), p-1 (run r1; left running: 41, 42)"


def test_a_stop_with_nothing_going_says_so_pod_by_pod():
    from ansible_collections.mlinfra.multinode.plugins.module_utils.train.summary import stop_line
    pods = [{"pod": "p-0", "json": {"stopped": False, "run_id": "r1", "state": "succeeded"}},
            {"pod": "p-1", "json": {"state": "not-started"}},
            {"pod": "p-2", "json": None, "error": "exec failed"}]
    assert stop_line(pods) == ("nothing to stop: no run was going; already ended in p-0 (run r1 had succeeded); "
                               "no run started in p-1; no answer from p-2")
    assert stop_line([]) == "nothing to stop: no run was going"

"""pods_exec: follow looks at a command again while every pod's answer
holds the wanted state, within its time (with a clock of the test's own);
an exec is started again when the node could not start it yet, and asked
once more when it answered nothing where JSON was asked for."""

import types

from ansible_collections.mlinfra.multinode.plugins.module_utils import pods_exec


class Clock:
    """time.monotonic and time.sleep of a test: sleeping moves the clock."""

    def __init__(self):
        self.now = 100.0
        self.slept = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def answers(*states):
    """A look whose n-th call answers the n-th states, one per pod."""
    calls = iter(states)

    def look():
        return [{"pod": "p-%d" % index, "json": None if state is None else {"state": state, "step": 1}}
                for index, state in enumerate(next(calls))]
    return look


def test_looks_again_while_every_pod_is_running_and_stops_at_the_first_change():
    clock = Clock()
    results, looks = pods_exec.follow(answers(["running", "running"], ["running", "running"],
                                              ["running", "succeeded"]),
                                      every=2, seconds=60, wanted={"state": "running"},
                                      clock=clock.clock, sleep=clock.sleep)
    assert looks == 3 and clock.slept == [2, 2]
    assert [entry["json"]["state"] for entry in results] == ["running", "succeeded"]


def test_a_pod_without_an_answer_ends_the_following():
    clock = Clock()
    results, looks = pods_exec.follow(answers(["running", None], ["running", "running"]), every=2, seconds=60,
                                      wanted={"state": "running"}, clock=clock.clock, sleep=clock.sleep)
    assert looks == 1 and results[1]["json"] is None and clock.slept == []


def test_the_last_look_starts_within_the_time_given():
    clock = Clock()
    dummy, looks = pods_exec.follow(answers(*[["running"]] * 10), every=3, seconds=10, wanted={"state": "running"},
                                    clock=clock.clock, sleep=clock.sleep)
    # Looks at 0, 3, 6 and 9 s; one at 12 s would start after the 10 s.
    assert looks == 4 and clock.now - 100.0 == 9


def test_nothing_wanted_or_no_time_looks_once():
    for wanted, seconds in (({}, 60), ({"state": "running"}, 0)):
        clock = Clock()
        dummy, looks = pods_exec.follow(answers(["running"], ["running"]), every=1, seconds=seconds, wanted=wanted,
                                        clock=clock.clock, sleep=clock.sleep)
        assert looks == 1 and clock.slept == []


def test_every_item_wanted_must_hold_in_every_pod():
    holding = [{"json": {"state": "running", "step": 1}}, {"json": {"state": "running", "step": 1}}]
    assert pods_exec.answers_hold(holding, {"state": "running", "step": 1})
    assert not pods_exec.answers_hold(holding, {"state": "running", "step": 2})
    assert not pods_exec.answers_hold(holding + [{"json": ["running"]}], {"state": "running"})
    assert not pods_exec.answers_hold([], {"state": "running"})


def test_a_command_the_node_could_not_start_yet_is_started_again_within_bounds(monkeypatch):
    """Right after a pod is Running its node may not know the container yet
    (a kubelet's "container not found", kwok's "no exec found"): the
    command never ran, so it is started again, for at most
    NOT_STARTED_SECONDS; any other failure is the answer at once."""
    clock = Clock()
    monkeypatch.setattr(pods_exec.time, "monotonic", clock.clock)
    monkeypatch.setattr(pods_exec.time, "sleep", clock.sleep)
    not_started = {"rc": None, "stdout": "", "stderr": "",
                   "error": 'Internal error occurred: error executing command in container: no exec found for '
                            'container "trainer" in pod "ns/h-kim-0"'}
    answered = {"rc": 0, "stdout": "ok", "stderr": "", "error": None}
    calls = []

    def once(answers):
        def run(*args):
            calls.append(args)
            return dict(answers[min(len(calls), len(answers)) - 1])
        return run

    monkeypatch.setattr(pods_exec, "_exec_once", once([not_started, not_started, answered]))
    result = pods_exec.exec_in_pod(None, "ns", "h-kim-0", "trainer", ["true"], 60)
    assert result["rc"] == 0 and result["stdout"] == "ok" and len(calls) == 3 and clock.slept == [0.5, 0.5]

    calls[:], clock.slept[:] = [], []
    monkeypatch.setattr(pods_exec, "_exec_once", once([not_started]))
    result = pods_exec.exec_in_pod(None, "ns", "h-kim-0", "trainer", ["true"], 60)
    assert result["rc"] is None and "no exec found" in result["error"]
    assert sum(clock.slept) <= pods_exec.NOT_STARTED_SECONDS + 0.5 and len(calls) > 2

    calls[:] = []
    refused = dict(not_started, error="403 Forbidden")
    monkeypatch.setattr(pods_exec, "_exec_once", once([refused, answered]))
    assert pods_exec.exec_in_pod(None, "ns", "h-kim-0", "trainer", ["true"], 60)["error"] == "403 Forbidden"
    assert len(calls) == 1


def test_an_empty_answer_where_json_is_asked_for_is_asked_once_more(monkeypatch):
    """An exec that ends with status 0 and no output is run again once; a
    second empty answer is the pod's answer, named as not JSON."""
    pod = types.SimpleNamespace(metadata=types.SimpleNamespace(name="h-kim-0", namespace="ns"),
                                spec=types.SimpleNamespace(node_name="node-a"))
    replies = []

    def exec_in_pod(*args):
        return dict(replies.pop(0), seconds=0.1)

    monkeypatch.setattr(pods_exec, "exec_in_pod", exec_in_pod)
    empty = {"rc": 0, "stdout": "", "stderr": "", "error": None}
    replies[:] = [empty, dict(empty, stdout='{"transport": "IB"}')]
    [entry] = pods_exec.exec_in_pods(None, [pod], "trainer", ["cat", "nccl.json"], parse_json=True)
    assert entry["json"] == {"transport": "IB"} and entry["error"] is None and replies == []

    replies[:] = [empty, empty, empty]
    [entry] = pods_exec.exec_in_pods(None, [pod], "trainer", ["cat", "nccl.json"], parse_json=True)
    assert entry["json"] is None and entry["error"].startswith("output is not JSON") and len(replies) == 1

    # Without parse_json, or when the command failed, the answer stands.
    replies[:] = [empty, empty]
    [entry] = pods_exec.exec_in_pods(None, [pod], "trainer", ["true"])
    assert entry["rc"] == 0 and len(replies) == 1
    replies[:] = [dict(empty, rc=1), empty]
    [entry] = pods_exec.exec_in_pods(None, [pod], "trainer", ["cat", "nccl.json"], parse_json=True)
    assert entry["rc"] == 1 and entry["json"] is None and len(replies) == 1

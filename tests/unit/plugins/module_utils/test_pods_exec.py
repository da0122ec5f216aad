"""pods_exec: follow looks at a command again while every pod's answer
holds the wanted state, within its time (with a clock of the test's own);
an exec is started again when the node could not start it yet, and keeps
all its output, the part that arrives with the stream's close too; each
pod may be given arguments of its own."""

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster import pods_exec


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


class FakeStream:
    """The kubernetes client's exec stream as _exec_once uses it: each
    update() (and each peek, which updates first) takes the next batch of
    frames that arrived, (channel, text) or (None, None) for the close."""

    def __init__(self, batches):
        self.batches, self.channels, self.open = list(batches), {}, True

    def is_open(self):
        return self.open

    def update(self, timeout=0):
        if self.open and self.batches:
            for channel, text in self.batches.pop(0):
                if channel is None:
                    self.open = False
                else:
                    self.channels[channel] = self.channels.get(channel, "") + text

    def _peek(self, channel):
        self.update()
        return self.channels.get(channel, "")

    def peek_stdout(self, timeout=0):
        return self._peek(1)

    def peek_stderr(self, timeout=0):
        return self._peek(2)

    def read_stdout(self, timeout=None):
        return self.channels.pop(1, "")

    def read_stderr(self, timeout=None):
        return self.channels.pop(2, "")

    def read_channel(self, channel, timeout=0):
        return self.channels.pop(channel, "")

    def close(self):
        self.open = False


def test_output_that_comes_with_the_close_is_kept(monkeypatch):
    """The last of the output can arrive in the same read as the stream's
    close, during the peek at stderr after stdout was taken: it is kept
    (it was lost, and with it all of a short output, such as a pod's
    nccl.json, or the end of a long one)."""
    batches = [[(1, '{"transport": ')], [(2, "note\n")],
               [(1, '"IB"}'), (3, '{"metadata": {}, "status": "Success"}'), (None, None)]]
    monkeypatch.setattr(pods_exec, "stream", lambda *args, **kwargs: FakeStream(batches))
    result = pods_exec._exec_once(None, "ns", "h-kim-0", "trainer", ["cat", "nccl.json"], 60)
    assert result == {"rc": 0, "stdout": '{"transport": "IB"}', "stderr": "note\n", "error": None}
    # All of it with the close, after an empty first round.
    batches[:] = [[], [], [(1, "short"), (3, '{"metadata": {}, "status": "Success"}'), (None, None)]]
    assert pods_exec._exec_once(None, "ns", "h-kim-0", "trainer", ["true"], 60)["stdout"] == "short"


def test_each_pod_runs_the_command_with_its_own_arguments(monkeypatch):
    """pod_arguments: the pods of a round's groups each run the benchmark
    with their own part; a pod not named runs the command alone."""
    ran = {}

    def once(configuration, namespace, pod_name, container, command, timeout):
        ran[pod_name] = command
        return {"rc": 0, "stdout": "{}", "stderr": "", "error": None}

    monkeypatch.setattr(pods_exec, "_exec_once", once)

    class Pod:
        def __init__(self, name):
            self.metadata = type("Meta", (), {"name": name, "namespace": "ns", "uid": name + "-uid"})()
            self.spec = type("Spec", (), {"node_name": "node-of-" + name})()

    arguments = pods_exec.checked_pod_arguments({"h-kim-0": ["--node-rank", "0"], "h-kim-1": ["--node-rank", "1"]},
                                                ["h-kim-0", "h-kim-1", "h-kim-2"])
    results = pods_exec.exec_in_pods(None, [Pod("h-kim-0"), Pod("h-kim-1"), Pod("h-kim-2")], "trainer",
                                     ["pod-bench", "--nnodes", "2"], parse_json=True, pod_arguments=arguments)
    assert ran == {"h-kim-0": ["pod-bench", "--nnodes", "2", "--node-rank", "0"],
                   "h-kim-1": ["pod-bench", "--nnodes", "2", "--node-rank", "1"],
                   "h-kim-2": ["pod-bench", "--nnodes", "2"]}
    assert [entry["json"] for entry in results] == [{}, {}, {}]


@pytest.mark.parametrize("arguments, words", [
    ({"h-kim-9": ["x"]}, "pod_arguments names pod(s) that do not run the command: h-kim-9 (running: h-kim-0, h-kim-1)"),
    ({"h-kim-0": "--node-rank 0"}, "pod_arguments of h-kim-0 must be a list of strings"),
    ({"h-kim-0": ["--node-rank", 0]}, "pod_arguments of h-kim-0 must be a list of strings"),
])
def test_arguments_for_a_pod_that_does_not_run_or_not_strings_are_refused(arguments, words):
    with pytest.raises(ValueError) as raised:
        pods_exec.checked_pod_arguments(arguments, ["h-kim-1", "h-kim-0"])
    assert str(raised.value).startswith(words)

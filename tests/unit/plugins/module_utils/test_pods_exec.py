"""pods_exec.follow: a command looked at again while every pod's answer
holds the wanted state, within its time, with a clock of the test's own."""

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

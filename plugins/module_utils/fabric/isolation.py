# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Finding the bad nodes, ports and pairs of a fabric in a few rounds of
collective benchmarks run on disjoint groups of nodes at once.

A round is a list of tests run together, each on its own nodes: a test is a
group of nodes measured together (an all-to-all, so that every pair of the
group exchanges data), on all their ports or, per node, on some of them
(NCCL_IB_HCA). A test comes back with its bandwidth, or None when it could
not be measured (which is never taken for a pass). A test is slow when its
figure is below ``slow_fraction`` of the median of the round's tests of its
kind (its size and port count); where a round holds too few of a kind, the
planner adds controls of that kind on nodes already cleared.

The plan, for N nodes of P ports (each phase's rounds are bounded, so the
whole is at most about 3 + (q + 1) + 9 rounds, q the smallest supported
order with q * q >= N: 29 for 256 nodes):

1. Screen: the first rounds of the round robin, every node with another
   partner each time. A node slow with every partner is suspect: a bad
   node, or a bad port of it (one slow rail slows the whole collective).
2. Pairs: the suspects set aside, the rest are placed on the points of an
   affine plane of order q and each parallel class of its lines is a
   round: every pair of nodes meets in exactly one group, so a pair that is
   slow only together makes exactly one group slow.
3. Narrow, side by side: each slow group is measured again (one slow
   figure can be noise) and split in halves (within one half, or across
   the two) until the pair is left; each suspect is
   measured with a cleared partner on half its ports, then the other half
   (both slow: the node; one: a port in it, found by halving), and the
   port found is checked by a run on all the other ports.
4. Confirm: every fault found is measured once more against cleared nodes
   (the node, the port alone, the pair together); only what is slow again
   is reported.

``plan_round`` replays the plan from the results so far, so that a caller
that keeps only the history (a playbook between rounds) gets the next round
or the conclusion. Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.stats import median
from .bench_pairs import round_robin

DEFAULT_SLOW_FRACTION = 0.85
SCREEN_ROUNDS = 3
# Orders of affine planes built here: primes, and powers of two through
# GF(2^k) with these reduction polynomials (bit masks).
_GF2_POLYNOMIALS = {4: 0b111, 8: 0b1011, 16: 0b10011, 32: 0b100101, 64: 0b1000011}
_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)


class IsolationError(ValueError):
    """Input the planner cannot plan for; says which and why."""


# -- the affine plane -----------------------------------------------------------

def _field(order):
    """Addition and multiplication tables of the field of ``order`` elements."""
    if order in _PRIMES:
        return ([[(a + b) % order for b in range(order)] for a in range(order)],
                [[(a * b) % order for b in range(order)] for a in range(order)])
    polynomial = _GF2_POLYNOMIALS[order]

    def times(a, b):
        product = 0
        while b:
            if b & 1:
                product ^= a
            b >>= 1
            a <<= 1
            if a & order:
                a ^= polynomial
        return product
    return ([[a ^ b for b in range(order)] for a in range(order)],
            [[times(a, b) for b in range(order)] for a in range(order)])


def plane_order(count):
    """The smallest order q this module builds with q * q >= count."""
    for order in sorted(set(_PRIMES) | set(_GF2_POLYNOMIALS)):
        if order * order >= count:
            return order
    raise IsolationError("no affine plane for %d nodes here (at most %d)" % (count, 97 * 97))


def affine_classes(count):
    """Rounds of disjoint groups of ``count`` items (indexes) in which every
    pair of items is together exactly once: the parallel classes of the
    lines of the affine plane of order q, the items on its first ``count``
    points. Groups of fewer than two items are left out."""
    order = plane_order(count)
    add, times = _field(order)
    point = dict(((x, y), x * order + y) for x in range(order) for y in range(order))
    classes = []
    for slope in range(order):
        lines = [[point[(x, add[times[slope][x]][c])] for x in range(order)] for c in range(order)]
        classes.append(lines)
    classes.append([[point[(c, y)] for y in range(order)] for c in range(order)])
    return [[sorted(i for i in line if i < count) for line in lines if sum(1 for i in line if i < count) >= 2]
            for lines in classes]


# -- tests and their judgement --------------------------------------------------

def _test(nodes, ports=None, purpose=""):
    """A test: its nodes, and per node the ports it may use (None: all)."""
    return {"nodes": list(nodes), "ports": dict((node, list(ports[node])) for node in ports) if ports else None,
            "purpose": purpose}


def _control(members, used, all_ports):
    """A control: cleared nodes measured together on their first ``used``
    ports (all of them: no subset)."""
    subset = dict((node, list(all_ports[:used])) for node in members) if used < len(all_ports) else None
    return _test(members, subset, purpose="control")


def _kind(test, all_ports):
    """What a test is compared with: tests of about its size (the same
    power-of-two range: 15 and 16 nodes alike) on as many ports."""
    used = min(len(test["ports"].get(node, all_ports)) if test["ports"] else len(all_ports) for node in test["nodes"])
    return ((len(test["nodes"]) - 1).bit_length(), used)


def _upper_median(values):
    """The median of the upper half: a healthy figure as long as at least
    half the tests are healthy (on a small cluster a few faults slow a
    large share of them)."""
    ordered = sorted(values)
    return median(ordered[len(ordered) // 2:])


def judge_round(tests, figures, all_ports, slow_fraction=DEFAULT_SLOW_FRACTION):
    """Whether each test of a round is slow: below ``slow_fraction`` of the
    median figure of the round's controls of its kind (tests on cleared
    nodes), or where it has none, of the upper half of its tests of that
    kind. A test without a figure is slow (it could not show that it is
    not)."""
    by_kind, controls = {}, {}
    for test, figure in zip(tests, figures):
        if figure is not None:
            by_kind.setdefault(_kind(test, all_ports), []).append(figure)
            if test["purpose"] == "control":
                controls.setdefault(_kind(test, all_ports), []).append(figure)
    verdicts = []
    for test, figure in zip(tests, figures):
        kind = _kind(test, all_ports)
        reference = median(controls[kind]) if kind in controls else (
            _upper_median(by_kind[kind]) if kind in by_kind else None)
        verdicts.append(figure is None or reference is None or figure < slow_fraction * reference)
    return verdicts


# -- the phases, as generators that yield tests and receive verdicts -----------

def _narrow(members):
    """Yields lists of groups (within ``members``, a slow group of nodes) and
    receives whether each was slow; returns the pair slow only together, or
    None when the group, measured again first (one slow figure can be
    noise), or its halves do not show it again."""
    (again,) = yield [list(members)]
    if not again:
        return None
    state = ("within", list(members), None)
    while True:
        how, first, second = state
        if how == "within":
            if len(first) == 2:
                return tuple(first)
            if len(first) < 2:
                return None
            half = len(first) // 2
            low, high = first[:half], first[half:]
            groups = [group for group in (low, high) if len(group) >= 2]
            slow = yield groups
            found = dict(zip([tuple(group) for group in groups], slow))
            if found.get(tuple(low)):
                state = ("within", low, None)
            elif found.get(tuple(high)):
                state = ("within", high, None)
            else:
                state = ("across", low, high)
            continue
        if len(first) == 1 and len(second) == 1:
            return (first[0], second[0])
        first_halves = [first[:len(first) // 2], first[len(first) // 2:]] if len(first) > 1 else [first]
        second_halves = [second[:len(second) // 2], second[len(second) // 2:]] if len(second) > 1 else [second]
        pairings = [list(zip(first_halves, second_halves))]
        if len(first_halves) == 2 and len(second_halves) == 2:
            pairings.append([(first_halves[0], second_halves[1]), (first_halves[1], second_halves[0])])
        elif len(first_halves) == 2:
            pairings = [[(first_halves[0], second)], [(first_halves[1], second)]]
        elif len(second_halves) == 2:
            pairings = [[(first, second_halves[0])], [(first, second_halves[1])]]
        found = None
        for pairing in pairings:
            slow = yield [a + b for a, b in pairing]
            hits = [pair for pair, was_slow in zip(pairing, slow) if was_slow]
            if hits:
                found = hits[0]
                break
        if found is None:
            return None
        state = ("across", found[0], found[1])


def _ports(ports):
    """Yields the port subsets to measure a suspect on (with a cleared
    partner), one at a time, and receives whether each was slow; returns
    ("node", None), ("port", port) or ("none", None)."""
    half = len(ports) // 2
    if not half:
        slow = yield list(ports)
        return ("node", None) if slow else ("none", None)
    low, high = list(ports[:half]), list(ports[half:])
    low_slow = yield low
    high_slow = yield high
    if low_slow and high_slow:
        return ("node", None)
    if not low_slow and not high_slow:
        return ("none", None)
    candidates = low if low_slow else high
    while len(candidates) > 1:
        part = candidates[:len(candidates) // 2]
        slow = yield part
        candidates = part if slow else candidates[len(part):]
    port = candidates[0]
    rest_slow = yield [p for p in ports if p != port]
    return ("node", None) if rest_slow else ("port", port)


def _isolate(nodes, ports, slow_fraction):
    """The plan as a generator: yields rounds (lists of tests), receives
    each round's figures, returns the conclusion."""
    rounds_log = []

    def run(tests, purpose):
        figures = yield tests
        verdicts = judge_round(tests, figures, ports, slow_fraction)
        rounds_log.append({"purpose": purpose, "tests": [
            dict(test, figure=figure, slow=slow) for test, figure, slow in zip(tests, figures, verdicts)]})
        return verdicts

    # 1. Screen.
    slow_with, met = {}, {}
    for pairs in round_robin(len(nodes))[:SCREEN_ROUNDS]:
        tests = [_test((nodes[a], nodes[b]), purpose="screen") for a, b in pairs]
        verdicts = yield from run(tests, "screen")
        for test, slow in zip(tests, verdicts):
            for node in test["nodes"]:
                met[node] = met.get(node, 0) + 1
                slow_with[node] = slow_with.get(node, 0) + int(slow)
    suspects = [node for node in nodes if met.get(node) and slow_with[node] == met[node]]
    cleared = [node for node in nodes if node not in suspects]

    # 2. Pairs.
    slow_groups = []
    for lines in affine_classes(len(cleared)):
        tests = [_test([cleared[i] for i in line], purpose="pairs") for line in lines]
        verdicts = yield from run(tests, "pairs")
        slow_groups.extend(test["nodes"] for test, slow in zip(tests, verdicts) if slow)

    # 3. Narrow the slow groups (one at a time where they share a node) and
    # each suspect's ports, side by side; the other cleared nodes are the
    # partners and controls.
    narrowings, unresolved = [], []
    for group in slow_groups:
        narrowings.append({"members": group, "steps": _narrow(group), "asked": None, "found": None, "done": False})
    port_checks = [{"node": node, "steps": _ports(list(ports)), "asked": None, "found": None, "done": False}
                   for node in suspects]
    for check in narrowings + port_checks:
        try:
            check["asked"] = next(check["steps"])
        except StopIteration as end:
            check["found"], check["done"] = end.value, True
    while any(not check["done"] for check in narrowings + port_checks):
        tests, owners, _spare = _assemble(narrowings, port_checks, cleared, ports)
        if not any(owners):
            # Too few cleared nodes to measure what is left against.
            for check in narrowings + port_checks:
                if not check["done"]:
                    check["found"], check["done"] = (None if "members" in check else ("unresolved", None)), True
                    unresolved.append(check.get("members") or check["node"])
            break
        verdicts = yield from run(tests, "narrow")
        answers = {}
        for slow, owner in zip(verdicts, owners):
            if owner is not None:
                answers.setdefault(id(owner), (owner, []))[1].append(slow)
        for owner, slow in answers.values():
            try:
                owner["asked"] = owner["steps"].send(slow if "members" in owner else slow[0])
            except StopIteration as end:
                owner["found"], owner["done"] = end.value, True

    # 4. Confirm.
    found_pairs = sorted(set(tuple(sorted(check["found"])) for check in narrowings if check["found"]))
    found_nodes = [check["node"] for check in port_checks if check["found"][0] == "node"]
    found_ports = [(check["node"], check["found"][1]) for check in port_checks if check["found"][0] == "port"]
    confirmations, partners = [], [node for node in cleared if node not in {n for pair in found_pairs for n in pair}]
    # Its controls first: a pair of cleared nodes on all ports, and one on a
    # single port when a port is confirmed.
    controls = []
    for used in ([len(ports)] + ([1] if found_ports else [])):
        if len(partners) >= 2:
            controls.append(_control([partners.pop(), partners.pop()], used, ports))
    for node in found_nodes:
        if partners:
            confirmations.append(("node", node, _test((node, partners.pop()), purpose="confirm")))
    for node, port in found_ports:
        if partners:
            partner = partners.pop()
            confirmations.append(("port", (node, port), _test((node, partner), {node: [port]}, purpose="confirm")))
    # Each member of a pair was cleared by the screen and fast in every
    # other group it joined: the pair alone is measured again.
    for a, b in found_pairs:
        confirmations.append(("pair", (a, b), _test((a, b), purpose="confirm")))
    bad_nodes, bad_ports, bad_pairs, not_reproduced = [], [], [], []
    if confirmations:
        tests = [test for _what, _fault, test in confirmations] + controls
        tests.extend(_controls(tests, partners, ports))
        verdicts = yield from run(tests, "confirm")
        found = {"node": bad_nodes, "port": bad_ports, "pair": bad_pairs}
        for (what, fault, _test_), slow in zip(confirmations, verdicts):
            (found[what] if slow else not_reproduced).append(fault)
    not_reproduced.extend(check["node"] for check in port_checks if check["found"][0] == "none")
    return {"bad_nodes": sorted(bad_nodes), "bad_ports": sorted(bad_ports), "bad_pairs": sorted(bad_pairs),
            "not_reproduced": not_reproduced, "unresolved": unresolved, "rounds": len(rounds_log),
            "log": rounds_log}


CONTROLS_PER_KIND = 3


def _assemble(narrowings, port_checks, cleared, all_ports):
    """One round of the narrowing phase: the groups each pending narrowing
    asks for (one narrowing at a time among those that share a node), each
    pending port check with a cleared partner, and for every kind of test
    at least one control of cleared nodes; what there are not enough spare
    nodes for waits for a later round. Returns the tests, their owners
    (None for a control) and the nodes left spare."""
    spare = list(cleared)
    tests, owners, controlled = [], [], set()

    def take(count):
        return [spare.pop() for _index in range(count)]

    def control(kind):
        # A kind gets its control before its first test is taken, or not at all.
        if kind in controlled:
            return True
        bucket, used = kind
        size = max(2, 2 ** bucket)
        if len(spare) < size:
            return False
        tests.append(_control(take(size), used, all_ports))
        owners.append(None)
        controlled.add(kind)
        return True

    for check in narrowings:
        if check["done"] or not set(check["members"]) <= set(spare):
            continue
        asked = [_test(group, purpose="narrow") for group in check["asked"]]
        for node in check["members"]:
            spare.remove(node)
        if all(control(_kind(test, all_ports)) for test in asked):
            tests.extend(asked)
            owners.extend([check] * len(asked))
        else:
            spare.extend(check["members"])
    for check in port_checks:
        if check["done"] or not spare:
            continue
        partner = spare.pop()
        test = _test((check["node"], partner), {check["node"]: check["asked"]}, purpose="ports")
        if control(_kind(test, all_ports)):
            tests.append(test)
            owners.append(check)
        else:
            spare.append(partner)
    extra = _controls(tests, spare, all_ports, CONTROLS_PER_KIND - 1)
    return tests + extra, owners + [None] * len(extra), spare


def _controls(tests, spare, all_ports, count=CONTROLS_PER_KIND):
    """``count`` controls for each kind of test of a round that is not
    expected healthy (suspects, slow groups and faults are measured there):
    groups of cleared nodes of that size on as many ports, taken from
    ``spare`` (which they use up); fewer where too few nodes are spare."""
    controls = []
    for bucket, used in sorted(set(_kind(test, all_ports) for test in tests)):
        size = max(2, 2 ** bucket)
        for _index in range(count):
            if len(spare) < size:
                break
            controls.append(_control([spare.pop() for _member in range(size)], used, all_ports))
    return controls


def plan_round(nodes, ports, history, slow_fraction=DEFAULT_SLOW_FRACTION):
    """The next round after ``history`` (the figures of each round so far,
    in order), or the conclusion: {"round": tests} or {"conclusion": ...}.
    ``nodes``: names; ``ports``: each node's port names (NICs), in order."""
    if len(set(nodes)) != len(nodes) or len(nodes) < 4:
        raise IsolationError("fault isolation needs at least 4 distinct nodes, got %d" % len(set(nodes)))
    if not ports:
        raise IsolationError("fault isolation needs the nodes' ports (at least one)")
    steps = _isolate(list(nodes), list(ports), slow_fraction)
    try:
        tests = next(steps)
        for figures in history:
            if len(figures) != len(tests):
                raise IsolationError("a round of %d tests came back with %d figures" % (len(tests), len(figures)))
            tests = steps.send(list(figures))
    except StopIteration as end:
        return {"conclusion": end.value}
    return {"round": tests}


def isolate(nodes, ports, measure, slow_fraction=DEFAULT_SLOW_FRACTION):
    """Runs the whole plan with ``measure(tests) -> figures`` (one round at
    a time) and returns the conclusion."""
    steps = _isolate(list(nodes), list(ports), slow_fraction)
    try:
        tests = next(steps)
        while True:
            tests = steps.send(list(measure(tests)))
    except StopIteration as end:
        return end.value

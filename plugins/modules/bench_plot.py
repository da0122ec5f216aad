#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bench_plot
short_description: Chart of a collective benchmark's bus bandwidth, or of a soak's runs, as a PNG file
version_added: 0.1.0
description:
  - Reads the JSON result document that C(mlinfra nccl-bench --json) writes (schema 1, see C(docs/benchmark.md))
    and draws it as a PNG line chart. One line per op of the sweep (all_reduce, all_gather, reduce_scatter,
    alltoall), the bus bandwidth in GB/s (busbw, of the placement the op measures, in-place for all_reduce and
    out-of-place for the others) against the message size on a log2 axis.
  - The gates of the run (C(--min-busbw SIZE=GBPS)) are a dashed grey step line; sizes that fail, below their gate
    or with wrong elements, are ringed in red. The title names the ranks, nodes, type, backend and the verdict.
  - Sizes that were not measured have no figure and are left out of the chart (the document's C(verdict) and
    C(reasons) still count them). A sweep that measured nothing fails the task.
  - A pairwise run (C(--pairwise)) is drawn pair by pair, numbered in the document's order as the verification
    report's pair table numbers them, the slow pairs ringed in red; one without a measured pair fails the task.
  - A soak report (C(soak.json), written by C(playbooks/soak.yml)) is drawn run by run, its baseline and the level
    below which a run is degraded as dashed lines, the degraded runs ringed in red; one without a measured run fails
    the task.
  - The same document always gives the same bytes. O(dest) is written, atomically, only when its content would
    change; the task then reports C(changed).
author:
  - mlinfra maintainers (@mlinfra)
options:
  src:
    description:
      - Path of the benchmark's JSON result document, or of a soak report (C(soak.json)), on the managed host. A
        missing file, one that is neither or is of a newer schema fail the task, naming the file and what is wrong.
    type: path
    required: true
  dest:
    description:
      - Path of the PNG file to write on the managed host. Its directory must exist.
    type: path
    required: true
  title:
    description:
      - First line of the chart's title, for example the cluster's name. The second line, the run's ranks,
        nodes and verdict, is always drawn.
      - Characters outside ASCII letters, digits and common punctuation are drawn as C(?).
      - "Without it: V(mlinfra nccl-bench: bus bandwidth by message size)."
    type: str
  width:
    description:
      - Width of the image in pixels, from 400 to 4000. Text is drawn larger on larger images (twice the font's
        5x7 pixels from 900x540, three times from 1350x810).
    type: int
    default: 900
  height:
    description:
      - Height of the image in pixels, from 240 to 4000.
    type: int
    default: 540
attributes:
  check_mode:
    description: Draws the chart and reports whether O(dest) would change; writes nothing.
    support: full
  diff_mode:
    description: Nothing to show as a diff; the file is binary.
    support: none
notes:
  - Needs only the Python standard library where it runs.
  - The x axis is the size that the sweep requested (C(requested_size)), to which the gates apply; it differs
    from nccl-tests' size column only where a size does not divide evenly among the ranks.
"""

EXAMPLES = r"""
- name: Draw the result of a benchmark run (mlinfra nccl-bench ... --json /tmp/bench.json)
  mlinfra.multinode.bench_plot:
    src: /tmp/bench.json
    dest: /tmp/bench.png
    title: "cluster h200-a: all_reduce 1M..8G"
  register: chart

- name: Bring the chart home
  ansible.builtin.fetch:
    src: "{{ chart.dest }}"
    dest: reports/

- name: A larger chart, drawn on the controller from a fetched document
  mlinfra.multinode.bench_plot:
    src: reports/bench.json
    dest: reports/bench-large.png
    width: 1800
    height: 1080
  delegate_to: localhost
"""

RETURN = r"""
dest:
  description: Path of the PNG file, as given in O(dest).
  returned: always
  type: str
  sample: /tmp/bench.png
ops:
  description:
    - The ops drawn, in the document's order; ops without a measured size are left out. V(pairs) for a pairwise
      run, V(soak) for a soak report.
  returned: success
  type: list
  elements: str
  sample: [all_reduce]
points:
  description: How many measured sizes were drawn, over all ops (pairs of a pairwise run, runs of a soak).
  returned: success
  type: int
  sample: 14
"""

import errno
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.mlinfra.multinode.plugins.module_utils.report.bench_plot import DEFAULT_HEIGHT, DEFAULT_WIDTH, \
    check_dimensions, plot_file


def argument_spec():
    return dict(
        src=dict(type="path", required=True),
        dest=dict(type="path", required=True),
        title=dict(type="str"),
        width=dict(type="int", default=DEFAULT_WIDTH),
        height=dict(type="int", default=DEFAULT_HEIGHT),
    )


def read_current(path):
    """The bytes of the file at path, or None when there is none."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise


def write_png(module, dest, data):
    """Writes data to a temporary file beside dest and moves it over dest."""
    handle, temporary = tempfile.mkstemp(prefix=".%s." % os.path.basename(dest), suffix=".tmp",
                                         dir=os.path.dirname(dest))
    try:
        with os.fdopen(handle, "wb") as output:
            output.write(data)
        module.atomic_move(temporary, dest)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    dest = params["dest"]
    try:
        check_dimensions(params["width"], params["height"])
        chart = plot_file(params["src"], width=params["width"], height=params["height"], title=params["title"])
    except ValueError as exc:
        module.fail_json(msg=str(exc), changed=False, dest=dest)
    if os.path.isdir(dest):
        module.fail_json(msg="dest %s is a directory: give the path of the PNG file to write" % dest, changed=False,
                         dest=dest)
    directory = os.path.dirname(os.path.abspath(dest))
    if not os.path.isdir(directory):
        module.fail_json(msg="dest %s: its directory %s does not exist; create it first" % (dest, directory),
                         changed=False, dest=dest)
    try:
        changed = read_current(dest) != chart["png"]
        if changed and not module.check_mode:
            write_png(module, os.path.abspath(dest), chart["png"])
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot write dest %s: %s" % (dest, exc.strerror or exc), changed=False, dest=dest)
    module.exit_json(changed=changed, dest=dest, ops=chart["ops"], points=chart["points"])


if __name__ == "__main__":
    main()

"""What the collection says of itself: its users have never seen the
systems it replaces by any private name, so the product's files (what the
collection's tarball and README hold) name each by what it is (the h-kim
StatefulSet guide, the OKE host-network guide, a hand-run lm-train.sh),
never as "the seeds". Random seeds are another matter."""

import os
import re

from conftest import REPO

PRODUCT = ("README.md", "galaxy.yml", "meta", "plugins", "roles", "playbooks", "files", "inventories", "docs",
           "changelogs/fragments", "execution-environment.yml")
# Dated measurement records keep the labels their runs were taken with.
NOT_PRODUCT = (os.path.join("docs", "measurements"),)
RANDOM_SEED = re.compile(r"random|manual_seed|its own seed|seed=|--seed|_seed|seed_")


def product_files():
    for entry in PRODUCT:
        path = os.path.join(REPO, entry)
        if os.path.isfile(path):
            yield entry
        for root, dirs, names in os.walk(path):
            dirs[:] = [name for name in dirs if name != "__pycache__"]
            for name in names:
                relative = os.path.relpath(os.path.join(root, name), REPO)
                if not relative.startswith(NOT_PRODUCT) and not name.endswith((".pyc", ".png", ".gz")):
                    yield relative


def test_the_product_never_speaks_of_seeds():
    found = []
    for relative in product_files():
        with open(os.path.join(REPO, relative), errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if re.search(r"\bseeds?\b|\bseed's", line, re.I) and not RANDOM_SEED.search(line):
                    found.append("%s:%d: %s" % (relative, number, line.strip()))
    assert found == []

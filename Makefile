# Entry points; the scripts under scripts/ do the work and can be run directly.
# `make setup` once on a fresh clone, then any of the test targets.
.PHONY: setup test unit lint sanity molecule oldest-core

setup:
	bash scripts/setup.sh

# The whole suite, exactly as CI runs it (.ci/run).
test:
	bash scripts/test.sh

# pytest over tests/ (unit tests and the `integration`-marked ones).
unit:
	bash scripts/test.sh pytest

lint:
	bash scripts/test.sh lint

sanity:
	bash scripts/test.sh sanity

molecule:
	bash scripts/test.sh molecule

# Tests against the oldest ansible-core declared in meta/runtime.yml.
oldest-core:
	bash scripts/test.sh oldest-core oldest-sanity

# ---------------------------------------------------------------------------
# Local cluster (tools/localcluster): cluster-up / cluster-down go below.
# ---------------------------------------------------------------------------
.PHONY: cluster-up cluster-down

# Starts the local cluster (builds its binaries on first use, minutes) and
# waits until the API and every node are Ready; a no-op when it is up.
# export KUBECONFIG=$$(tools/localcluster/cluster.sh kubeconfig) to use it.
cluster-up:
	bash tools/localcluster/cluster.sh up

# Stops the local cluster and deletes its state (.work/localcluster).
cluster-down:
	bash tools/localcluster/cluster.sh down

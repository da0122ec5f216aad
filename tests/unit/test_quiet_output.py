"""What a user's screen shows of a playbook run with the repository's
ansible.cfg (the default stdout callback): no deprecation warnings caused
by the collection's own code, and no skipped tasks, which used to bury the
verdicts in hundreds of lines."""

import subprocess

from ansible_cli import ansible_env, playbook_command
from conftest import REPO


def test_a_render_prints_no_deprecation_warning_and_no_skipped_task(tmp_path):
    # The job start mode renders a run's objects from the StatefulSet too
    # (train_jobs), besides every role's manifests (workload_manifests).
    command = playbook_command("render.yml", "local", {"render_dir": str(tmp_path), "train_start_mode": "job",
                                                       "cluster_storage_mode": "shared"})
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    proc = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout
    assert "DEPRECATION" not in proc.stdout, proc.stdout
    assert "skipping:" not in proc.stdout, proc.stdout
    assert (tmp_path / "train.yaml").read_text().count("kind: Job") == 1


def test_a_run_ends_with_what_it_found_after_the_recap():
    command = playbook_command("status.yml", "local", {"verify_bench_pairwse": True})
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    proc = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    assert proc.returncode != 0
    lines = proc.stdout.rstrip().splitlines()
    # The verdict_block callback: its heading and one line per verdict or
    # failure, after the play recap, the last lines on screen.
    heading = lines.index("mlinfra.multinode: what this run found")
    assert heading > max(index for index, line in enumerate(lines) if line.startswith("PLAY RECAP"))
    assert lines[heading + 1:] == [
        "FAILED Show the state of the GPU pods of the cluster: Refuse settings that cannot be used, before anything "
        "changes: 1 setting(s) refused: verify_bench_pairwse (given with -e) is not a variable of mlinfra.multinode; "
        "did you mean verify_bench_pairwise?; fix: write verify_bench_pairwise (docs/inventory.md lists every one), or "
        "set cluster_allow_unknown_settings=true to pass names the collection does not know"]

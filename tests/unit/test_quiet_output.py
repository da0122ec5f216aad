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

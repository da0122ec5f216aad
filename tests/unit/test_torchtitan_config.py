"""The train role's TorchTitan settings, parsed by TorchTitan itself: the
collection's Llama 3 config (files/train/llama3_8b.toml) and the overrides
the role renders from its shortcuts, turned into command-line flags by the
launcher's own code, go through the ConfigManager of TorchTitan 0.2.2, the
version the image installs (.work/torchtitan-config, scripts/setup.sh)."""

import json
import os
import resource
import subprocess

import yaml
from ansible_cli import run_playbook
from ansible_collections.mlinfra.multinode.plugins.module_utils.train.launch import torchtitan_entry
from conftest import REPO, WORKLOAD_PYTHON

TORCHTITAN = os.path.join(REPO, ".work", "torchtitan-config")
CONFIG = os.path.join(REPO, "files", "train", "llama3_8b.toml")
PARSE = """
import json, sys
from torchtitan.config import ConfigManager
c = ConfigManager().parse_args(sys.argv[1:])
print(json.dumps({"steps": c.training.steps, "batch": c.training.local_batch_size, "seq_len": c.training.seq_len,
                  "compile": c.compile.enable, "converters": c.model.converters,
                  "fp8_all_gather": c.quantize.linear.float8.enable_fsdp_float8_all_gather,
                  "fp8_scales": c.quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp,
                  "dp_shard": c.parallelism.data_parallel_shard_degree,
                  "tp": c.parallelism.tensor_parallel_degree, "pp": c.parallelism.pipeline_parallel_degree,
                  "cp": c.parallelism.context_parallel_degree, "flavor": c.model.flavor, "name": c.model.name,
                  "assets": c.model.hf_assets_path, "dataset": c.training.dataset,
                  "dataset_path": c.training.dataset_path, "log_freq": c.metrics.log_freq,
                  "plain_metrics": c.metrics.disable_color_printing}))
"""


def _limit_cpu_seconds():
    resource.setrlimit(resource.RLIMIT_CPU, (PARSE_CPU_SECONDS, PARSE_CPU_SECONDS))


# The parse needs a few seconds of CPU. The oldest-core stage runs these tests
# at nice 19 beside pytest's two workers, where importing torch waited more
# than two minutes for a core: a parse that runs away is stopped by its CPU
# time, and the wall-clock limit only guards against one that hangs.
PARSE_CPU_SECONDS = 120
PARSE_WALL_SECONDS = 1200


def torchtitan_parse(argv):
    env = dict(os.environ, PYTHONPATH=TORCHTITAN)
    done = subprocess.run([WORKLOAD_PYTHON, "-c", PARSE] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, timeout=PARSE_WALL_SECONDS, check=False,
                          preexec_fn=_limit_cpu_seconds)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def rendered_torchtitan_argv(tmp_path, extra):
    """What the launcher would hand torchtitan.train for the oke inventory
    rendered with `extra` (the Job start mode writes the launch into the
    manifest, so no cluster is needed)."""
    run = run_playbook("render.yml", "oke", dict(extra, render_dir=str(tmp_path), train_start_mode="job"))
    assert not run.failed, run.failure_messages()
    job = list(yaml.safe_load_all((tmp_path / "train.yaml").read_text()))[-1]
    launch = job["spec"]["template"]["spec"]["containers"][0]["command"][6:]
    config = launch[launch.index("--config") + 1]
    overrides = [arg[len("--override="):] for arg in launch if arg.startswith("--override=")]
    assert config == "/opt/mlinfra/files/train/llama3_8b.toml"
    # The pods' path of the shipped file; here it is the repository's.
    return torchtitan_entry(CONFIG, overrides)[2:]


def test_the_shipped_config_is_a_llama3_8b_job_of_torchtitan_0_2(tmp_path):
    parsed = rendered_torchtitan_argv(tmp_path, {})
    assert parsed == ["--job.config_file", CONFIG]
    config = torchtitan_parse(parsed)
    assert config["name"] == "llama3" and config["flavor"] == "8B"
    assert config["assets"] == "/workspace/assets/llama3" and config["dataset_path"] == "/workspace/datasets/c4"
    assert config["dp_shard"] == -1 and config["compile"] is False and config["converters"] == []
    # Plain metric lines: the train role's progress and summary read them.
    assert config["plain_metrics"] is True


def test_every_shortcut_reaches_torchtitan(tmp_path):
    shortcuts = {"train_steps": 50, "train_local_batch_size": 2, "train_seq_len": 4096, "train_compile": True,
                 "train_float8": True, "train_dp_shard": 2, "train_tp": 2, "train_pp": 1, "train_cp": 1,
                 "train_hf_assets_path": "/workspace/Assets/Llama-3.1-8B", "train_dataset": "c4_test",
                 "train_overrides": {"metrics.log_freq": 5, "training.steps": 60}}
    config = torchtitan_parse(rendered_torchtitan_argv(tmp_path, shortcuts))
    # train_overrides win over the shortcuts; paths keep their case.
    assert config["steps"] == 60 and config["log_freq"] == 5
    assert (config["batch"], config["seq_len"], config["compile"]) == (2, 4096, True)
    assert config["converters"] == ["quantize.linear.float8"]
    assert config["fp8_all_gather"] is True and config["fp8_scales"] is True
    assert (config["dp_shard"], config["tp"], config["pp"], config["cp"]) == (2, 2, 1, 1)
    assert config["assets"] == "/workspace/Assets/Llama-3.1-8B" and config["dataset"] == "c4_test"


def test_false_turns_a_setting_of_the_config_off(tmp_path):
    """The config turns plain metrics lines on; false becomes --section.no-key."""
    config = torchtitan_parse(rendered_torchtitan_argv(tmp_path, {
        "train_overrides": {"metrics.disable_color_printing": False}}))
    assert config["plain_metrics"] is False

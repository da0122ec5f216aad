"""Careless and hostile values of the inventory's variables, with what the
settings check (plugins/module_utils/inventory_settings.py) must say of each:
tests/unit/plugins/module_utils/test_inventory_settings.py checks every case
against the Python, tests/integration/test_hostile_input.py runs them through
the playbooks on the local cluster."""

# A valid deployment, as inventories/local's group_vars give it (strings
# where -e would give strings).
GOOD = {
    "cluster_name": "local", "cluster_platform": "openshift", "cluster_namespace": "mlinfra-local",
    "cluster_app_name": "h-kim", "cluster_gpu_nodes": ["node-a", "node-b", "node-c"], "replicas": "2",
    "cluster_gpus_per_node": 4, "cluster_network_mode": "rdma", "cluster_host_network": False,
    "cluster_rdma_nics": [{"name": "eno5np0-network", "resource": "openshift.io/eno5np0", "pf": "eno5np0"}],
    "cluster_rdma_mtu": 9000, "cluster_storage_mode": "per-pod", "cluster_storage_size": "100Gi",
    "cluster_shm_size": "32Gi", "cluster_pod_cpu": "32", "cluster_pod_memory": "256Gi",
    "cluster_image": "image-registry.openshift-image-registry.svc:5000/mlinfra/multinode:0.1.0",
    "cluster_nccl_env_overrides": {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": None}, "sriov_operator_namespace":
    "openshift-sriov-network-operator", "train_run_id": "Job-OK", "train_run_dir": "mlinfra-runs",
}

# (variable, value, words of the problem, words of the fix), per family.
BAD = [
    # booleans
    ("cluster_host_network", "maybe", "is not a boolean", "give true or false"),
    ("cluster_host_network", "flase", "is not a boolean", "give true or false"),
    # Argument specs take y and n, Jinja's bool filter reads both as false.
    ("cluster_host_network", "y", "is not a boolean", "give true or false"),
    ("verify_bench", "n", "is not a boolean", "give true or false"),
    ("statefulset_require_verified_nodes", "nope", "is not a boolean", "give true or false"),
    ("verify_bench", 2, "is not a boolean", "give true or false"),
    ("purge_workspaces", "all", "is not a boolean", "give true or false"),
    ("image_build", [], "is not a boolean", "give true or false"),
    ("train_compile", "enabled", "is not a boolean", "give true or false"),
    # Named as typed on the command line (deploy.yml -e stop_running=...).
    ("stop_running", "maybe", "stop_running is not a boolean", "give true or false"),
    ("stop", "maybe", "stop is not a boolean", "give true or false"),
    # whole numbers and their ranges
    ("replicas", "-1", "is out of range", "0 or more"),
    ("replicas", "six", "is not a whole number", "whole number"),
    ("replicas", "2.5", "is not a whole number", "whole number"),
    ("replicas", True, "is not a whole number", "whole number"),
    ("cluster_rdma_mtu", "-5", "is out of range", "from 1280 to 9216"),
    ("cluster_rdma_mtu", 99999999, "is out of range", "from 1280 to 9216"),
    ("cluster_rdma_mtu", "jumbo", "is not a whole number", "whole number"),
    ("cluster_gpus_per_node", 0, "is out of range", "1 or more"),
    ("statefulset_rendezvous_port", 70000, "is out of range", "from 1024 to 65535"),
    ("verify_bench_port", 0, "is out of range", "from 1024 to 65535"),
    # A privileged, well-known port: sshd's under host networking.
    ("statefulset_rendezvous_port", 22, "is out of range", "from 1024 to 65535"),
    ("train_rdzv_port", 443, "is out of range", "from 1024 to 65535"),
    # Runs without a bound kept privileged probes for as long as they lasted.
    ("soak_runs", 1000000, "is out of range", "from 1 to 1000"),
    ("train_rdzv_port", "http", "is not a whole number", "whole number"),
    ("cluster_pod_ready_timeout", 0, "is out of range", "1 or more"),
    ("train_timeout", "-60", "is out of range", "1 or more"),
    ("sriov_num_vfs", 1000, "is out of range", "from 1 to 256"),
    ("soak_threshold", 1.5, "is out of range", "above 0 and below 1"),
    ("soak_threshold", "0", "is out of range", "above 0 and below 1"),
    ("soak_threshold", "nan", "is not a number", "give a number"),
    ("verify_min_link_rate_gbps", "-1", "is out of range", "0 or more"),
    # quantities
    ("cluster_storage_size", "100", "is not a Kubernetes quantity with its unit", "100Gi"),
    ("cluster_storage_size", "lots", "is not a Kubernetes quantity with its unit", "100Gi"),
    ("cluster_storage_size", "10 Gi", "is not a Kubernetes quantity with its unit", "100Gi"),
    ("cluster_shm_size", "32gb", "is not a Kubernetes quantity with its unit", "100Gi"),
    ("cluster_pod_memory", "", "is not a Kubernetes quantity with its unit", "100Gi"),
    ("cluster_pod_cpu", "lots", "is not a CPU quantity", "32 or 500m"),
    ("cluster_pod_cpu", "-4", "is not a CPU quantity", "32 or 500m"),
    ("verify_bench_max_size", "1G\n", "holds a line break", "one line of text"),
    # names that end up in manifests
    ("cluster_namespace", "My_Namespace", "is not a DNS label", "lower-case letters"),
    ("cluster_namespace", "a" * 64, "is not a DNS label", "at most 63"),
    ("cluster_namespace", "", "is not a DNS label", "lower-case letters"),
    ("cluster_app_name", "h-kim-" + "x" * 50, "is not a DNS label of at most 52", "pod names add -N"),
    ("cluster_storage_class", "fast\n        volumeName: local-pv-00", "holds a line break", "DNS subdomain"),
    ("cluster_storage_class", "fast: x", "is not a DNS subdomain", "DNS subdomain"),
    ("cluster_shared_claim_name", "ws\nspec: {}", "holds a line break", "DNS subdomain"),
    ("cluster_shared_claim_name", "Workspace", "is not a DNS subdomain", "DNS subdomain"),
    ("cluster_gpu_nodes", ["node-a", "Node B"], "is not a DNS subdomain", "DNS subdomain"),
    ("cluster_gpu_nodes", "node-a", "is not a list", "give a list"),
    ("cluster_gpu_node_selector", "pool in (a,b", "is not a label selector", "kubectl get nodes -l"),
    ("cluster_gpu_nodes_exclude", ["Node B"], "is not a DNS subdomain", "DNS subdomain"),
    # A NIC without its resource (the argument spec printed itself whole).
    ("cluster_rdma_nics", [{"name": "eno5np0-network"}], "entry 'eno5np0-network' has no resource",
     "write each NIC as {name: eno5np0-network, resource: openshift.io/eno5np0rdma"),
    ("cluster_rdma_nics", [{"name": "eno5np0-network", "resource": "openshift.io/eno5np0", "vfs": 4}],
     "has vfs, which a NIC does not", "write each NIC as"),
    ("cluster_rdma_nics", [{"name": "eno5np0-network", "resource": "eno5np0 rdma"}], "is not a resource name",
     "write each NIC as"),
    ("sriov_operator_namespace", "sriov operator", "is not a DNS label", "lower-case letters"),
    ("train_volcano_queue", "Default Queue", "is not a DNS label", "lower-case letters"),
    ("train_queue_name", "Team A", "is not a LocalQueue name", "lower-case letters"),
    ("sriov_node_label", "has space/label", "is not a label key", "example.com/sriov"),
    ("sriov_node_selector", {"role": "gpu node"}, "is not a label value", "at most 63"),
    ("cluster_rdma_shared_resource", "rdma/shared device", "is not a resource name", "rdma/rdma_shared_device_a"),
    # image references
    ("cluster_image", "Registry/Image:Tag With Space", "is not an image reference: it contains white space",
     "registry.example.com"),
    ("cluster_image", "quay.io/x/Trainer:1", "is not an image reference: the path component 'Trainer'",
     "registry.example.com"),
    ("cluster_image", "quay.io/x/y:tag\nnext: line", "holds a line break", "image reference"),
    ("verify_probe_image", "", "is not an image reference", "registry.example.com"),
    ("image_base", "ubuntu:22.04;rm -rf /", "is not an image reference", "registry.example.com"),
    ("image_nccl_version", "2.27.5\nRUN curl x", "holds a line break", "one line of text"),
    # what reaches a shell or an env file
    ("cluster_nccl_env_overrides", {"NCCL_X;touch F;#": "1"}, "is not an NCCL variable name", "NCCL variables only"),
    ("cluster_nccl_env_overrides", {"NCCL_$(touch F)": "1"}, "is not an NCCL variable name", "NCCL variables only"),
    ("cluster_nccl_env_overrides", {"NCCL_X\ntouch F": "1"}, "is not an NCCL variable name", "NCCL variables only"),
    ("cluster_nccl_env_overrides", {"LD_PRELOAD": "/tmp/x.so"}, "is not an NCCL variable name", "NCCL variables only"),
    ("cluster_nccl_env_overrides", {"nccl_debug": "INFO"}, "is not an NCCL variable name", "NCCL variables only"),
    ("cluster_nccl_env_overrides", {"NCCL_DEBUG": "INFO\ntouch F"}, "holds a line break", "one-line values"),
    ("cluster_nccl_env_overrides", {"NCCL_DEBUG": ["INFO"]}, "must be text or a number, got a list",
     "one-line values"),
    ("cluster_nccl_env_overrides", "NCCL_DEBUG=INFO", "is not a mapping", "give a mapping"),
    # 200 KB in every pod's environment stopped every exec ("Argument list too long"); anything over 4096
    # characters is refused (a value as long as that one cannot even be given with -e: one argument of
    # ansible-playbook's command line may not pass 128 KiB either).
    ("cluster_nccl_env_overrides", {"NCCL_IB_HCA": "mlx5_0," * 800}, "is 5600 characters long, more than 4096",
     "at most 4096 characters"),
    ("cluster_nccl_env_overrides", {"NCCL_IB_TC": "AF31"}, "NCCL_IB_TC is a traffic class byte, 0 to 255",
     "NCCL_IB_TC a number of 0 to 255"),
    ("train_run_id", "run;id", "is not a run id", "letters, digits"),
    ("train_run_id", "../../etc", "is not a run id", "letters, digits"),
    ("train_run_dir", "/etc", "is not a relative path inside the workspace", "no '..'"),
    ("train_run_dir", "runs/../../x", "is not a relative path inside the workspace", "no '..'"),
    ("train_script", "../../../../outside.py", "is not a relative path inside the workspace", "no '..'"),
    ("train_script", "/etc/passwd", "is not a relative path inside the workspace", "no '..'"),
    ("train_args", ["--steps", "3\n4"], "holds a line break", "one line of text"),
    ("train_args", "--steps 3", "is not a list", "give a list"),
    ("train_overrides", "training.steps=3", "is not a mapping", "give a mapping"),
    ("verify_bench_extra_args", [{"a": 1}], "is not text", "one line of text"),
    # tolerations, which the API server refused only after objects existed
    ("cluster_node_tolerations", [{"key": "nvidia.com/gpu", "operator": "Bogus"}],
     "operator 'Bogus' is not Exists or Equal", "operator: Exists or Equal"),
    ("cluster_node_tolerations", [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoRun"}],
     "effect 'NoRun' is not NoSchedule", "NoExecute}"),
    ("cluster_node_tolerations", [{"key": "gpu", "operator": "Exists", "value": "true"}],
     "operator Exists and a value", "operator: Exists or Equal"),
    ("cluster_node_tolerations", [{"key": "gpu", "opertor": "Exists"}], "unknown field(s) opertor",
     "operator: Exists or Equal"),
    ("cluster_node_tolerations", [{"key": "has space", "operator": "Exists"}], "is not a taint key",
     "nvidia.com/gpu"),
    ("cluster_node_tolerations", [{"operator": "Equal", "value": "x"}], "without a key", "operator: Exists or Equal"),
    ("cluster_node_tolerations", [{"key": "gpu", "effect": "NoSchedule", "tolerationSeconds": 60}],
     "tolerationSeconds whose effect is not NoExecute", "NoExecute}"),
    # choices
    ("cluster_network_mode", "infiniband", "is not one of rdma, tcp", "give one of rdma, tcp"),
    ("cluster_storage_mode", "nfs", "is not one of per-pod, shared", "give one of"),
    ("train_start_mode", "mpi", "is not one of exec, job", "give one of"),
    ("verify_fail_on", "error", "is not one of fail, warn, never", "give one of"),
]

# Settings that are each fine but cannot go together.
CONTRADICTIONS = [
    ({"replicas": 4}, "replicas", "replicas=4 but only 3 cluster_gpu_nodes are named", "add nodes to cluster_gpu_nodes"),
    ({"cluster_gpu_nodes": ["node-a", "node-a"], "replicas": 1}, "cluster_gpu_nodes", "each node once",
     "each GPU node once"),
    ({"cluster_gpu_nodes": [], "cluster_gpu_node_selector": "", "replicas": 0}, "cluster_gpu_nodes",
     "no GPU node is given", "choose them by label with cluster_gpu_node_selector"),
    ({"cluster_gpu_node_selector": "nvidia.com/gpu.present=true"}, "cluster_gpu_nodes",
     "names nodes and cluster_gpu_node_selector 'nvidia.com/gpu.present=true' chooses them by label",
     "cluster_gpu_node_selector=''"),
    ({"cluster_network_mode": "tcp"}, "cluster_rdma_nics", "cluster_network_mode=tcp attaches none",
     "cluster_rdma_nics=[]"),
    ({"cluster_rdma_nics": []}, "cluster_rdma_nics", "cluster_network_mode=rdma needs cluster_rdma_nics",
     "cluster_network_mode=tcp"),
    ({"cluster_host_network": "true"}, "cluster_host_network", "SR-IOV NICs of cluster_rdma_nics would never be",
     "cluster_host_network=false"),
    ({"cluster_namespace": "kube-system"}, "cluster_namespace", "a namespace of the platform itself",
     "cluster_allow_system_namespace=true"),
    ({"cluster_namespace": "default"}, "cluster_namespace", "a namespace of the platform itself",
     "cluster_allow_system_namespace=true"),
    ({"cluster_namespace": "openshift-config"}, "cluster_namespace", "a namespace of the platform itself",
     "cluster_allow_system_namespace=true"),
    ({"cluster_namespace": "openshift-sriov-network-operator", "cluster_allow_system_namespace": True},
     "cluster_namespace", "the SR-IOV operator's namespace", "a namespace of the deployment's own"),
    ({"cluster_namespace": "sriov", "sriov_operator_namespace": "sriov"}, "cluster_namespace",
     "the SR-IOV operator's namespace", "a namespace of the deployment's own"),
    # Each names only the rule it breaks, and what to give instead.
    ({"train_workload": "script"}, "train_script", "train_script is empty, and train_workload is script, which runs "
     "it", "-e train_script=path/to/train.py"),
    ({"train_workload": "demo", "train_tp": 2}, "train_tp", "train_tp is a TorchTitan setting and train_workload is "
     "demo, which does not read it", "give its own arguments as train_args"),
    ({"train_workload": "script", "train_script": "t.py", "train_steps": 10}, "train_steps", "train_steps is a "
     "TorchTitan setting and train_workload is script", "the script's own arguments as train_args"),
    ({"train_workload": "demo", "train_overrides": {"training.steps": 5}}, "train_overrides", "train_overrides is a "
     "TorchTitan setting", "leave train_overrides out"),
    # A soak judges each run against the others, or a saved baseline.
    ({"soak_runs": 1}, "soak_runs", "soak_runs=1 leaves no other run to judge it against", "give soak_baseline"),
    ({"soak_workload": "bench", "verify_bench": "false"}, "soak_workload", "which verify_bench=false turns off",
     "soak_workload=train"),
]

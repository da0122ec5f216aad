module mlinfra.local/localcluster/crds

go 1.24.0

require (
	github.com/k8snetworkplumbingwg/sriov-network-operator v1.6.0
	github.com/kubeflow/trainer/v2 v2.3.0
	github.com/kubeflow/training-operator v1.9.4
	github.com/openshift/api v0.0.0-20260710095909-1cb630ce7109
	gopkg.in/k8snetworkplumbingwg/multus-cni.v4 v4.3.0
	sigs.k8s.io/jobset v0.12.0
	sigs.k8s.io/kueue v0.19.0
	volcano.sh/volcano v1.14.1
)

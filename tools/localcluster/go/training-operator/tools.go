//go:build tools

// Package tools pins the Kubeflow Training Operator (its PyTorchJob
// controller and admission webhook, one binary), which the local cluster
// starts on demand; patches/ lets it serve its webhook on 127.0.0.1 with a
// certificate it is given.
package tools

import (
	_ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
)

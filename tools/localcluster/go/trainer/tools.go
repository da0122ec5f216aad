//go:build tools

// Package tools pins the Kubeflow Trainer v2 controller manager (its
// TrainJob controller and admission webhooks, one binary), which the local
// cluster starts on demand.
package tools

import (
	_ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
)

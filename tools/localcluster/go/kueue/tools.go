//go:build tools

// Package tools pins Kueue's controller manager (its queueing controllers
// and admission webhooks, one binary), which the local cluster starts on
// demand.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)

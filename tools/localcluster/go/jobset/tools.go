//go:build tools

// Package tools pins the JobSet controller (its manager and admission
// webhooks, one binary), which the local cluster starts on demand.
package tools

import (
	_ "sigs.k8s.io/jobset"
)

//go:build tools

// Package tools pins controller-gen (sigs.k8s.io/controller-tools), which
// generates Volcano's CRDs from its published API types (upstream_crds.py).
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"

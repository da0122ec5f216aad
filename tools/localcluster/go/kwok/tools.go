//go:build tools

// Package tools pins kwok (the fake kubelet) and kwokctl (which starts the
// control plane from local binaries).
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)

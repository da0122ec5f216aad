//go:build tools

// Package tools pins Volcano's scheduler, controller manager and admission
// webhook manager, which the local cluster starts on demand.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
	_ "volcano.sh/volcano/cmd/webhook-manager"
)

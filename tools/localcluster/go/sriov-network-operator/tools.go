//go:build tools

// Package tools pins the SR-IOV Network Operator's manager (its network
// controllers render a NetworkAttachmentDefinition from each SriovNetwork),
// which the local cluster starts with the cluster: the local inventory's
// RDMA attachments are SriovNetworks.
package tools

import (
	_ "github.com/k8snetworkplumbingwg/sriov-network-operator"
)

//go:build tools

// Package tools pins etcd's server command. etcd's own go.mod carries replace
// directives, so `go install ...@version` refuses it; building it from this
// module works.
package tools

import _ "go.etcd.io/etcd/server/v3"

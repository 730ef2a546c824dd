// Package control holds nothing but this note and the test that keeps the
// control plane apart from the node's runtime: the control plane (the
// packages below control/) imports the document formats (format/...,
// l7/snapshot, l7/deny) and never the runtime that watches or serves them
// (l7/snapdir, l7/docwatch, l7/denywatch, l7/proxy, l7/daemon, agent, bpf,
// anycast). Nodes talk to it over its API.
package control

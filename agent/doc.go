// Package agent is the privileged node agent: it attaches the XDP program
// to the service interfaces, puts VIPs on a dummy interface, keeps the BPF
// maps in sync with the active snapshot's L4 section and the fast deny
// channel, steers VIP traffic to the proxy's sockets with sk_lookup,
// reports health and metrics, and drives anycast. See README.md.
package agent

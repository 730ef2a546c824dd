package agent

import (
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/rampart-edge/rampart/bpf"
	"github.com/rampart-edge/rampart/l7/regionwatch"
)

// Status is the agent's state as /status shows it.
type Status struct {
	Time     time.Time `json:"time"`
	Ready    bool      `json:"ready"`
	NotReady string    `json:"not_ready,omitempty"`

	Interfaces []InterfaceStatus `json:"interfaces"`
	BPF        bpfState          `json:"bpf"`
	PinRoot    string            `json:"pin_root"`

	ActiveVersion      string    `json:"active_version,omitempty"`
	DesiredVersion     string    `json:"desired_version,omitempty"`
	DownloadedVersion  string    `json:"downloaded_version,omitempty"`
	SyncedVersion      string    `json:"synced_version,omitempty"`
	SyncedAt           time.Time `json:"synced_at,omitzero"`
	SyncAgeSeconds     float64   `json:"sync_age_seconds"`
	SnapshotAgeSeconds float64   `json:"snapshot_age_seconds"`
	SyncError          string    `json:"sync_error,omitempty"`
	SyncPasses         uint64    `json:"sync_passes"`

	VIPInterface string       `json:"vip_interface"`
	VIPKind      string       `json:"vip_interface_kind,omitempty"`
	VIPs         []string     `json:"vips"`
	Ports        []PortStatus `json:"ports"`
	Limits       bpf.Limits   `json:"limits"`

	Deny    DenyStatus    `json:"deny"`
	Handoff HandoffStatus `json:"handoff"`
	Proxy   ProxyStatus   `json:"proxy"`
	Anycast string        `json:"anycast"` // off, waiting, or the path of its status

	// RegionState is the region-state document (with -region-state);
	// RegionInputs the current value of each region_serves_tenants input
	// (before the anycast rise/fall).
	RegionState  *regionwatch.Status `json:"region_state,omitempty"`
	RegionInputs []RegionInputStatus `json:"region_inputs,omitempty"`
}

// RegionInputStatus is one region_serves_tenants input now.
type RegionInputStatus struct {
	Input  string `json:"input"`
	Serves bool   `json:"serves"`
	Detail string `json:"detail"`
}

// InterfaceStatus is XDP on one interface.
type InterfaceStatus struct {
	Name     string `json:"name"`
	Attached bool   `json:"attached"`
	Mode     string `json:"mode,omitempty"` // driver or generic
	Error    string `json:"error,omitempty"`
}

// PortStatus is one VIP:port:proto and where it is steered.
type PortStatus struct {
	VIP      string `json:"vip"` // addr:port/proto
	Listener string `json:"listener"`
	Socket   string `json:"socket"` // the slot, or "none" while the proxy has not handed it over
}

// DenyStatus is the deny list in the maps.
type DenyStatus struct {
	Sequence     uint64    `json:"channel_sequence"`
	ChannelFile  string    `json:"channel_file,omitempty"`
	Rejected     uint64    `json:"channel_rejected"`
	FromSnapshot int       `json:"from_snapshot"`
	Prefixes     int       `json:"prefixes_in_maps"`
	SyncedAt     time.Time `json:"synced_at,omitzero"`
}

// HandoffStatus is the socket hand-off with the proxy.
type HandoffStatus struct {
	Socket     string         `json:"socket"`
	Reachable  bool           `json:"reachable"`
	Generation uint64         `json:"generation"`
	Error      string         `json:"error,omitempty"`
	Registered []SocketStatus `json:"registered"`
}

// SocketStatus is one proxy socket in the sockmap.
type SocketStatus struct {
	Listener string `json:"listener"`
	Network  string `json:"network"`
	Addr     string `json:"addr"`
	Index    uint32 `json:"index"`
}

// ProxyStatus is the proxy's readiness as polled.
type ProxyStatus struct {
	Admin  string `json:"admin,omitempty"`
	Ready  bool   `json:"ready"`
	Detail string `json:"detail,omitempty"`
}

// Status reports the agent's state.
func (a *Agent) Status() Status {
	ready, why := a.Ready()
	s := Status{Time: time.Now().UTC(), Ready: ready, NotReady: why, BPF: a.bpfView(), PinRoot: a.c.PinRoot,
		VIPInterface: a.c.VIPInterface, VIPKind: a.vips.kind(), Anycast: "off",
		SyncAgeSeconds: a.syncAge().Seconds(), SnapshotAgeSeconds: a.snapshotAge().Seconds()}
	var reg map[sockKey]registered
	if a.socks != nil {
		var gen uint64
		var reached bool
		var lastErr string
		reg, gen, reached, lastErr = a.socks.snapshot()
		s.Handoff = HandoffStatus{Socket: a.c.HandoffSocket, Reachable: reached, Generation: gen, Error: lastErr}
		for k, r := range reg {
			s.Handoff.Registered = append(s.Handoff.Registered, SocketStatus{k.Listener, k.Network, r.Addr, r.Index})
		}
		sort.Slice(s.Handoff.Registered, func(i, j int) bool { return s.Handoff.Registered[i].Index < s.Handoff.Registered[j].Index })
	}
	if a.deny != nil {
		s.Deny.ChannelFile, s.Deny.Rejected = a.c.DenyFile, a.deny.Rejected()
	}
	if a.ac != nil {
		s.Anycast = "waiting for a snapshot with VIPs"
		if a.ac.handler() != nil {
			s.Anycast = "GET /anycast/status"
		}
	}
	if a.rs != nil {
		rst := a.rs.Status()
		s.RegionState = &rst
	}
	if a.c.Anycast != nil {
		for _, in := range a.c.Anycast.Inputs {
			if _, ok := groupInput(in.Name); ok {
				up, detail := a.regionServes(in.Name)
				s.RegionInputs = append(s.RegionInputs, RegionInputStatus{Input: in.Name, Serves: up, Detail: detail})
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range a.c.Interfaces {
		i := a.ifaces[name]
		is := InterfaceStatus{Name: name, Attached: i.attached, Error: i.err}
		if i.attached {
			is.Mode = i.mode.String()
		}
		s.Interfaces = append(s.Interfaces, is)
	}
	if a.active != nil {
		s.ActiveVersion = a.active.snap.Version.String()
		s.Deny.FromSnapshot = len(a.active.l4.Deny)
		for _, p := range a.active.l4.Ports {
			ps := PortStatus{VIP: fmt.Sprintf("%s/%s", netip.AddrPortFrom(p.Addr, p.Port), protoName(p.Proto)), Listener: p.Sock.Listener, Socket: "none"}
			if r, ok := reg[p.Sock]; ok {
				ps.Socket = fmt.Sprint(r.Index)
			}
			s.Ports = append(s.Ports, ps)
		}
	}
	if v := a.source.desired; v.Epoch != 0 {
		s.DesiredVersion = v.String()
	}
	if v := a.source.downloaded; v.Epoch != 0 {
		s.DownloadedVersion = v.String()
	}
	st := a.st
	if !st.okAt.IsZero() {
		s.SyncedVersion, s.SyncedAt = st.version.String(), st.okAt.UTC()
	}
	s.SyncError, s.SyncPasses, s.Limits = st.err, st.passes, st.limits
	for _, v := range st.addrs {
		s.VIPs = append(s.VIPs, v.String())
	}
	s.Deny.Sequence, s.Deny.Prefixes, s.Deny.SyncedAt = st.denySeq, len(st.deny), st.denyAt
	if a.c.ProxyAdmin != "" {
		s.Proxy = ProxyStatus{Admin: a.c.ProxyAdmin, Ready: a.proxy.ready, Detail: a.proxy.detail}
	}
	return s
}

func protoName(p bpf.Proto) string {
	if p == bpf.UDP {
		return "udp"
	}
	return "tcp"
}

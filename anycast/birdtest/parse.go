package birdtest

import (
	"regexp"
	"strconv"
	"strings"
)

// Route is one route of `show route all`: one path for a net, from one
// protocol (with ADD-PATH a net has one per announcing speaker).
type Route struct {
	Net              string   // 192.0.2.10/32
	Proto            string   // the BGP protocol it came from, e.g. site1
	From             string   // the neighbour address
	Best             bool     // BIRD's best route for the net
	ASPath           []uint32 // as received
	NextHop          string
	MED              *uint32
	Communities      []string // "65535:0"
	LargeCommunities []string // "64512:1:3"
}

// Has says whether the route carries a standard community.
func (r Route) Has(community string) bool {
	for _, c := range r.Communities {
		if c == community {
			return true
		}
	}
	return false
}

var (
	routeHead = regexp.MustCompile(`^(\S+)?\s+\w+ \[(\S+) [^\]]*?(?: from (\S+))?\]( \*)?`)
	pairRE    = regexp.MustCompile(`\((\d+),\s*(\d+)\)`)
	tripleRE  = regexp.MustCompile(`\((\d+),\s*(\d+),\s*(\d+)\)`)
)

// ParseRoutes parses the output of `birdc show route all`.
func ParseRoutes(out string) []Route {
	var routes []Route
	net := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "\t") {
			if len(routes) == 0 {
				continue
			}
			r := &routes[len(routes)-1]
			key, val, _ := strings.Cut(strings.TrimSpace(line), ": ")
			switch key {
			case "BGP.as_path":
				for _, f := range strings.Fields(val) {
					if n, err := strconv.ParseUint(f, 10, 32); err == nil {
						r.ASPath = append(r.ASPath, uint32(n))
					}
				}
			case "BGP.next_hop":
				if f := strings.Fields(val); len(f) > 0 {
					r.NextHop = f[0]
				}
			case "BGP.med":
				if n, err := strconv.ParseUint(val, 10, 32); err == nil {
					m := uint32(n)
					r.MED = &m
				}
			case "BGP.community":
				for _, m := range pairRE.FindAllStringSubmatch(val, -1) {
					r.Communities = append(r.Communities, m[1]+":"+m[2])
				}
			case "BGP.large_community":
				for _, m := range tripleRE.FindAllStringSubmatch(val, -1) {
					r.LargeCommunities = append(r.LargeCommunities, m[1]+":"+m[2]+":"+m[3])
				}
			}
			continue
		}
		m := routeHead.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if m[1] != "" {
			net = m[1]
		}
		routes = append(routes, Route{Net: net, Proto: m[2], From: m[3], Best: m[4] != ""})
	}
	return routes
}

// Protocol is `show protocols all NAME` parsed.
type Protocol struct {
	Name      string
	State     string // up, start, down
	Info      string // e.g. Established, or "Passive  Received: Administrative shutdown"
	BGPState  string // Established, Active, Passive, ...
	LastError string // e.g. "Received: Administrative shutdown"
	Message   string // the shutdown communication received (RFC 8203)
}

// ParseProtocol parses the output of `birdc show protocols all NAME`.
func ParseProtocol(out string) Protocol {
	var p Protocol
	for _, line := range strings.Split(out, "\n") {
		t := strings.TrimSpace(line)
		key, val, ok := strings.Cut(t, ":")
		val = strings.TrimSpace(val)
		switch {
		case ok && key == "BGP state":
			p.BGPState = val
		case ok && key == "Last error":
			p.LastError = val
		case ok && key == "Message":
			p.Message = val
		case p.Name == "" && line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(t, "BIRD") && !strings.HasPrefix(t, "Name "):
			f := strings.Fields(line)
			if len(f) >= 5 {
				p.Name, p.State = f[0], f[3]
				p.Info = strings.TrimSpace(strings.Join(f[5:], " "))
			}
		}
	}
	return p
}

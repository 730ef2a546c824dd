package birdtest

import (
	"fmt"
	"testing"
)

const showRoute = `BIRD 2.0.12 ready.
Table master4:
198.51.100.0/24      unicast [static1 13:27:53.538] * (200)
	dev lo
	Type: static univ
192.0.2.10/32        unicast [site2 13:27:55.485 from 127.0.0.3] * (100/?) [AS65002i]
	dev lo
	Type: BGP univ
	BGP.origin: IGP
	BGP.as_path: 65002
	BGP.next_hop: 198.51.100.2
	BGP.med: 50
	BGP.local_pref: 100
	BGP.community: (65000,100)
	BGP.large_community: (64512, 1, 2)
                     unicast [site1 13:27:57.664 from 127.0.0.2] (100/?) [AS65001i]
	dev lo
	Type: BGP univ
	BGP.origin: IGP
	BGP.as_path: 65001 65001 65001
	BGP.next_hop: 198.51.100.1
	BGP.local_pref: 100
	BGP.community: (65000,100) (65535,0)
	BGP.large_community: (64512, 2, 1) (65000, 7, 7)

Table master6:
2001:db8::10/128     unicast [site1 13:27:57.664 from 127.0.0.2] * (100/?) [AS65001i]
	dev lo
	Type: BGP univ
	BGP.as_path: 65001
	BGP.next_hop: fd00::1
	BGP.large_community: (64512, 1, 1)
`

func TestParseRoutes(t *testing.T) {
	rs := ParseRoutes(showRoute)
	if len(rs) != 4 {
		t.Fatalf("%d routes: %+v", len(rs), rs)
	}
	r := rs[2]
	if r.Net != "192.0.2.10/32" || r.Proto != "site1" || r.From != "127.0.0.2" || r.Best || fmt.Sprint(r.ASPath) != "[65001 65001 65001]" ||
		!r.Has("65535:0") || !r.Has("65000:100") || fmt.Sprint(r.LargeCommunities) != "[64512:2:1 65000:7:7]" || r.NextHop != "198.51.100.1" {
		t.Fatalf("third route: %+v", r)
	}
	if r := rs[1]; !r.Best || r.MED == nil || *r.MED != 50 || r.Proto != "site2" {
		t.Fatalf("second route: %+v", r)
	}
	if r := rs[3]; r.Net != "2001:db8::10/128" || r.NextHop != "fd00::1" {
		t.Fatalf("IPv6 route: %+v", r)
	}
}

func TestParseProtocol(t *testing.T) {
	p := ParseProtocol(`BIRD 2.0.12 ready.
Name       Proto      Table      State  Since         Info
site1      BGP        ---        start  13:27:58.671  Passive       Received: Administrative shutdown
  Message:        rampart anycast: planned stop
  BGP state:          Passive
    Neighbor address: 127.0.0.2
    Last error:       Received: Administrative shutdown
`)
	want := Protocol{Name: "site1", State: "start", Info: "Passive Received: Administrative shutdown", BGPState: "Passive",
		LastError: "Received: Administrative shutdown", Message: "rampart anycast: planned stop"}
	if p != want {
		t.Fatalf("got %+v", p)
	}
}

func FuzzParseRoutes(f *testing.F) {
	f.Add(showRoute)
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range ParseRoutes(s) {
			_ = r.Has("65535:0")
		}
		_ = ParseProtocol(s)
	})
}

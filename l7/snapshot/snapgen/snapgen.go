// Package snapgen generates large, valid, deterministic configs for
// benchmarks and the perf lab.
package snapgen

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Config makes a deterministic, valid config of about hosts*perHost
// routes: exact hosts, every tenth host a wildcard, and one "*" group; per
// host, API versions of resources with list/search/item/sub-resource/action
// templates, a static rest route and an any-method internal route.
func Config(hosts, perHost int) *snapshot.Config {
	rnd := rand.New(rand.NewPCG(20, 25))
	c := &snapshot.Config{
		Version:   snapshot.Version{Epoch: 1, Sequence: 1},
		Listeners: []snapshot.Listener{{Name: "public", Address: "127.0.0.1:8080"}},
	}
	for i := range 50 {
		c.Clusters = append(c.Clusters, snapshot.Cluster{
			Name:      fmt.Sprintf("svc-%02d", i),
			Endpoints: []snapshot.Endpoint{{Address: fmt.Sprintf("10.0.%d.1:8080", i)}},
		})
	}
	resources := strings.Fields("users orders products invoices carts payments shipments reviews " +
		"accounts sessions tokens teams projects tickets comments files images videos reports " +
		"alerts metrics logs jobs builds releases deployments regions zones nodes clusters " +
		"volumes snapshots backups keys secrets policies roles groups members invites")
	subs := strings.Fields("orders items events notes versions tags")
	for h := range hosts {
		host := fmt.Sprintf("api%d.example.com", h)
		switch {
		case h == 0:
			host = "*"
		case h%10 == 9:
			host = fmt.Sprintf("*.tenant%d.example.net", h)
		}
		add := func(methods, tpl, idem string) {
			var ms []string
			if methods != "" {
				ms = strings.Split(methods, ",")
			}
			c.Routes = append(c.Routes, snapshot.Route{
				ID: fmt.Sprintf("h%04d-r%03d", h, len(c.Routes)%1000), Host: host, Methods: ms,
				PathTemplate: tpl, UpstreamCluster: fmt.Sprintf("svc-%02d", rnd.IntN(50)),
				TimeoutMs: 1000 + rnd.IntN(29000), Idempotency: idem,
			})
		}
		first := len(c.Routes)
		add("GET", "/static/{path...}", "")
		add("GET,HEAD", "/healthz", "")
		add("", "/internal/{rest...}", "none")
		for _, r := range rnd.Perm(len(resources)) {
			if len(c.Routes)-first >= perHost {
				break
			}
			res, sub, v := resources[r], subs[rnd.IntN(len(subs))], fmt.Sprintf("/v%d/", 1+rnd.IntN(3))
			base := v + res
			add("GET", base, "")
			add("POST", base, "key:Idempotency-Key")
			add("GET", base+"/search", "")
			add("GET", base+"/{id}", "")
			add("PUT,DELETE", base+"/{id}", "safe")
			add("PATCH", base+"/{id}", "none")
			add("GET", base+"/{id}/"+sub, "")
			add("GET", base+"/{id}/"+sub+"/{"+strings.TrimSuffix(sub, "s")+"}", "")
			add("POST", base+"/{id}/actions/cancel", "none")
			add("GET", base+"/{id}/export/{format...}", "")
		}
	}
	snapshot.Normalize(c)
	return c
}

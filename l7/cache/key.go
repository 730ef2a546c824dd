package cache

import "strings"

// Key is the primary cache key of a request as routed: the route, the
// tenant (empty on shared or unauthenticated routes), the normalised host
// and path and the raw query. Fields are separated by a byte no host,
// path or tenant carries.
func Key(route, tenant, host, path, query string) string {
	var b strings.Builder
	b.Grow(len(route) + len(tenant) + len(host) + len(path) + len(query) + 4)
	b.WriteString(route)
	b.WriteByte(0)
	b.WriteString(tenant)
	b.WriteByte(0)
	b.WriteString(Target(host, path, query))
	return b.String()
}

// Target is host+path(+"?"+query): what purge by key prefix matches.
func Target(host, path, query string) string {
	if query == "" {
		return host + path
	}
	return host + path + "?" + query
}

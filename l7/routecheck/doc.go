// Package routecheck runs a table of requests through the same route table
// and regional decision as the proxy, and compares each outcome (route id,
// target region or 503, reason code) with what the table expects. It is
// `rampart route check`, like Envoy's router check tool.
package routecheck

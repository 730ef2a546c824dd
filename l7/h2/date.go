package h2

import "github.com/rampart-edge/rampart/l7/wire"

// currentDate is the Date header value: l7/wire's, shared with l7/h1.
func currentDate() string { return wire.Date() }

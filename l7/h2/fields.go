package h2

import "golang.org/x/net/http/httpguts"

func validFieldValue(v string) bool { return httpguts.ValidHeaderFieldValue(v) }

package h2

import (
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2/hpack"
)

func hpackField(name, value string) hpack.HeaderField {
	return hpack.HeaderField{Name: name, Value: value}
}

func validFieldValue(v string) bool { return httpguts.ValidHeaderFieldValue(v) }

package quota

import "strings"

// Source gives BuildKey a request's identity and parts. Missing values are
// "" for Tenant, KeyID, Header and ClientIP, and false for Claim and Param.
type Source interface {
	Tenant() string
	KeyID() string
	Claim(name string) (string, bool)
	Header(name string) string
	Param(name string) (string, bool)
	ClientIP() string
}

// Bytes of the key encoding: parts are joined with keySep; inside a value,
// keyEsc and keySep are written as keyEsc followed by escEsc or escSep, and
// a missing part is keyEsc followed by escMissing, which no value produces.
const (
	keyEsc     = 0x1e
	keySep     = 0x1f
	escEsc     = 0x01
	escSep     = 0x02
	escMissing = 0x00
)

// BuildKey appends to buf[:0] the bucket key of a request for the key parts
// of a quota policy (tenant, api_key, client_ip, claim:<name>,
// header:<Name>, param:<name>) and returns it. The key is injective: two
// requests get the same key only when every part has the same value (or is
// missing in both). A part the request lacks is encoded as a marker no
// value can produce, and ok is false; the caller limits the request under
// that key all the same, so every request lacking the part shares one
// bucket. An unknown part kind counts as missing. BuildKey does not
// allocate when buf has room for the key.
func BuildKey(parts []string, src Source, buf []byte) (key []byte, ok bool) {
	key, ok = buf[:0], true
	for i, part := range parts {
		if i > 0 {
			key = append(key, keySep)
		}
		kind, arg, _ := strings.Cut(part, ":")
		var v string
		present := false
		switch kind {
		case "tenant":
			v = src.Tenant()
			present = v != ""
		case "api_key":
			v = src.KeyID()
			present = v != ""
		case "client_ip":
			v = src.ClientIP()
			present = v != ""
		case "header":
			v = src.Header(arg)
			present = v != ""
		case "claim":
			v, present = src.Claim(arg)
		case "param":
			v, present = src.Param(arg)
		}
		if !present {
			key = append(key, keyEsc, escMissing)
			ok = false
			continue
		}
		key = appendEscaped(key, v)
	}
	return key, ok
}

func appendEscaped(dst []byte, v string) []byte {
	start := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != keyEsc && c != keySep {
			continue
		}
		dst = append(dst, v[start:i]...)
		if c == keyEsc {
			dst = append(dst, keyEsc, escEsc)
		} else {
			dst = append(dst, keyEsc, escSep)
		}
		start = i + 1
	}
	return append(dst, v[start:]...)
}

// validPart reports whether part is a key part BuildKey knows.
func validPart(part string) bool {
	kind, arg, _ := strings.Cut(part, ":")
	switch kind {
	case "tenant", "api_key", "client_ip":
		return arg == ""
	case "claim", "param", "header":
		return arg != ""
	}
	return false
}

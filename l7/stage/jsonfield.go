package stage

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Errors of jsonField.
var (
	errNotJSON      = errors.New("body is not JSON")
	errFieldMissing = errors.New("field is missing")
)

// jsonField returns the value at path (object keys, outermost first) in a
// JSON document. The document is checked whole first (gjson.ValidBytes,
// a syntax error anywhere is errNotJSON), then the field is found with
// gjson, which skips what precedes it without building values. A string
// value is returned decoded, a number as its literal text, a boolean as
// "true" or "false". A path through something other than an object, a
// null, object or array value, or no such key is errFieldMissing. Of
// duplicate keys the first counts (encoding/json.Unmarshal keeps the
// last); the README says so.
//
// github.com/tidwall/gjson replaced encoding/json's streaming Decoder
// here: BenchmarkJSONField went from 13–44 µs and ~50 allocations per KiB
// (Decoder.Token, values skipped through Decode into a RawMessage) to
// the figure in the README, with the validation of the whole body
// included. FuzzJSONField holds it to encoding/json on every document
// encoding/json accepts.
func jsonField(body []byte, path []string) (string, error) {
	if !gjson.ValidBytes(body) {
		return "", errNotJSON
	}
	// A string view of body, not a copy (ParseBytes copies the whole body:
	// 64 KiB per request at 64 KiB). The value returned may share its
	// bytes; body routing only looks it up in its cases and never changes
	// the body.
	r := gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body)))
	for i, key := range path {
		if !r.IsObject() {
			if i == 0 {
				return "", fmt.Errorf("%w: the document is not an object", errFieldMissing)
			}
			return "", fmt.Errorf("%w: %q is not an object", errFieldMissing, path[i-1])
		}
		if r = r.Get(gjson.Escape(key)); !r.Exists() {
			return "", errFieldMissing
		}
	}
	switch r.Type {
	case gjson.String:
		return replaceInvalidUTF8(r.Str), nil
	case gjson.Number:
		return r.Raw, nil
	case gjson.True:
		return "true", nil
	case gjson.False:
		return "false", nil
	}
	return "", fmt.Errorf("%w: the value is null, an object or an array", errFieldMissing)
}

// replaceInvalidUTF8 turns each byte that is not part of valid UTF-8 into
// U+FFFD, as encoding/json does when it decodes a string (gjson keeps the
// bytes).
func replaceInvalidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

package route

import (
	"errors"
	"fmt"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// SlashPolicy says what NormalizePath does with an encoded slash (%2F).
type SlashPolicy uint8

const (
	// RejectEncodedSlashes refuses a path containing %2F (the default).
	RejectEncodedSlashes SlashPolicy = iota
	// DecodeEncodedSlashes decodes %2F to "/", so it separates segments.
	DecodeEncodedSlashes
)

var (
	// ErrBadPath is wrapped by every error NormalizePath returns.
	ErrBadPath = errors.New("bad request path")
	// ErrEncodedSlash is also wrapped when the path holds %2F (under
	// RejectEncodedSlashes) or %5C (always).
	ErrEncodedSlash = errors.New("encoded slash or backslash")
)

var (
	pathChar    [256]bool // bytes allowed unescaped in a segment
	keepEscaped [256]bool // bytes that stay percent-encoded in normal form
)

func init() {
	for c := 0; c < 256; c++ {
		b := byte(c)
		pathChar[c] = snapshot.IsPathChar(b)
		keepEscaped[c] = !snapshot.IsUnreserved(b) && b != 0 && b != '/' && b != '\\'
	}
}

// NormalizePath brings an escaped origin-form request path (no query) to the
// normal form routes are matched in: unreserved escapes decoded, other
// escapes in upper-case hex, duplicate slashes collapsed, dot segments
// removed (never above the root), a trailing slash kept. A path already in
// normal form is returned as is, without allocating. Errors wrap ErrBadPath.
func NormalizePath(raw string, policy SlashPolicy) (string, error) {
	if isNormal(raw) {
		return raw, nil
	}
	return normalize(raw, policy)
}

// isNormal reports whether p is valid and already in normal form.
func isNormal(p string) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	seg := 1
	for i := 1; i < len(p); i++ {
		switch c := p[i]; c {
		case '/':
			if dropped(p[seg:i]) {
				return false
			}
			seg = i + 1
		case '%':
			if i+2 >= len(p) || !isUpperHex(p[i+1]) || !isUpperHex(p[i+2]) ||
				!keepEscaped[snapshot.Unhex(p[i+1])<<4|snapshot.Unhex(p[i+2])] {
				return false
			}
			i += 2
		default:
			if !pathChar[c] {
				return false
			}
		}
	}
	last := p[seg:]
	return last == "" || !dropped(last)
}

// dropped reports segments that normalisation removes: "", "." and "..".
func dropped(s string) bool {
	return s == "" || s == "." || s == ".."
}

// normalize is the slow path. The output is never longer than raw, so it is
// built in one buffer (on the stack for short paths) and copied out once.
func normalize(raw string, policy SlashPolicy) (string, error) {
	if raw == "" || raw[0] != '/' {
		return "", fmt.Errorf("%w: it must start with \"/\"", ErrBadPath)
	}
	var stack [256]byte
	out := stack[:]
	if len(raw) > len(stack) {
		out = make([]byte, len(raw))
	}
	out[0] = '/'
	w, seg := 1, 1 // write position; start of the current segment in out
	for i := 1; i <= len(raw); i++ {
		sep := i == len(raw)
		if !sep {
			switch c := raw[i]; {
			case c == '/':
				sep = true
			case c == '%':
				b, err := escape(raw, i, policy)
				if err != nil {
					return "", err
				}
				switch {
				case b == '/':
					sep = true
				case keepEscaped[b]:
					out[w], out[w+1], out[w+2] = '%', upper(raw[i+1]), upper(raw[i+2])
					w += 3
				default:
					out[w] = b
					w++
				}
				i += 2
			case pathChar[c]:
				out[w] = c
				w++
			default:
				return "", fmt.Errorf("%w: byte %q at offset %d is not allowed", ErrBadPath, c, i)
			}
		}
		if !sep {
			continue
		}
		switch n := w - seg; {
		case n == 0, n == 1 && out[seg] == '.':
			w = seg
		case n == 2 && out[seg] == '.' && out[seg+1] == '.':
			w = seg
			if w > 1 {
				w = lastSlash(out[:w-1]) + 1
			}
			seg = w
		default:
			if i < len(raw) {
				out[w] = '/'
				w++
				seg = w
			}
		}
	}
	return string(out[:w]), nil
}

// escape decodes the percent-escape at raw[i] and refuses those that are
// malformed, encode NUL or a backslash, or (under the reject policy) a slash.
func escape(raw string, i int, policy SlashPolicy) (byte, error) {
	if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
		end := min(i+3, len(raw))
		return 0, fmt.Errorf("%w: malformed escape %q at offset %d", ErrBadPath, raw[i:end], i)
	}
	b := snapshot.Unhex(raw[i+1])<<4 | snapshot.Unhex(raw[i+2])
	switch {
	case b == 0:
		return 0, fmt.Errorf("%w: escape %q (NUL) at offset %d", ErrBadPath, raw[i:i+3], i)
	case b == '\\', b == '/' && policy != DecodeEncodedSlashes:
		return 0, fmt.Errorf("%w: %w %q at offset %d", ErrBadPath, ErrEncodedSlash, raw[i:i+3], i)
	}
	return b, nil
}

func lastSlash(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '/' {
			return i
		}
	}
	return -1
}

func isHex(c byte) bool { return isUpperHex(c) || c >= 'a' && c <= 'f' }

func isUpperHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' }

func upper(c byte) byte {
	if c >= 'a' && c <= 'f' {
		return c - 'a' + 'A'
	}
	return c
}

// literalReachable reports whether a template literal is in the normal form
// NormalizePath produces, so that some request path can match it.
func literalReachable(s string) bool {
	if s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%':
			if i+2 >= len(s) || !isUpperHex(s[i+1]) || !isUpperHex(s[i+2]) ||
				!keepEscaped[snapshot.Unhex(s[i+1])<<4|snapshot.Unhex(s[i+2])] {
				return false
			}
			i += 2
		case !pathChar[c]:
			return false
		}
	}
	return true
}

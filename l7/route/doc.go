// Package route matches requests (host, method, normalised path) to the
// routes of a snapshot, and normalises request paths and hosts for it.
//
// # Host selection
//
// The request host picks exactly one host group, as Envoy's virtual hosts
// do: the group of the exact host if there is one; else the group of the
// longest wildcard "*.suffix" that matches ("*.example.com" matches
// "a.example.com" and "a.b.example.com", not "example.com"); else the "*"
// group; else nothing matches (404). Routes of other groups are never
// considered for that request.
//
// # Path precedence
//
// Within a group, templates compete segment by segment, left to right: a
// literal beats {param}, which beats {rest...}. {param} matches exactly one
// non-empty segment; {rest...} matches one or more remaining segments whose
// text is non-empty (it may hold slashes and end with "/"). A trailing slash
// is an empty last segment: "/a/" matches only "/a/", "/a" only "/a", "/"
// only "/".
//
// The match is the highest-precedence template with a route that accepts the
// request method (a route without methods accepts all). When a route matches
// the path but not the method, lower-precedence templates are still tried:
// with GET /users/{id} and POST /users/me, "GET /users/me" matches the first.
// If some template matches the path but no route accepts the method the
// status is 405 (Table.Allow lists the methods); if none matches, 404.
//
// # Normalisation
//
// NormalizePath follows RFC 3986 §6.2.2: escapes of unreserved characters are
// decoded, other escapes upper-cased; "//" collapses; "." and ".." segments
// are removed after decoding (so "/%2e%2e/x" is "/x"), never climbing above
// the root; a trailing slash is kept. Bytes that are not pchars, malformed
// escapes and %00 are errors. %5C (backslash) is always an error; %2F is an
// error under RejectEncodedSlashes (the default) and a segment separator
// under DecodeEncodedSlashes. Either way a path trick can never reach a route
// its plain form would not.
package route

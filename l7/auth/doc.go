// Package auth authenticates requests against the auth policies of a
// snapshot: JWT bearer tokens verified locally against cached key sets, and
// API keys looked up by hash. Nothing on the request path calls an
// identity provider, except the one rate-limited refetch described below.
//
// # Building
//
// NewSet turns []snapshot.AuthPolicy into a Set; Set.Policy(id) returns a
// Policy whose Authenticate(http.Header) yields an Identity or a *Failure.
// A Set is immutable and safe for concurrent use; the request path takes
// no lock (key sets are published through an atomic pointer, scratch
// buffers come from a sync.Pool).
//
// # Key sets
//
// A policy's keys come from jwks_file, read and parsed when NewSet runs
// (an unreadable file, or one with no usable key, fails NewSet), or from
// jwks_url. A URL is registered with a jwk.Cache (lestrrat-go/jwx/v2)
// that refetches it every jwks_refresh_ms in the background; each good
// fetch is converted to verification keys and published. A failed fetch,
// a non-200 answer, a body over 1 MiB, or a set without any usable key
// leaves the last good set in place. That set is used for at most
// jwks_max_stale_ms after the last successful fetch; after that every
// token of the policy fails ("signing keys unavailable") until a fetch
// succeeds. Key sets are shared by the policies of a Set that name the
// same URL and refresh interval, and carried over by NewSet(policies,
// prev, …) for URLs whose URL and interval are unchanged: a snapshot swap
// neither refetches nor loses keys. New URLs are fetched once by NewSet
// (concurrently, waiting at most 5 s); an unreachable issuer does not fail
// NewSet. Close stops the refresh of key sets no newer Set shares.
//
// Keys are skipped when their "use" is not "sig", their key_ops lack
// "verify", they are RSA below 2048 bits, an EC point off its curve, or
// their "alg" does not fit their type. Private keys in a set are reduced
// to their public halves.
//
// # Unknown kid
//
// A token whose kid is not in the set (or any token while the set is
// missing or stale) may cause one refetch of that URL, at most once per
// unknown_kid_refetch_ms counted from the last fetch of any kind (a
// background refresh that just succeeded also counts). Concurrent requests
// share the running refetch instead of starting more; each waits for it
// for at most 2 s. A flood of random kids therefore costs the issuer at
// most one request per unknown_kid_refetch_ms. File key sets never refetch.
//
// # Verification
//
// The token is `<header>: Bearer <token>` (scheme case-insensitive), at
// most MaxTokenBytes, in compact JWS form with strict base64url. The
// header's alg must be one the policy pins ("none" never is); "crit" and
// nested tokens (cty JWT) are refused; jku, jwk, x5u and x5c are ignored.
// The header's typ, when present, must be one of the policy's
// allowed_types (default JWT and at+jwt), compared case-insensitively with
// an "application/" prefix ignored (RFC 7515 §4.1.9, RFC 8725 §3.11); a
// typ that is not a string, or given twice, makes the token malformed; with
// require_type a token without typ fails too.
// The key is chosen by kid (without kid, up to 4 keys that fit are tried)
// and must fit the alg: RS*/PS* need an RSA key, ES256/384/512 an EC key on
// P-256/384/521, EdDSA an Ed25519 key, HS* an "oct" secret at least as
// long as the hash (and only from a file); a key that names its own alg
// verifies only that alg. So an RSA public key can never act as an HMAC
// secret. Signatures are checked with the standard library. Claims: iss
// must equal the policy's issuer; aud (string or array) must contain one
// of its audiences; exp is required and must not have passed, nbf must
// have been reached and iat must not lie in the future, each with
// leeway_ms. Duplicate names among these claims are refused. sub, jti,
// tenant_claim (a string or integer) and scopes_claim (a space-separated
// string or an array of strings) fill the Identity; they may not contain
// control characters, since they travel upstream in headers.
//
// # Verified-token cache
//
// A verified token is cached by its exact bytes, 65,536 per policy in 16
// shards of 4,096 (a full shard drops a random entry); the shard is a
// seeded hash (hash/maphash) of the whole token. See cache.go for when an
// entry is served.
//
// # API keys
//
// The key in the policy's header is hashed with SHA-256 and found through
// a map keyed by a salted hash of that hash, then confirmed with a
// constant-time comparison (see apiKeyPolicy).
//
// # Failures
//
// Every failure is a *Failure with Status 401, a fixed Reason that never
// holds token contents or key material, and a WWW-Authenticate Challenge:
//
//	no credential (or another scheme)  Bearer realm="rampart"
//	more than one header               Bearer realm="rampart", error="invalid_request", …
//	anything wrong with a token        Bearer realm="rampart", error="invalid_token", error_description="<reason>"
//	no API key                         ApiKey realm="rampart"
//	wrong API key                      ApiKey realm="rampart", error="invalid_key"
//
// Token reasons: malformed token, token too large, algorithm not allowed,
// unsupported token header, token type not allowed, unknown signing key, signing keys unavailable,
// invalid signature, malformed claims, wrong issuer, wrong audience, token
// expired, token has no expiry, token not yet valid, token issued in the
// future.
package auth

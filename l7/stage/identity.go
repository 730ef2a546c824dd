package stage

import (
	"net/http"
	"strings"

	"github.com/rampart-edge/rampart/l7/auth"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// IdentityKeys are the canonical names of the identity headers: removed
// from every request (by the screen), set only from a verified identity
// (by the identity_headers stage).
type IdentityKeys struct {
	tenant, subject, keyID, scopes string
}

// NewIdentityKeys canonicalises the snapshot's identity_headers.
func NewIdentityKeys(ih snapshot.IdentityHeaders) IdentityKeys {
	return IdentityKeys{tenant: http.CanonicalHeaderKey(ih.Tenant), subject: http.CanonicalHeaderKey(ih.Subject),
		keyID: http.CanonicalHeaderKey(ih.KeyID), scopes: http.CanonicalHeaderKey(ih.Scopes)}
}

func (k IdentityKeys) strip(h http.Header) {
	delete(h, k.tenant)
	delete(h, k.subject)
	delete(h, k.keyID)
	delete(h, k.scopes)
}

func (k IdentityKeys) set(h http.Header, id *auth.Identity) {
	if id.Tenant != "" {
		h[k.tenant] = []string{id.Tenant}
	}
	if id.Subject != "" {
		h[k.subject] = []string{id.Subject}
	}
	if id.KeyID != "" {
		h[k.keyID] = []string{id.KeyID}
	}
	if len(id.Scopes) > 0 {
		h[k.scopes] = []string{strings.Join(id.Scopes, " ")}
	}
}

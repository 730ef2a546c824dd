package snapshot

// TicketPolicy is tls_session_tickets: how the TLS session ticket keys of
// every TLS listener rotate. The keys themselves never travel in a
// snapshot: each node derives them from its own state file (l7/tickets),
// shared by that node's proxies.
type TicketPolicy struct {
	// RotationMs is how often a new key starts encrypting tickets; the
	// previous one still decrypts, so a ticket resumes for one to two
	// periods. 0 takes the default, 1 h; 60000..86400000.
	RotationMs int `yaml:"rotation_ms" json:"rotation_ms,omitempty"`
}

// Ticket rotation bounds and default.
const (
	DefaultTicketRotationMs = 3_600_000
	MinTicketRotationMs     = 60_000
	MaxTicketRotationMs     = 86_400_000
)

// TicketRotationMs is tls_session_tickets.rotation_ms with its default.
func (c *Config) TicketRotationMs() int {
	if c.TLSSessionTickets == nil || c.TLSSessionTickets.RotationMs == 0 {
		return DefaultTicketRotationMs
	}
	return c.TLSSessionTickets.RotationMs
}

func validateTickets(c *Config, p *problems) {
	if c.TLSSessionTickets != nil && c.TLSSessionTickets.RotationMs != 0 {
		checkRange(p, "tls_session_tickets", "rotation_ms", c.TLSSessionTickets.RotationMs, MinTicketRotationMs, MaxTicketRotationMs)
	}
}

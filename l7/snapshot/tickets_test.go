package snapshot

import (
	"strings"
	"testing"
)

func TestTicketValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		tp   *TicketPolicy
		want string // "" valid
		ms   int
	}{
		{"absent", nil, "", DefaultTicketRotationMs},
		{"zero is the default", &TicketPolicy{}, "", DefaultTicketRotationMs},
		{"a minute", &TicketPolicy{RotationMs: MinTicketRotationMs}, "", MinTicketRotationMs},
		{"a day", &TicketPolicy{RotationMs: MaxTicketRotationMs}, "", MaxTicketRotationMs},
		{"under", &TicketPolicy{RotationMs: 59_999}, "tls_session_tickets: rotation_ms 59999 must be between 60000 and 86400000", 0},
		{"over", &TicketPolicy{RotationMs: MaxTicketRotationMs + 1}, "rotation_ms 86400001", 0},
		{"negative", &TicketPolicy{RotationMs: -1}, "rotation_ms -1", 0},
	} {
		c := loadTestConfig(t, "valid.yaml")
		c.TLSSessionTickets = tc.tp
		Normalize(c)
		err := Validate(c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		case tc.want == "" && c.TicketRotationMs() != tc.ms:
			t.Errorf("%s: rotation %d, want %d", tc.name, c.TicketRotationMs(), tc.ms)
		}
	}
}

package model_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/sim/model"
)

func newTicketAccess(t *testing.T) *model.Access {
	t.Helper()
	a := model.NewAccess("9.1")
	accessMust(t, a.AddUser(kitAlice, "alicepass"))
	return a
}

func TestAccess_NewTicket_format(t *testing.T) {
	t.Parallel()
	a := newTicketAccess(t)
	issued := time.Unix(0x6AA1B8E3, 0)
	ticket, csrf := a.NewTicket("root@pam", issued)
	if !regexp.MustCompile(`^PVE:root@pam:6AA1B8E3::[A-Za-z0-9+/=]+$`).MatchString(ticket) {
		t.Errorf("ticket = %q", ticket)
	}
	if !regexp.MustCompile(`^6AA1B8E3:[A-Za-z0-9+/]{43}$`).MatchString(csrf) {
		t.Errorf("csrf = %q", csrf)
	}
}

func TestAccess_VerifyTicket(t *testing.T) {
	t.Parallel()
	a := newTicketAccess(t)
	issued := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	ticket, _ := a.NewTicket(kitAlice, issued)
	rootTicket, _ := a.NewTicket("root@pam", issued)
	sig := ticket[strings.Index(ticket, "::")+2:]
	stranger := model.NewAccess("9.1")
	accessMust(t, stranger.AddUser(kitAlice, ""))

	tests := []struct {
		name   string
		a      *model.Access
		ticket string
		at     time.Time
		want   model.Auth
		msg    string
	}{
		{name: "fresh", ticket: ticket, at: issued, want: model.Auth{UserID: kitAlice}},
		{name: "root", ticket: rootTicket, at: issued.Add(time.Hour), want: model.Auth{UserID: "root@pam"}},
		{name: "just before expiry", ticket: ticket, at: issued.Add(2*time.Hour - time.Second), want: model.Auth{UserID: kitAlice}},
		{name: "expired at 2h", ticket: ticket, at: issued.Add(2 * time.Hour), msg: "permission denied - invalid PVE ticket\n"},
		{name: "within clock-skew grace", ticket: ticket, at: issued.Add(-5*time.Minute + time.Second), want: model.Auth{UserID: kitAlice}},
		{name: "from the future", ticket: ticket, at: issued.Add(-5 * time.Minute), msg: "permission denied - invalid PVE ticket\n"},
		{name: "user swapped", ticket: strings.Replace(ticket, kitAlice, "root@pam", 1), at: issued, msg: "permission denied - invalid PVE ticket\n"},
		{name: "time swapped", ticket: strings.Replace(ticket, ":"+ticketHex8(issued.Unix())+"::", ":"+ticketHex8(issued.Add(time.Hour).Unix())+"::", 1), at: issued.Add(2 * time.Hour), msg: "permission denied - invalid PVE ticket\n"},
		{name: "signature swapped", ticket: strings.Replace(rootTicket, rootTicket[strings.Index(rootTicket, "::")+2:], sig, 1), at: issued, msg: "permission denied - invalid PVE ticket\n"},
		{name: "other cluster's key", a: stranger, ticket: ticket, at: issued, msg: "permission denied - invalid PVE ticket\n"},
		{name: "garbage", ticket: "PVE:alice@pve:00000000", at: issued, msg: "permission denied - invalid PVE ticket\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			acc := a
			if tc.a != nil {
				acc = tc.a
			}
			got, err := acc.VerifyTicket(tc.ticket, tc.at)
			if tc.msg != "" {
				accessWantError(t, err, http.StatusUnauthorized, tc.msg)
				return
			}
			accessMust(t, err)
			if got != tc.want {
				t.Errorf("Auth = %+v, want %+v", got, tc.want)
			}
		})
	}

	// The user's state counts at every use, not only at login.
	a.Users[kitAlice].Enable = false
	_, err := a.VerifyTicket(ticket, issued)
	accessWantError(t, err, http.StatusUnauthorized, "user 'alice@pve' is disabled\n")
}

// ticketHex8 is PVE's sprintf("%08X", time).
func ticketHex8(n int64) string {
	const digits = "0123456789ABCDEF"
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = digits[n&0xf]
		n >>= 4
	}
	return string(b)
}

func TestAccess_VerifyCSRF(t *testing.T) {
	t.Parallel()
	a := newTicketAccess(t)
	issued := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	ticket, csrf := a.NewTicket(kitAlice, issued)
	tests := []struct {
		name  string
		user  string
		token string
		at    time.Time
		want  bool
	}{
		{"fresh", kitAlice, csrf, issued, true},
		{"just before expiry", kitAlice, csrf, issued.Add(2*time.Hour - time.Second), true},
		{"expired", kitAlice, csrf, issued.Add(2 * time.Hour), false},
		{"other user", "root@pam", csrf, issued, false},
		{"time swapped", kitAlice, ticketHex8(issued.Unix()+60) + csrf[8:], issued, false},
		{"ticket signature is no CSRF token", kitAlice, ticketHex8(issued.Unix()) + ":" + ticket[strings.Index(ticket, "::")+2:], issued, false},
		{"empty", kitAlice, "", issued, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := a.VerifyCSRF(tc.user, tc.token, tc.at); got != tc.want {
				t.Errorf("VerifyCSRF = %v, want %v", got, tc.want)
			}
		})
	}
}

package model

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/corralhq/corral/internal/lazyre"
)

// Tickets and CSRF tokens in PVE's wire format (pve-common PVE::Ticket,
// AccessControl.pm):
//
//	ticket: PVE:<userid>:<HEXTIME>::<signature>
//	CSRF:   <HEXTIME>:<signature>
//
// HEXTIME is the creation time as 8 upper-case hex digits. A ticket or CSRF
// token is valid while its age is above -5 minutes (clock skew grace) and
// below 2 hours, both bounds exclusive as in verify_rsa_ticket.
//
// PVE signs tickets with a rotating RSA key; the emulator signs both with
// HMAC-SHA256 keyed by Access.TicketKey, with a different label for each
// kind so one cannot pass for the other. The ticket signature is standard
// base64 like PVE's; the CSRF one is unpadded base64 like Digest::SHA's
// hmac_sha256_base64. Clients treat both as opaque strings.

const (
	ticketLifetime = 2 * time.Hour   // $ticket_lifetime
	ticketGrace    = 5 * time.Minute // $auth_graceperiod
)

var (
	ticketRe      = lazyre.New(`^(PVE:\S+)::([^:\s]+)$`)
	ticketPlainRe = lazyre.New(`^PVE:(?:(\S+):)?([A-Z0-9]{8})$`)
	ticketCSRFRe  = lazyre.New(`^([A-Z0-9]{8}):(\S+)$`)
)

// NewTicket issues the ticket (the PVEAuthCookie value) and the
// CSRFPreventionToken for userid at now, as POST /access/ticket returns
// them. It sets a TicketKey if the state has none.
func (a *Access) NewTicket(userid string, now time.Time) (ticket, csrf string) {
	if len(a.TicketKey) == 0 {
		a.TicketKey = make([]byte, 32)
		rand.Read(a.TicketKey)
	}
	plain := fmt.Sprintf("PVE:%s:%s", userid, ticketHexTime(now))
	ticket = plain + "::" + base64.StdEncoding.EncodeToString(a.ticketMAC("ticket", plain))
	return ticket, a.csrfToken(userid, now)
}

// VerifyTicket checks a ticket's signature and age at now and that its user
// exists, is enabled and has not expired. Failures are 401: "permission
// denied - invalid PVE ticket\n" for a forged, malformed or expired ticket,
// else check_user_enabled's message.
func (a *Access) VerifyTicket(ticket string, now time.Time) (Auth, error) {
	invalid := &Error{Kind: ErrAuth, Message: "permission denied - invalid PVE ticket\n"}
	m := ticketRe.FindStringSubmatch(ticket)
	if m == nil || len(a.TicketKey) == 0 {
		return Auth{}, invalid
	}
	plain, sig := m[1], m[2]
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, a.ticketMAC("ticket", plain)) {
		return Auth{}, invalid
	}
	pm := ticketPlainRe.FindStringSubmatch(plain)
	if pm == nil || pm[1] == "" || !ticketFresh(pm[2], now) {
		return Auth{}, invalid
	}
	userid := pm[1]
	if err := a.checkUserEnabled(userid); err != nil {
		return Auth{}, err
	}
	return Auth{UserID: userid}, nil
}

// VerifyCSRF reports whether token is a valid CSRFPreventionToken for
// userid at now. A request that fails it gets 401 "Permission denied -
// invalid csrf token\n" from PVE.
func (a *Access) VerifyCSRF(userid, token string, now time.Time) bool {
	m := ticketCSRFRe.FindStringSubmatch(token)
	if m == nil || len(a.TicketKey) == 0 {
		return false
	}
	want := base64.RawStdEncoding.EncodeToString(a.ticketMAC("csrf", m[1]+":"+userid))
	return hmac.Equal([]byte(m[2]), []byte(want)) && ticketFresh(m[1], now)
}

// csrfToken is assemble_csrf_prevention_token: "<HEXTIME>:<signature>".
func (a *Access) csrfToken(userid string, now time.Time) string {
	ts := ticketHexTime(now)
	return ts + ":" + base64.RawStdEncoding.EncodeToString(a.ticketMAC("csrf", ts+":"+userid))
}

// ticketMAC signs data under a label ("ticket" or "csrf").
func (a *Access) ticketMAC(label, data string) []byte {
	mac := hmac.New(sha256.New, a.TicketKey)
	mac.Write([]byte(label))
	mac.Write([]byte{0})
	mac.Write([]byte(data))
	return mac.Sum(nil)
}

// ticketHexTime is PVE's sprintf("%08X", time()).
func ticketHexTime(t time.Time) string {
	return fmt.Sprintf("%08X", t.Unix())
}

// ticketFresh reports whether a HEXTIME is inside the validity window at
// now: -grace < age < lifetime.
func ticketFresh(hexTime string, now time.Time) bool {
	ts, err := strconv.ParseInt(hexTime, 16, 64)
	if err != nil {
		return false
	}
	age := now.Unix() - ts
	return age > -int64(ticketGrace/time.Second) && age < int64(ticketLifetime/time.Second)
}

package sim

import (
	"net/http"
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// authenticate identifies the caller from an API token header
// (Authorization: PVEAPIToken=USER@REALM!ID=SECRET) or a ticket cookie
// (PVEAuthCookie), in which case writes also need the
// CSRFPreventionToken header, as pveproxy requires.
func (s *Server) authenticate(req *http.Request) (model.Auth, error) {
	if h := req.Header.Get("Authorization"); h != "" {
		v, ok := strings.CutPrefix(h, "PVEAPIToken=")
		if !ok {
			v, ok = strings.CutPrefix(h, "PVEAPIToken ")
		}
		if !ok {
			return model.Auth{}, authFailure()
		}
		id, secret, ok := strings.Cut(strings.TrimSpace(v), "=")
		if !ok {
			return model.Auth{}, authFailure()
		}
		auth, err := s.cluster.VerifyToken(id, secret)
		if err != nil {
			return model.Auth{}, authFailure()
		}
		return auth, nil
	}
	c, err := req.Cookie("PVEAuthCookie")
	if err != nil || c.Value == "" {
		return model.Auth{}, &model.Error{Kind: model.ErrAuth, Message: "No ticket\n"}
	}
	auth, err := s.cluster.VerifyTicket(c.Value)
	if err != nil {
		return model.Auth{}, authFailure()
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		if !s.cluster.VerifyCSRF(auth.UserID, req.Header.Get("CSRFPreventionToken")) {
			return model.Auth{}, &model.Error{Kind: model.ErrAuth, Message: "Permission denied - invalid csrf token\n"}
		}
	}
	return auth, nil
}

func authFailure() error {
	return &model.Error{Kind: model.ErrAuth, Message: "authentication failure\n"}
}

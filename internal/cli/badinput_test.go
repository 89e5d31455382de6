package cli

import (
	"net"
	"testing"
)

// The bad-input cases themselves are files in testdata/bad, run by
// TestBadInputCorpus (corpus_test.go).

const tmpl = "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"

// goodApp is a valid manifest that tests start from.
const goodApp = `apps:
  - name: notes
    template: ` + tmpl + `
    memory: 512
    rootfs:
      size: 4G
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
`

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

package ui

import (
	"bytes"
	"strings"
	"testing"
)

// A restart asked for by many steps is said in short lines: steps with
// the same reason together, one reason to a line when they do not fit
// (issue 32 item 7: restart lines past 200 characters).
func TestRestartLineShort(t *testing.T) {
	why := map[string]string{
		"file: /etc/hermes/config.yaml": "changed", "envFile: /home/hermes/.env": "changed",
		"file: /etc/systemd/system/hermes.service": "changed", "run: install hermes from the release tarball": "new step",
		"run: migrate": "notified by run: install hermes from the release tarball",
	}
	var steps []string
	for _, s := range []string{"file: /etc/hermes/config.yaml", "envFile: /home/hermes/.env", "file: /etc/systemd/system/hermes.service", "run: install hermes from the release tarball", "run: migrate"} {
		steps = append(steps, s)
	}
	var b bytes.Buffer
	writeRestart(&b, "hermes", steps, why)
	want := "      restart hermes once, because:\n" +
		"        - file: /etc/hermes/config.yaml, envFile: /home/hermes/.env, file: /etc/systemd/system/hermes.service changed\n" +
		"        - run: install hermes from the release tarball is new\n" +
		"        - run: migrate runs (notified by run: install hermes from the release tarball)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if len(l) > 200 {
			t.Errorf("line of %d characters: %s", len(l), l)
		}
	}
	b.Reset()
	writeRestart(&b, "hermes", []string{"file: a", "file: b"}, map[string]string{"file: a": "changed", "file: b": "changed"})
	if got := b.String(); got != "      restart hermes because file: a, file: b changed\n" {
		t.Errorf("short: %q", got)
	}
}

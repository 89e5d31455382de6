package manifest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/manifest"
)

// TestParse_provisionDefaultsRoundTrip: writing out every default of
// provision steps, health checks and the backup policy gives the same app
// as leaving them out, so the documented defaults are the applied ones.
func TestParse_provisionDefaultsRoundTrip(t *testing.T) {
	implicit := `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - run: make install
      - user: { name: app }
      - file: { path: /etc/app.conf, content: "x" }
      - envFile: { path: /etc/app.env, env: [{ name: K, value: v }] }
      - compose: { content: "services: {}" }
    health:
      - http: http://localhost/
      - tcp: "localhost:80"
      - command: "true"
`
	explicit := `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    features: { nesting: true }
    provision:
      - { name: "run: make install", timeout: 10m, run: make install }
      - { name: "user: app", timeout: 10m, user: { name: app, home: /home/app, shell: /bin/bash } }
      - { name: "file: /etc/app.conf", timeout: 10m, file: { path: /etc/app.conf, content: "x", mode: "0644", owner: root } }
      - { name: "envFile: /etc/app.env", timeout: 10m, envFile: { path: /etc/app.env, env: [{ name: K, value: v }], mode: "0600", owner: root } }
      - name: "compose: /opt/web/compose.yaml"
        timeout: 10m
        compose: { path: /opt/web/compose.yaml, content: "services: {}", mode: "0644", project: web }
    health:
      - { name: "http: http://localhost/", http: http://localhost/, expect: 200, timeout: 5s, retries: 10, interval: 3s }
      - { name: "tcp: localhost:80", tcp: "localhost:80", timeout: 5s, retries: 10, interval: 3s }
      - { name: "command: true", command: "true", timeout: 5s, retries: 10, interval: 3s }
    backup: { keep: 0, storage: local, mode: snapshot }
    snapshotBeforeChange: false
`
	parse := func(src string) manifest.App {
		t.Helper()
		f, err := manifest.Parse("corral.yaml", []byte(src), testOptions())
		if err != nil {
			t.Fatal(err)
		}
		return f.Apps[0]
	}
	a, b := parse(implicit), parse(explicit)
	if diff := cmp.Diff(a, b, ignorePos); diff != "" {
		t.Errorf("defaults left out (-) vs written out (+):\n%s", diff)
	}
	if !a.Features.Nesting || !a.NeedsKeyctl {
		t.Errorf("compose step: Nesting=%v NeedsKeyctl=%v, want both", a.Features.Nesting, a.NeedsKeyctl)
	}
}

// TestParse_needsKeyctl: only an unprivileged app with a compose step
// needs keyctl, and only a compose step turns nesting on.
func TestParse_needsKeyctl(t *testing.T) {
	tests := []struct {
		name, provision   string
		nesting, needsKey bool
	}{
		{"no steps", "", false, false},
		{"run only", "\n    provision: [{ run: docker ps }]", false, false},
		{"compose", "\n    provision: [{ run: x }, { compose: { content: x } }]", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := manifest.Parse("corral.yaml", []byte("apps:\n  - name: web\n    template: a.tar.gz"+tt.provision+"\n"), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			a := f.Apps[0]
			if a.Features.Nesting != tt.nesting || a.NeedsKeyctl != tt.needsKey {
				t.Errorf("Nesting=%v NeedsKeyctl=%v, want %v %v", a.Features.Nesting, a.NeedsKeyctl, tt.nesting, tt.needsKey)
			}
		})
	}
}

const envFileManifest = `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - envFile:
          path: /etc/app.env
          env:
            - { name: FROM_ENV, value: "${env:API_KEY}" }
            - { name: FROM_FILE, value: "${file:~/.config/corral/api.key}" }
            - { name: LITERAL, value: "literal-env-value" }
            - { name: PORT, value: "8080" }
`

// TestFile_envFileSecrets: every envFile value is a secret, written
// literally or read through a reference: listed by Secrets, replaced by
// Redact, and never printed with the App.
func TestFile_envFileSecrets(t *testing.T) {
	f, err := manifest.Parse("corral.yaml", []byte(envFileManifest), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"8080", "literal-env-value", envAPIKey, fileAPIKey}
	if diff := cmp.Diff(want, f.Secrets()); diff != "" {
		t.Errorf("Secrets() (-want +got):\n%s", diff)
	}
	env := f.Apps[0].Provision[0].Env
	var lines []string
	for _, e := range env {
		lines = append(lines, e.Name+"="+e.Value.Reveal())
	}
	got := f.Redact(strings.Join(lines, "\n"))
	// PORT's 4 characters are too short to redact without garbling
	// every "8080" in an output (minRedact).
	wantText := "FROM_ENV=${env:API_KEY}\nFROM_FILE=${file:~/.config/corral/api.key}\nLITERAL=(sensitive)\nPORT=8080"
	if got != wantText {
		t.Errorf("Redact:\n got %s\nwant %s", got, wantText)
	}
	for how, text := range render(t, f.Apps[0]) {
		for _, s := range []string{envAPIKey, fileAPIKey, "literal-env-value"} {
			if strings.Contains(text, s) {
				t.Errorf("App printed with %s shows %q", how, s)
			}
		}
	}
}

// TestParse_provisionDiagnosticsHideSecrets: a bad envFile value, a run
// script, a file content or a health target read through a reference is
// named by its reference in every diagnostic, and a URL's password is
// masked.
func TestParse_provisionDiagnosticsHideSecrets(t *testing.T) {
	src := `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - envFile: { path: /e, env: [{ name: A, value: "${env:MULTI}" }, { name: B, value: "two\nline2-secret" }] }
      - { run: "${env:API_KEY}" }
      - { run: "${env:API_KEY}" }
      - { timeout: "${env:API_KEY}", run: x }
    health:
      - http: "${env:API_KEY}"
      - http: "http://user:hunter2-pw@localhost/"
`
	_, err := manifest.Parse("corral.yaml", []byte(src), testOptions())
	if err == nil {
		t.Fatal("Parse accepted it")
	}
	for _, s := range append(secretValues, "hunter2-pw") {
		if strings.Contains(err.Error(), s) {
			t.Errorf("diagnostics show %q:\n%s", s, err)
		}
	}
	for _, want := range []string{
		`provision[2]: step name "run: ${env:API_KEY}" is already used by apps[0].provision[1]`,
		`provision[3].timeout: invalid duration from ${env:API_KEY}`,
		`health[0].http: invalid value from ${env:API_KEY}: the scheme must be http or https`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("diagnostics do not say %q:\n%s", want, err)
		}
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != 6 {
		t.Errorf("%d diagnostics, want 6:\n%s", got, err)
	}
}

// TestParse_mode covers the spellings of a file mode.
func TestParse_mode(t *testing.T) {
	tests := []struct {
		in   string
		want string // fmt of os.FileMode, or "" for rejected
	}{
		{`"0644"`, "-rw-r--r--"}, {`0644`, "-rw-r--r--"}, {`644`, "-rw-r--r--"}, {`"0o600"`, "-rw-------"}, {`0o600`, "-rw-------"},
		{`"1777"`, "trwxrwxrwx"}, {`"4755"`, "urwxr-xr-x"}, {`"0000"`, "----------"},
		{`"0888"`, ""}, {`"64"`, ""}, {`"07777x"`, ""}, {`"00000"`, "----------"}, {`0x1a4`, ""}, {`6.44`, ""}, {`true`, ""}, {`"${env:API_KEY}"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			src := fmt.Sprintf("apps:\n  - name: web\n    template: a.tar.gz\n    provision:\n      - file: { path: /a, content: x, mode: %s }\n", tt.in)
			f, err := manifest.Parse("corral.yaml", []byte(src), testOptions())
			switch {
			case tt.want == "" && err == nil:
				t.Errorf("accepted, mode %v", f.Apps[0].Provision[0].Mode)
			case tt.want == "":
			case err != nil:
				t.Errorf("rejected: %v", err)
			case f.Apps[0].Provision[0].Mode.String() != tt.want:
				t.Errorf("mode %v, want %s", f.Apps[0].Provision[0].Mode, tt.want)
			}
		})
	}
}

// A health URL that does not parse is still shown without its password.
func TestParse_unparsableURLHidesPassword(t *testing.T) {
	for _, u := range []string{"http://user:hunter2-pw%zz@localhost/", "http://user:hunter2-pw@[::1/", "http://user:hunter2-pw@localhost:port/", "http://user:hunter2-pw/x%zz@localhost/"} {
		src := `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    health:
      - http: "` + u + `"
`
		_, err := manifest.Parse("corral.yaml", []byte(src), testOptions())
		if err == nil {
			t.Fatalf("Parse accepted %s", u)
		}
		if strings.Contains(err.Error(), "hunter2-pw") {
			t.Errorf("diagnostic shows the password:\n%s", err)
		}
		if !strings.Contains(err.Error(), "health[0].http: invalid value") {
			t.Errorf("diagnostic does not name the value:\n%s", err)
		}
	}
}

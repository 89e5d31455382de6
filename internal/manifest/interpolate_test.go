package manifest_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/manifest"
)

// interpolationApp is one app whose description, envFile value and
// password are written as tmpl (YAML-quoted; the last two after a prefix:
// both are secrets even when literal), for TestParse_interpolation.
func interpolationApp(tmpl string) string {
	return `apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    description: "` + tmpl + `"
    password: "pw-` + tmpl + `"
    provision:
      - envFile: { path: /opt/web/.env, env: [{ name: DB_URL, value: "v-` + tmpl + `" }] }
`
}

// TestParse_interpolation: references inside a string are read where
// whole-value ones are; a string that read a value from the environment
// or a file is a secret as a whole, under what the manifest wrote, and
// so is each value it read, under its reference.
func TestParse_interpolation(t *testing.T) {
	tests := []struct {
		name, tmpl, want string
		// redacted is Redact of the description: what output shows.
		redacted string
		// secret: the description is listed in Secrets.
		secret bool
	}{
		{"env inside", "postgres://app:${env:ROOT_PW}@db:5432/app", "postgres://app:" + envRootPW + "@db:5432/app",
			"postgres://app:${env:ROOT_PW}@db:5432/app", true},
		{"file and env", "${file:~/.config/corral/root.pw}/${env:API_KEY}", filePW + "/" + envAPIKey,
			"${file:~/.config/corral/root.pw}/${env:API_KEY}", true},
		{"short secret inside: the whole is redacted", "token=${env:SHORT_PW};", "token=" + envShortPW + ";",
			"token=${env:SHORT_PW};", true},
		{"default only: no secret", "level=${env:UNSET_LEVEL:-info}", "level=info", "level=info", false},
		{"escape beside a reference", "$${HOME} is ${env:NODE}-home", "${HOME} is pve2-home",
			"$${HOME} is ${env:NODE}-home", true},
		{"whole value, as before", "${env:API_KEY}", envAPIKey, "${env:API_KEY}", true},
		{"escape only", "cost $${price}", "cost ${price}", "cost ${price}", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := manifest.Parse("corral.yaml", []byte(interpolationApp(tt.tmpl)), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			a := f.Apps[0]
			if got := a.Description; got != tt.want {
				t.Errorf("description=%q, want %q", got, tt.want)
			}
			if got, want := a.Provision[0].Env[0].Value.Reveal(), "v-"+tt.want; got != want {
				t.Errorf("envFile value=%q, want %q", got, want)
			}
			if got, want := a.Password.Reveal(), "pw-"+tt.want; got != want {
				t.Errorf("password=%q, want %q", got, want)
			}
			if got := f.Redact("d=" + a.Description + " pw=" + a.Password.Reveal()); got != "d="+tt.redacted+" pw="+a.Password.String() {
				t.Errorf("Redact=%q, want d=%s pw=%s", got, tt.redacted, a.Password.String())
			}
			if got := slices.Contains(f.Secrets(), tt.want); got != tt.secret {
				t.Errorf("description in Secrets()=%v, want %v: %q", got, tt.secret, f.Secrets())
			}
			for how, text := range render(t, a.Provision[0].Env[0].Value) {
				for _, s := range secretValues {
					if strings.Contains(text, s) {
						t.Errorf("envFile value printed with %s shows %q: %s", how, s, text)
					}
				}
			}
		})
	}
}

// TestParse_interpolationProblems: a bad or unreadable reference inside a
// string is reported as one would be as the whole value, naming the
// reference, never a value read.
func TestParse_interpolationProblems(t *testing.T) {
	tests := []struct{ name, tmpl, want string }{
		{"unset", "a-${env:ROOT_PW}-${env:NOPE}", "apps[0].description: environment variable NOPE is not set (write ${env:NOPE:-} for an optional one)"},
		{"two unset", "${env:NOPE}${env:NADA}", "environment variable NOPE is not set (write ${env:NOPE:-} for an optional one); environment variable NADA is not set"},
		{"missing file", "x${file:/nope}", "cannot read ${file:/nope}"},
		{"bad reference", "a ${vault:x}", "apps[0].description: invalid reference (allowed: "},
		{"unclosed", "a ${env:X", "apps[0].description: invalid reference"},
		{"corral's credential", "t=${env:PROXMOX_VE_API_TOKEN}", "PROXMOX_VE_API_TOKEN is corral's own credential"},
		{"checked after reading", "${env:ROOT_PW} x", "apps[0].name: invalid value from ${env:ROOT_PW} x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := interpolationApp("ok")
			if tt.name == "checked after reading" {
				src = strings.Replace(src, "name: web", `name: "`+tt.tmpl+`"`, 1)
			} else {
				src = strings.Replace(src, `description: "ok"`, `description: "`+tt.tmpl+`"`, 1)
			}
			_, err := manifest.Parse("corral.yaml", []byte(src), testOptions())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse: %v\nwant an error containing %q", err, tt.want)
			}
			for _, s := range secretValues {
				if strings.Contains(err.Error(), s) {
					t.Errorf("diagnostics show %q:\n%s", s, err)
				}
			}
		})
	}
}

// TestParse_interpolationLazy: a provisioning value with a reference
// inside that cannot be read is left unread by a lazy load, and listed.
func TestParse_interpolationLazy(t *testing.T) {
	src := interpolationApp("ok")
	src = strings.Replace(src, `value: "v-ok"`, `value: "postgres://app:${env:DB_PW}@${env:DB_HOST:-db}/app"`, 1)
	none := manifest.LoadOptions{Getenv: func(string) (string, bool) { return "", false },
		ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist }}
	if _, err := manifest.Parse("corral.yaml", []byte(src), none); err == nil || !strings.Contains(err.Error(), "DB_PW is not set") {
		t.Fatalf("strict load: %v, want DB_PW is not set", err)
	}
	none.Lazy = true
	f, err := manifest.Parse("corral.yaml", []byte(src), none)
	if err != nil {
		t.Fatalf("lazy load: %v", err)
	}
	if diff := cmp.Diff([]string{"${env:DB_PW}"}, f.Apps[0].Unresolved); diff != "" {
		t.Errorf("Unresolved (-want +got):\n%s", diff)
	}
}

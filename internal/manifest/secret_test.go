package manifest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/corralhq/corral/internal/manifest"
)

const leak = "hunter2-do-not-print"

// render prints v every way corral's code might: fmt verbs, JSON, YAML
// and both slog handlers.
func render(t *testing.T, v any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		out[verb] = fmt.Sprintf(verb, v)
	}
	out["Sprint"] = fmt.Sprint(v)
	out["Errorf"] = fmt.Errorf("apply: %w", fmt.Errorf("%v", v)).Error()
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	out["json"] = string(j)
	y, err := yaml.Marshal(v)
	if err != nil {
		t.Fatalf("yaml: %v", err)
	}
	out["yaml"] = string(y)
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("msg", "v", v, slog.Group("g", "v", v))
	slog.New(slog.NewJSONHandler(&js, nil)).Info("msg", "v", v, slog.Group("g", "v", v))
	out["slog text"], out["slog json"] = text.String(), js.String()
	return out
}

func TestSecret_neverPrintsValue(t *testing.T) {
	type holder struct {
		Password manifest.Secret
		hidden   manifest.Secret // fmt prints unexported fields raw
	}
	s := manifest.NewSecret("${env:ROOT_PW}", leak)
	for name, v := range map[string]any{
		"secret":     s,
		"pointer":    &s,
		"literal":    manifest.NewSecret("", leak),
		"struct":     holder{Password: s, hidden: s},
		"slice":      []manifest.Secret{s},
		"map value":  map[string]manifest.Secret{"pw": s},
		"in an App":  manifest.App{Name: "web", Password: s},
		"app in map": map[string]any{"app": &manifest.App{Password: s}},
	} {
		for how, text := range render(t, v) {
			if strings.Contains(text, leak) {
				t.Errorf("%s printed with %s shows the value: %s", name, how, text)
			}
		}
	}
	if got, want := s.Reveal(), leak; got != want {
		t.Errorf("Reveal()=%q, want %q", got, want)
	}
}

func TestSecret_String(t *testing.T) {
	tests := []struct {
		name string
		s    manifest.Secret
		want string
	}{
		{"env", manifest.NewSecret("${env:ROOT_PW}", leak), "${env:ROOT_PW}"},
		{"file", manifest.NewSecret("${file:~/.pw}", leak), "${file:~/.pw}"},
		{"literal", manifest.NewSecret("", leak), "(sensitive)"},
		{"zero", manifest.Secret{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Errorf("String()=%q, want %q", got, tt.want)
			}
			if got := fmt.Sprintf("%v|%s|%q", tt.s, tt.s, tt.s); got != tt.want+"|"+tt.want+"|"+fmt.Sprintf("%q", tt.want) {
				t.Errorf("fmt gave %s", got)
			}
			j, _ := json.Marshal(tt.s)
			if got, want := string(j), fmt.Sprintf("%q", tt.want); got != want {
				t.Errorf("json %s, want %s", got, want)
			}
		})
	}
	if !(manifest.Secret{}).IsZero() || manifest.NewSecret("", "").IsZero() {
		t.Error("IsZero is wrong")
	}
}

func TestSecret_Equal(t *testing.T) {
	a := manifest.NewSecret("${env:A}", "x")
	if !a.Equal(manifest.NewSecret("${env:A}", "x")) {
		t.Error("equal secrets differ")
	}
	for _, b := range []manifest.Secret{manifest.NewSecret("${env:B}", "x"), manifest.NewSecret("${env:A}", "y"), {}} {
		if a.Equal(b) {
			t.Errorf("%v equals %v", a, b)
		}
	}
}

const secretManifest = `
apps:
  - name: web
    node: ${env:NODE}
    template: debian-12-standard_12.12-1_amd64.tar.zst
    password: ${env:ROOT_PW}
    description: ${file:~/.config/corral/root.pw}
    ssh:
      publicKeys: ["${file:~/.ssh/id_ed25519.pub}"]
  - name: db
    template: debian-12-standard_12.12-1_amd64.tar.zst
    password: literal-pw-123
`

// TestFile_Secrets: every value read through a reference is registered,
// except SSH public keys; a literal password is registered too.
func TestFile_Secrets(t *testing.T) {
	f, err := manifest.Parse("corral.yaml", []byte(secretManifest), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{envRootPW, "literal-pw-123", "pve2", filePW}
	slices.Sort(want)
	if diff := cmp.Diff(want, f.Secrets()); diff != "" {
		t.Errorf("Secrets() (-want +got):\n%s", diff)
	}
	web, _ := f.App("web")
	if got, want := web.Password.String(), "${env:ROOT_PW}"; got != want {
		t.Errorf("Password.String()=%q, want %q", got, want)
	}
	if got, want := web.Password.Reveal(), envRootPW; got != want {
		t.Errorf("Password.Reveal()=%q, want %q", got, want)
	}
	db, _ := f.App("db")
	if got, want := db.Password.String(), "(sensitive)"; got != want {
		t.Errorf("literal Password.String()=%q, want %q", got, want)
	}
	for how, text := range render(t, f) {
		for _, s := range f.Secrets() {
			if s != "pve2" && s != filePW && strings.Contains(text, s) {
				// node and description are plain strings in App by design;
				// the passwords must never show.
				t.Errorf("File printed with %s shows %q", how, s)
			}
		}
	}
}

func TestFile_Redact(t *testing.T) {
	f, err := manifest.Parse("corral.yaml", []byte(secretManifest), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	web, _ := f.App("web")
	in := fmt.Sprintf("node=%s description=%q pw=%s pw2=literal-pw-123 key=%s",
		web.Node, web.Description, web.Password.Reveal(), web.SSH.PublicKeys[0])
	// The node name (4 characters) is too short to redact: see minRedact.
	want := `node=pve2 description="${file:~/.config/corral/root.pw}" pw=${env:ROOT_PW} pw2=(sensitive) key=` + key1
	if got := f.Redact(in); got != want {
		t.Errorf("Redact:\n got %s\nwant %s", got, want)
	}
}

// TestParse_diagnosticsHideSecrets: a value read through a reference, or
// a password, is never quoted in a diagnostic.
func TestParse_diagnosticsHideSecrets(t *testing.T) {
	src := `
apps:
  - name: web
    node: ${env:BAD_NODE}
    template: debian-12-standard_12.12-1_amd64.tar.zst
    password: ${env:SHORT_PW}
    volumes:
      - { name: data, size: 1G, mount: "${env:ROOT_PW}" }
  - name: db
    template: debian-12-standard_12.12-1_amd64.tar.zst
    password: "abcd"
`
	_, err := manifest.Parse("corral.yaml", []byte(src), testOptions())
	if err == nil {
		t.Fatal("Parse accepted it")
	}
	for _, s := range append(secretValues, `"abcd"`) {
		if strings.Contains(err.Error(), s) {
			t.Errorf("diagnostics show %q:\n%s", s, err)
		}
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != 4 {
		t.Errorf("%d diagnostics, want 4:\n%s", got, err)
	}
}

// TestParse_lazy: a command that neither provisions nor creates loads the
// manifest without the values only those read; every other reference is
// still required, and a strict load still asks for all of them.
func TestParse_lazy(t *testing.T) {
	const src = `apps:
  - name: web
    template: ${env:TMPL:-debian-12-standard_12.12-1_amd64.tar.zst}
    password: ${env:ROOT_PW}
    provision:
      - envFile: { path: /opt/web/.env, env: [{ name: K, value: "${env:API_KEY}" }, { name: T, value: "${env:TOKEN:-}" }] }
      - file: { path: /etc/web.conf, content: "${file:missing.conf}" }
      - run: ${env:SCRIPT}
`
	none := manifest.LoadOptions{Getenv: func(string) (string, bool) { return "", false },
		ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist }}
	if _, err := manifest.Parse("corral.yaml", []byte(src), none); err == nil {
		t.Fatal("a strict load accepted unset variables")
	}
	lazy := none
	lazy.Lazy = true
	f, err := manifest.Parse("corral.yaml", []byte(src), lazy)
	if err != nil {
		t.Fatalf("lazy load: %v", err)
	}
	a := f.Apps[0]
	want := []string{"${env:ROOT_PW}", "${env:API_KEY}", "${file:missing.conf}", "${env:SCRIPT}"}
	if !slices.Equal(a.Unresolved, want) {
		t.Errorf("Unresolved = %q, want %q", a.Unresolved, want)
	}
	if a.Template != "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst" {
		t.Errorf("template default not taken: %q", a.Template)
	}
	if _, err := manifest.Parse("corral.yaml", []byte(strings.Replace(src, "${env:TMPL:-debian-12-standard_12.12-1_amd64.tar.zst}", "${env:TMPL}", 1)), lazy); err == nil ||
		!strings.Contains(err.Error(), "TMPL is not set") {
		t.Errorf("a template reference must still be read: %v", err)
	}
}

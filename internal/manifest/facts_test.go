package manifest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/manifest"
)

// factsManifest's web reads db's facts in each kind of guest string.
const factsManifest = `apps:
  - name: db
    template: debian-12-standard_12.12-1_amd64.tar.zst
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - envFile:
          path: /etc/web.env
          env:
            - name: DATABASE_URL
              value: "postgres://app:${env:ROOT_PW}@${app:db.address}:5432/app"
            - name: LITERAL
              value: "$${HOME} stays"
      - run: echo "db is ct ${app:db.vmid} on ${app:db.node}, $${PWD}"
      - file:
          path: /etc/web.conf
          content: "upstream ${app:db.address}:5432\n"
      - run: echo "no facts, $${HOME}"
`

// TestParse_guestFacts: a guest string keeps ${app:APP.FACT} for plan
// and apply, with every string of its step a template (a literal ${
// written $${, siblings too), reads ${env:…} at load time, and a step
// without facts stays as it was.
func TestParse_guestFacts(t *testing.T) {
	f, err := manifest.Parse("corral.yaml", []byte(factsManifest), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	web, _ := f.App("web")
	if diff := cmp.Diff([]string{"db"}, web.FactApps()); diff != "" {
		t.Errorf("FactApps (-want +got):\n%s", diff)
	}
	st := web.Provision
	if diff := cmp.Diff([][]string{{"db.address"}, {"db.vmid", "db.node"}, {"db.address"}, nil},
		[][]string{st[0].Facts, st[1].Facts, st[2].Facts, st[3].Facts}); diff != "" {
		t.Errorf("Facts (-want +got):\n%s", diff)
	}
	if got, want := st[1].Name, `run: echo "db is ct ${app:db.vmid} on ${app:d`; got != want {
		t.Errorf("a run step with facts is named %q, want its first line as written %q", got, want)
	}
	facts := map[string]string{"db.address": "10.0.0.5", "db.vmid": "101", "db.node": "pve"}
	fact := func(app, name string) (string, error) {
		if v, ok := facts[app+"."+name]; ok {
			return v, nil
		}
		return "", errors.New("unknown")
	}
	expand := func(s string) string {
		t.Helper()
		v, err := manifest.ExpandOutput(s, fact)
		if err != nil {
			t.Fatalf("ExpandOutput(%q): %v", s, err)
		}
		return v
	}
	got := []string{expand(st[0].Env[0].Value.Reveal()), expand(st[0].Env[1].Value.Reveal()), expand(st[1].Run), expand(st[2].Content), st[3].Run}
	want := []string{"postgres://app:" + envRootPW + "@10.0.0.5:5432/app", "${HOME} stays", `echo "db is ct 101 on pve, ${PWD}"`, "upstream 10.0.0.5:5432\n", `echo "no facts, ${HOME}"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("expanded (-want +got):\n%s", diff)
	}
	// The password read is a secret of its own, so the composed value
	// shows it as its reference once the address is in.
	if red := f.Redact(got[0]); strings.Contains(red, envRootPW) || !strings.Contains(red, "${env:ROOT_PW}") {
		t.Errorf("Redact(composed URL) = %q", red)
	}
}

// TestParse_guestFactsProblems: each wrong ${app:…} in a guest string is
// reported at its value, saying what to write.
func TestParse_guestFactsProblems(t *testing.T) {
	app := func(name, extra, value string) string {
		return "  - name: " + name + "\n    template: debian-12-standard_12.12-1_amd64.tar.zst\n" + extra +
			"    provision:\n      - run: \"" + value + "\"\n"
	}
	tests := []struct{ name, apps, want string }{
		{"unknown app", app("web", "", "echo ${app:nope.address}"),
			"corral.yaml:5:14: apps[0].provision[0].run: ${app:nope.address} names no app of this manifest (its apps: web)"},
		{"unknown fact", app("db", "", "") + app("web", "", "echo ${app:db.password}"),
			"apps[1].provision[0].run: invalid reference to an app's fact: write ${app:APP.FACT} with FACT one of address, vmid, node"},
		{"volatile fact", app("db", "", "") + app("web", "", "echo ${app:db.status}"),
			"with FACT one of address, vmid, node (status, health and ssh change"},
		{"own address", app("web", "", "echo ${app:web.address}"),
			"${app:web.address} names app web's own address, which is known only once its container is created"},
		{"own vmid", app("web", "", "echo ${app:web.vmid}"), "set its vmid"},
		{"cycle", app("a", "", "echo ${app:b.address}") + app("b", "", "echo ${app:c.vmid}") + app("c", "", "echo ${app:a.node}"),
			"corral.yaml:5:14: apps[0].provision[0].run: apps read each other's facts round a cycle (a → b → c → a)"},
		{"two apps", app("a", "", "echo ${app:b.address}") + app("b", "", "echo ${app:a.address}"),
			"round a cycle (a → b → a)"},
		{"in a name", app("db", "", "") + "  - name: web\n    template: debian-12-standard_12.12-1_amd64.tar.zst\n    description: \"${app:db.address}\"\n",
			"apps[1].description: invalid reference"},
		{"in a health check", app("db", "", "") + "  - name: web\n    template: debian-12-standard_12.12-1_amd64.tar.zst\n    health:\n      - command: \"ping ${app:db.address}\"\n",
			"apps[1].health[0].command: invalid reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Parse("corral.yaml", []byte("apps:\n"+tt.apps), testOptions())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse: %v\nwant %q", err, tt.want)
			}
		})
	}
}

// TestParse_guestFactsFixed: an app may name its own fact when the
// manifest fixes it, and another app's facts in a chain without a cycle.
func TestParse_guestFactsFixed(t *testing.T) {
	src := `apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    vmid: 150
    node: pve
    network:
      ip: 10.0.0.9/24
      gateway: 10.0.0.1
    provision:
      - run: "echo ${app:web.vmid} ${app:web.node} ${app:web.address} ${app:db.address}"
  - name: db
    template: debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - run: "echo ${app:cache.address}"
  - name: cache
    template: debian-12-standard_12.12-1_amd64.tar.zst
`
	f, err := manifest.Parse("corral.yaml", []byte(src), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	web, _ := f.App("web")
	if diff := cmp.Diff([]string{"db"}, web.FactApps()); diff != "" {
		t.Errorf("FactApps leaves out the app itself (-want +got):\n%s", diff)
	}
}

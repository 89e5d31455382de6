package cli

import (
	"encoding/json"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/ui"
)

// appFactsManifest: web's env file composes db's address with a secret;
// web comes first in the manifest, so only the dependency orders them.
const appFactsManifest = `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    volumes:
      - {name: data, size: 1G, mount: /srv/data}
    provision:
      - envFile:
          path: /srv/data/.env
          env:
            - {name: DATABASE_URL, value: "postgres://app:${env:CORRAL_TEST_DB_PW}@${app:db.address}:5432/app"}
  - name: db
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
`

// TestAppFacts_reachContainer: one apply creates db, then web with db's
// real address in its env file (beside a secret that no output shows);
// the next plan is empty; db's new (static) address shows as a change of
// web's env file and reaches it.
func TestAppFacts_reachContainer(t *testing.T) {
	t.Parallel()
	const pw = "Db-Pa55word-91ab"
	rig := newSecretRig(t, pw, appFactsManifest)
	c, m, secrets := rig.c, rig.m, rig.secrets
	run := func(want int, args ...string) string {
		t.Helper()
		return rig.run(t, want, args...)
	}
	if out := run(ExitChanges, "plan", "-f", m); !strings.Contains(out, "reads ${app:db.address} = (known after apply)") {
		t.Errorf("plan before db exists does not say the address is known after apply:\n%s", secretsRedacted(secrets, out))
	}
	var pj struct {
		Changes []struct {
			App   string `json:"app"`
			After []string
			Facts []struct {
				Ref   string `json:"ref"`
				Known bool   `json:"known"`
			} `json:"facts"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(run(ExitChanges, "plan", "-f", m, "-o", "json")), &pj); err != nil {
		t.Fatal(err)
	}
	if w := pj.Changes[0]; w.App != "web" || len(w.Facts) != 1 || w.Facts[0].Ref != "db.address" || w.Facts[0].Known || len(w.After) != 1 || w.After[0] != "db" {
		t.Errorf("plan -o json, web's change: %+v", w)
	}
	run(0, "apply", "-f", m, "--auto-approve")

	st := c.status(m)
	webVol, dbVMID := "", 0
	for _, a := range st.Apps {
		switch a.App {
		case "web":
			webVol = a.Volumes[0].VolID
		case "db":
			dbVMID = a.Containers[0].VMID
		}
	}
	ifaces, err := c.srv.Cluster().CTInterfaces("pve", dbVMID)
	if err != nil || len(ifaces) < 2 {
		t.Fatalf("db's interfaces: %v %v", ifaces, err)
	}
	dbAddr := netip.MustParsePrefix(ifaces[1].Inet).Addr().String()
	env := func() string {
		t.Helper()
		b, err := os.ReadFile(c.file(webVol, ".env"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := env(), "DATABASE_URL=postgres://app:"+pw+"@"+dbAddr+":5432/app\n"; got != want {
		t.Errorf("web's .env holds %q, want db's address %s in it", secretsRedacted(secrets, got), dbAddr)
	}
	run(0, "plan", "-f", m) // exit 0: no change, the address read is the one applied

	// db gets a static address: web's env file changes with it.
	b, err := os.ReadFile(m)
	if err != nil {
		t.Fatal(err)
	}
	static := strings.Replace(string(b), "  - name: db\n", "  - name: db\n    network: {ip: 10.9.8.7/24, gateway: 10.9.8.1}\n", 1)
	if err := os.WriteFile(m, []byte(static), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := t.TempDir() + "/web.plan"
	out := run(ExitChanges, "plan", "-f", m, "--out", saved)
	if !strings.Contains(out, "reads ${app:db.address} = 10.9.8.7") || !strings.Contains(out, "envFile: /srv/data/.env") {
		t.Errorf("plan after db's new address does not show web's env file changing:\n%s", secretsRedacted(secrets, out))
	}
	sp, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	secrets.Check(t, "the saved plan", string(sp))
	if !strings.Contains(string(sp), `"ref": "db.address"`) || !strings.Contains(string(sp), `"value": "10.9.8.7"`) {
		t.Errorf("the saved plan does not hold the fact it read:\n%s", sp)
	}
	run(0, "apply", saved)
	if got, want := env(), "DATABASE_URL=postgres://app:"+pw+"@10.9.8.7:5432/app\n"; got != want {
		t.Errorf("web's .env after db's new address holds %q", secretsRedacted(secrets, got))
	}
	run(0, "plan", "-f", m)
}

// TestSavedPlan_factChanged: a saved plan whose guest work read another
// app's fact is refused when a plan made now reads another value (or
// none yet), naming the fact and both values.
func TestSavedPlan_factChanged(t *testing.T) {
	web := func(facts ...ui.FactJSON) ui.ChangeJSON {
		return ui.ChangeJSON{App: "web", Action: "update", Guest: true, Facts: facts, After: []string{"db"}}
	}
	was := []ui.ChangeJSON{web(ui.FactJSON{Ref: "db.address", Value: "10.0.0.5", Known: true}, ui.FactJSON{Ref: "db.vmid", Value: "101", Known: true})}
	now := []ui.ChangeJSON{web(ui.FactJSON{Ref: "db.address", Value: "10.0.0.6", Known: true}, ui.FactJSON{Ref: "db.vmid", Value: "101", Known: true})}
	if got, want := changeDiffs(was, now), []string{"app web: ${app:db.address} was 10.0.0.5 when the plan was made and is 10.0.0.6 now"}; !slices.Equal(got, want) {
		t.Errorf("changeDiffs = %q, want %q", got, want)
	}
	unknown := []ui.ChangeJSON{web(ui.FactJSON{Ref: "db.address"}, ui.FactJSON{Ref: "db.vmid", Value: "101", Known: true})}
	if got, want := changeDiffs(was, unknown), []string{"app web: ${app:db.address} was 10.0.0.5 when the plan was made and is known after apply now"}; !slices.Equal(got, want) {
		t.Errorf("changeDiffs = %q, want %q", got, want)
	}
	if got := changeDiffs(was, was); len(got) > 0 {
		t.Errorf("the same facts differ: %q", got)
	}
}

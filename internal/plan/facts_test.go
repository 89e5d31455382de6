package plan_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
)

// factsManifest's web writes db's address into its env file; db comes
// after web in the manifest, so Make must plan it first.
const factsManifest = `apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - envFile:
          path: /etc/web.env
          env:
            - name: DATABASE_URL
              value: "postgres://app:${env:DB_PW}@${app:db.address}:5432/app"
      - run: echo unchanged
  - name: db
    template: debian-12-standard_12.12-1_amd64.tar.zst
`

func factsApps(t *testing.T, dbTemplate string) []plan.App {
	t.Helper()
	src := strings.Replace(factsManifest, "  - name: db\n    template: debian-12-standard_12.12-1_amd64.tar.zst", "  - name: db\n    template: "+dbTemplate, 1)
	f, err := manifest.Parse("corral.yaml", []byte(src), manifest.LoadOptions{
		Getenv: func(name string) (string, bool) { return "s3cret-pw", name == "DB_PW" },
	})
	if err != nil {
		t.Fatal(err)
	}
	return plan.FromManifest(f)
}

// factsCT is an app's running container as apply leaves it; desc is its
// description (with the guest record), address its DHCP lease.
func factsCT(a plan.App, vmid int, desc, address string) *plan.CT {
	conf := plan.InPlaceConfig(a)
	conf["rootfs"] = "local-lvm:vm-" + strconv.Itoa(vmid) + "-disk-0,size=8G"
	conf["unprivileged"] = "1"
	if desc != "" {
		conf["description"] = desc
	}
	return &plan.CT{VMID: vmid, Node: "pve", Status: "running", Config: conf, Address: address}
}

func factsObserved(cts map[string][]*plan.CT) *plan.Observed {
	return &plan.Observed{
		Nodes: []string{"pve"}, Templates: map[string][]string{"pve": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", "local:vztmpl/alpine.tar.xz"}},
		Apps: cts, Volumes: map[string]int64{},
	}
}

func changeOf(t *testing.T, p *plan.Plan, app string) plan.Change {
	t.Helper()
	i := slices.IndexFunc(p.Changes, func(c plan.Change) bool { return c.App == app })
	if i < 0 {
		t.Fatalf("no change for %s in %+v", app, p.Changes)
	}
	return p.Changes[i]
}

// TestMake_guestFacts: a fact of an app that does not exist yet is
// known only after apply (the dependent's steps all run, after db's
// change); once db runs, the plan reads its address, and an applied
// plan is converged; a new address changes web's env file step only; a
// db to be replaced makes the address unknown again.
func TestMake_guestFacts(t *testing.T) {
	const tmplVolid = "debian-12-standard_12.12-1_amd64.tar.zst"
	apps := factsApps(t, tmplVolid)

	// Nothing exists: db's address is known after apply.
	p, err := plan.Make(slices.Clone(apps), factsObserved(nil))
	if err != nil {
		t.Fatal(err)
	}
	web := changeOf(t, p, "web")
	if web.Action != plan.Create || !web.Guest || !slices.Equal(web.After, []string{"db"}) {
		t.Errorf("web: action %v guest %v after %v, want a create with guest work after db", web.Action, web.Guest, web.After)
	}
	if got := web.Desired.FactsUnknown; !slices.Equal(got, []string{"db.address"}) {
		t.Errorf("FactsUnknown = %v, want db.address", got)
	}
	if p.Changes[0].App != "web" || p.Changes[1].App != "db" {
		t.Errorf("changes are not in manifest order: %s, %s", p.Changes[0].App, p.Changes[1].App)
	}
	// web alone cannot be applied: db's create makes the address.
	if err := plan.Target(p, factsObserved(nil), []string{"web"}); err == nil ||
		!strings.Contains(err.Error(), "app web: its provisioning reads ${app:db.address}, known only after app db's create") {
		t.Errorf("Target(web) = %v, want db's create named as needed first", err)
	}

	// db runs with a lease, web does not exist: known.
	dbCT := factsCT(apps[1], 101, "", "10.0.0.5")
	p, err = plan.Make(slices.Clone(apps), factsObserved(map[string][]*plan.CT{"db": {dbCT}}))
	if err != nil {
		t.Fatal(err)
	}
	web = changeOf(t, p, "web")
	if diff := cmp.Diff(map[string]string{"db.address": "10.0.0.5"}, web.Desired.Facts); diff != "" || len(web.Desired.FactsUnknown) > 0 {
		t.Errorf("Facts (-want +got):\n%s\nunknown %v", diff, web.Desired.FactsUnknown)
	}
	known := *web.Desired

	// web applied against that address: no change at all.
	applied := func(address string) *plan.Observed {
		desc := plan.WithGuestRecord(plan.AppDescription(known), "", known.GuestDigest, plan.StepsRecord(known.Steps))
		return factsObserved(map[string][]*plan.CT{"db": {factsCT(apps[1], 101, "", address)}, "web": {factsCT(known, 102, desc, "10.0.0.7")}})
	}
	p, err = plan.Make(slices.Clone(apps), applied("10.0.0.5"))
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Fatalf("an applied plan with the same address has changes: %+v", p.Changes)
	}

	// db got a new lease: web's env file step runs again, the other not.
	p, err = plan.Make(slices.Clone(apps), applied("10.0.0.6"))
	if err != nil {
		t.Fatal(err)
	}
	web = changeOf(t, p, "web")
	if web.Action != plan.Update || !web.Guest || web.Desired.Facts["db.address"] != "10.0.0.6" {
		t.Fatalf("web after db's new address: %v guest %v facts %v", web.Action, web.Guest, web.Desired.Facts)
	}
	var ran []string
	for i, r := range web.Steps {
		if r.Run {
			ran = append(ran, web.Desired.Steps[i].Name+": "+r.Why)
		}
	}
	if want := []string{"envFile: /etc/web.env: changed"}; !slices.Equal(ran, want) {
		t.Errorf("steps run = %q, want %q", ran, want)
	}

	// db is to be replaced (another template): its new lease is unknown.
	p, err = plan.Make(factsApps(t, "local:vztmpl/alpine.tar.xz"), applied("10.0.0.5"))
	if err != nil {
		t.Fatal(err)
	}
	if db := changeOf(t, p, "db"); db.Action != plan.Replace {
		t.Fatalf("db: %v, want replace", db.Action)
	}
	web = changeOf(t, p, "web")
	if web.Action != plan.Update || !web.Guest || !strings.Contains(web.StepsUnknown, "${app:db.address}, known after apply") ||
		!slices.Contains(web.Reasons, "provisioning reads ${app:db.address}, known only after apply") {
		t.Errorf("web while db is replaced: %v guest %v steps unknown %q reasons %q", web.Action, web.Guest, web.StepsUnknown, web.Reasons)
	}
}

package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/internal/ui"
)

// outputManifest is appManifest with a second app that is never applied.
const outputManifest = appManifest + `  - name: later
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
`

// outputGolden compares a run's stdout on c with a golden file, corral's
// key path (a temporary directory) written as $CORRAL_SSH_KEY and c's
// guest block (its own on the machine, pvetest) as block 1:
// 127.1.x.y.
func outputGolden(t *testing.T, c *cluster, name string, r result) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := strings.ReplaceAll(r.stdout, os.Getenv("CORRAL_SSH_KEY"), "$CORRAL_SSH_KEY")
	got = strings.ReplaceAll(got, fmt.Sprintf("127.%d.", c.srv.Cluster().GuestBlock()), "127.1.")
	testenv.Golden(t, "testdata/output/"+name, []byte(got))
}

// TestOutput: corral output shows each app's facts from the live cluster,
// as status observes them, in text and JSON; APP narrows it to one app.
func TestOutput(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifestIn(t, "demo", strings.ReplaceAll(appManifest, "MEMORY", "512")) // defaulted: edited in place below
	c.mustC("apply", "-f", m, "--auto-approve")
	// An app added since: output says it has no container yet.
	if err := os.WriteFile(m, []byte(strings.ReplaceAll(outputManifest, "MEMORY", "512")), 0o644); err != nil {
		t.Fatal(err)
	}

	outputGolden(t, c, "all.txt", c.runC("output", "-f", m))
	outputGolden(t, c, "all.json", c.runC("output", "-f", m, "-o", "json"))
	outputGolden(t, c, "notes.txt", c.runC("output", "notes", "-f", m))

	var doc struct {
		Apps []ui.AppOutput `json:"apps"`
	}
	r := c.runC("output", "notes", "-f", m, "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Apps) != 1 {
		t.Fatalf("output notes -o json: %v\n%s", err, r.stdout)
	}
	st := c.status(m)
	got, want := doc.Apps[0], st.Apps[0]
	if got.VMID != want.Containers[0].VMID || got.Address != want.Containers[0].IP || got.Address == "" ||
		len(got.Volumes) != len(want.Volumes) || got.Volumes[0].VolID != want.Volumes[0].VolID {
		t.Errorf("output and status disagree:\noutput %+v\nstatus %+v", got, want)
	}
	if !strings.HasSuffix(got.SSH, " root@"+got.Address) {
		t.Errorf("ssh command %q does not log into %s", got.SSH, got.Address)
	}
}

// TestOutput_unknownApp: an app the manifest lacks is refused before
// the cluster is read, naming the apps there are.
func TestOutput_unknownApp(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, strings.ReplaceAll(outputManifest, "MEMORY", "512"))
	r := c.runC("output", "nope", "-f", m)
	if want := `app "nope" is not in ` + m + `: name one of notes, later, or leave APP out for every app`; r.code != ExitError || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
	}
}

// TestOutput_named: the manifest's outputs follow the apps, their
// ${app:…} facts read from the cluster and their secrets shown as
// references; a fact an app lacks says why.
func TestOutput_named(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const pw = "Out-Pa55word-91d2"
	ownEnv(t, "CORRAL_TEST_OUT_PW", pw)
	m := writeManifestIn(t, "demo", strings.ReplaceAll(appManifest, "MEMORY", "512")) // defaulted: edited in place below
	c.mustC("apply", "-f", m, "--auto-approve")
	named := strings.ReplaceAll(outputManifest, "MEMORY", "512") + `outputs:
  - name: notes_url
    value: "http://${app:notes.address}:8080/ (ct ${app:notes.vmid} on ${app:notes.node})"
  - name: db_url
    value: "postgres://app:${env:CORRAL_TEST_OUT_PW}@${app:notes.address}:5432/app"
  - name: later_ssh
    value: "${app:later.ssh}"
`
	if err := os.WriteFile(m, []byte(named), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, form := range []struct{ golden, flag string }{{"named.txt", "text"}, {"named.json", "json"}} {
		r := c.runC("output", "-f", m, "-o", form.flag)
		if strings.Contains(r.stdout+r.stderr, pw) {
			t.Fatalf("output -o %s shows the password", form.flag)
		}
		outputGolden(t, c, form.golden, r)
	}
	if r := c.runC("output", "notes", "-f", m); strings.Contains(r.stdout, "outputs") {
		t.Errorf("output APP shows the manifest's outputs:\n%s", r.stdout)
	}
}

package manifest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/manifest"
)

const outputsManifest = `apps:
  - name: db
    template: debian-12-standard_12.12-1_amd64.tar.zst
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
outputs:
  - name: db_url
    value: "postgres://app:${env:ROOT_PW}@${app:db.address}:5432/app"
  - name: web
    value: "http://${app:web.address}:8080/ (ct ${app:web.vmid} on ${app:web.node})"
  - name: literal
    value: "$${app:db.address} and $${HOME} stay as written"
`

// TestParse_outputs: outputs keep ${app:APP.FACT} for corral output, read
// ${env:…} at load time, and keep $${ a literal ${ through both steps.
func TestParse_outputs(t *testing.T) {
	f, err := manifest.Parse("corral.yaml", []byte(outputsManifest), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	facts := map[string]string{"db.address": "10.0.0.5", "web.address": "10.0.0.6", "web.vmid": "101", "web.node": "pve"}
	fact := func(app, name string) (string, error) {
		if v, ok := facts[app+"."+name]; ok {
			return v, nil
		}
		return "", errors.New("not created")
	}
	var got []string
	for _, o := range f.Outputs {
		v, err := manifest.ExpandOutput(o.Value, fact)
		if err != nil {
			t.Fatalf("%s: %v", o.Name, err)
		}
		got = append(got, o.Name+"="+v)
	}
	want := []string{
		"db_url=postgres://app:" + envRootPW + "@10.0.0.5:5432/app",
		"web=http://10.0.0.6:8080/ (ct 101 on pve)",
		"literal=${app:db.address} and ${HOME} stay as written",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	if red := f.Redact(got[0]); strings.Contains(red, envRootPW) || !strings.Contains(red, "${env:ROOT_PW}") {
		t.Errorf("Redact(db_url) = %q: the password must show as its reference", red)
	}
	if _, err := manifest.ExpandOutput(strings.Replace(f.Outputs[0].Value, "db.address", "db.node", 1), fact); err == nil ||
		err.Error() != "${app:db.node}: not created" {
		t.Errorf("a fact that cannot be read: %v", err)
	}
}

func TestParse_outputsProblems(t *testing.T) {
	tests := []struct{ name, outputs, want string }{
		{"unknown app", `[{name: a, value: "${app:nope.address}"}]`, "outputs[0].value: ${app:nope.…} names no app of this manifest"},
		{"unknown fact", `[{name: a, value: "${app:db.password}"}]`, "outputs[0].value: invalid reference to an app's fact: write ${app:APP.FACT} with FACT one of address, vmid, node, status, ssh, health"},
		{"duplicate name", `[{name: a, value: x}, {name: a, value: y}]`, "outputs[1].name: duplicate output name (first at line"},
		{"bad name", `[{name: A-b, value: x}]`, "outputs[0].name: invalid value"},
		{"app reference outside outputs", `[]`, "apps[0].description: invalid reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.SplitAfter(outputsManifest, "outputs:")[0] + " " + tt.outputs + "\n"
			if tt.name == "app reference outside outputs" {
				src = strings.Replace(src, "  - name: db\n", "  - name: db\n    description: \"${app:web.address}\"\n", 1)
			}
			_, err := manifest.Parse("corral.yaml", []byte(src), testOptions())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse: %v\nwant %q", err, tt.want)
			}
		})
	}
}

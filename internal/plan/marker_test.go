package plan

import "testing"

// ParseMarker reads every marker line into its own field, the last of two
// lines with one marker wins, and a line a user wrote without the corral-
// prefix fills nothing: the table of markers in ParseMarker must name
// each field once and no field twice.
func TestParseMarker_readsEveryField(t *testing.T) {
	desc := "managed by corral\n" +
		"corral-app: web\n" +
		"corral-template: local:vztmpl/a.tar.zst\n" +
		"corral-hostkey: ssh-ed25519 AAAA\n" +
		"corral-provisioned: sha256:1\n" +
		"corral-steps: a=1 b=2\n" +
		"corral-declared: git@x:y.git\n" +
		"corral-copy-of: api\n" +
		"corral-stopped: 2/3 b the step failed\n" +
		"corral-app:  web2 \n" +
		"app: not-a-marker\n"
	m := ParseMarker(desc)
	want := map[string][2]string{
		"App":         {m.App, "web2"},
		"Template":    {m.Template, "local:vztmpl/a.tar.zst"},
		"HostKey":     {m.HostKey, "ssh-ed25519 AAAA"},
		"Provisioned": {m.Provisioned, "sha256:1"},
		"Steps":       {m.Steps, "a=1 b=2"},
		"Declared":    {m.Declared, "git@x:y.git"},
		"CopyOf":      {m.CopyOf, "api"},
	}
	for name, gw := range want {
		if gw[0] != gw[1] {
			t.Errorf("%s = %q, want %q", name, gw[0], gw[1])
		}
	}
	if s := m.Stopped; s == nil || s.N != 2 || s.Total != 3 || s.ID != "b" || s.Why != "the step failed" {
		t.Errorf("Stopped = %+v, want 2/3 b the step failed", s)
	}
	if m.stoppedRaw != "2/3 b the step failed" {
		t.Errorf("stoppedRaw = %q", m.stoppedRaw)
	}
}

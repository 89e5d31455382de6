package model

import (
	"encoding/json"
	"testing"
)

// A CT's status is written byte for byte as json.Marshal writes its
// Fields (and with "ha" as status/current adds it), for every optional
// member.
func TestCTStatusJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	base := CTStatus{VMID: 101, Node: "pve", Name: "web", Status: "stopped", CPUs: 1, MaxMem: 512 * mib, MaxDisk: 8 * gib}
	running := base
	running.Status, running.PID, running.Uptime, running.Mem, running.Disk, running.CPU = "running", 100042, 73, 32*mib, 123456, 0.25
	for name, s := range map[string]CTStatus{
		"stopped":              base,
		"running":              running,
		"running, PVE 9":       func() CTStatus { s := running; s.Pressure = true; return s }(),
		"lock, tags, template": func() CTStatus { s := base; s.Lock, s.Tags, s.Template = "backup", "corral;web", true; return s }(),
		"fractional cpus":      func() CTStatus { s := base; s.CPUs, s.MaxSwap = 1.5, 512*mib; return s }(),
		"escaped name":         func() CTStatus { s := base; s.Name = `a"<b>&` + "\u00e9"; return s }(),
	} {
		want, _ := json.Marshal(s.Fields())
		got, _ := json.Marshal(s)
		if string(got) != string(want) {
			t.Errorf("%s:\ngot  %s\nwant %s", name, got, want)
		}
		m := s.Fields()
		m["ha"] = map[string]int{"managed": 0}
		want, _ = json.Marshal(m)
		got, _ = json.Marshal(CTStatusCurrent(s))
		if string(got) != string(want) {
			t.Errorf("%s, status/current:\ngot  %s\nwant %s", name, got, want)
		}
		want, _ = json.Marshal([]map[string]any{s.Fields(), s.Fields()})
		got, _ = json.Marshal(CTStatusList{s, s})
		if string(got) != string(want) {
			t.Errorf("%s, list:\ngot  %s\nwant %s", name, got, want)
		}
	}
}

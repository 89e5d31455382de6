package model

import "testing"

// TestHAResourceParams_addAndUpdateCheckAlike: POST and PUT
// /cluster/ha/resources refuse the same bad sid, type and group with
// the same message (Resources.pm parses the sid, checks the type and
// the group before either write), on 9.1 and 8.4.
func TestHAResourceParams_addAndUpdateCheckAlike(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version string
		params  map[string]string
		msg     string
	}{
		{"9.1", map[string]string{"sid": "ct:abc"}, "unable to parse service id 'ct:abc'\n"},
		{"9.1", map[string]string{"sid": "ct:99"}, "unable to parse service id 'ct:99'\n"},
		{"9.1", map[string]string{"sid": "555"}, "unable to find VM/CT with ID '555'\n"},
		{"9.1", map[string]string{"sid": "ct:101", "type": "vm"}, "types does not match\n"},
		{"9.1", map[string]string{"sid": "ct:101", "group": "g1"}, "invalid parameter 'group': ha groups have been migrated to rules\n"},
		{"8.4", map[string]string{"sid": "ct:101", "group": "g1"}, "HA group 'g1' does not exist\n"},
	} {
		k := newOpsKitWith(t, Options{Version: tc.version})
		k.ct("pve", 101, nil)
		if err := k.c.AddHAResource(tc.params); PerlText(err) != tc.msg {
			t.Errorf("%s add %v: %v, want %q", tc.version, tc.params, err, tc.msg)
		}
		if err := k.c.UpdateHAResource(tc.params, nil, ""); PerlText(err) != tc.msg {
			t.Errorf("%s update %v: %v, want %q", tc.version, tc.params, err, tc.msg)
		}
	}
}

// TestHAResourceParams_vmThatIsNot: a vm: sid whose VMID is no VM (here
// a CT's) parses; POST refuses it as a resource the cluster lacks, PUT
// as one HA does not manage (update_resources_config).
func TestHAResourceParams_vmThatIsNot(t *testing.T) {
	t.Parallel()
	k := newOpsKitWith(t, Options{Version: "9.1"})
	k.ct("pve", 101, nil)
	params := map[string]string{"sid": "vm:101"}
	if err := k.c.AddHAResource(params); PerlText(err) != "resource 'vm:101' does not exist in cluster\n" {
		t.Errorf("add vm:101: %v", err)
	}
	if err := k.c.UpdateHAResource(params, nil, ""); PerlText(err) != "update resources config failed: service 'vm:101' is not HA managed\n" {
		t.Errorf("update vm:101: %v", err)
	}
}

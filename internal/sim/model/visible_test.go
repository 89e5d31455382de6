package model

import (
	"fmt"
	"testing"
)

// TestVisible: the batch filter answers exactly what HasPriv and
// HasAnyPriv answer path by path, under an ACL with entries on single
// guests, groups, a privsep token, NoAccess and non-propagating grants.
func TestVisible(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	k.c.mu.Lock()
	a := k.c.st.Access
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.AddGroup("ops", ""))
	must(a.AddUser("alice@pve", "", UserOptions{Groups: []string{"ops"}}))
	_, err := a.AddToken("alice@pve", "ci", true)
	must(err)
	must(a.SetACL("/vms", []string{"PVEAuditor"}, nil, []string{"ops"}, nil, true, false))
	must(a.SetACL("/vms/105", []string{"PVEVMAdmin"}, []string{"alice@pve"}, nil, []string{"alice@pve!ci"}, true, false))
	must(a.SetACL("/vms/106", []string{"NoAccess"}, []string{"alice@pve"}, nil, nil, true, false))
	must(a.SetACL("/vms", []string{"PVEVMUser"}, nil, nil, []string{"alice@pve!ci"}, false, false))
	must(a.SetACL("/storage/local", []string{"PVEDatastoreUser"}, []string{"alice@pve"}, nil, []string{"alice@pve!ci"}, true, false))
	k.c.markCore()
	k.c.mu.Unlock()

	paths := []string{"/", "/vms", "/vms/", "/storage", "/storage/local", "/storage/local-lvm", "/nodes/pve", "/sdn/zones/localnetwork"}
	for vmid := 100; vmid < 110; vmid++ {
		paths = append(paths, fmt.Sprintf("/vms/%d", vmid))
	}
	for _, auth := range []Auth{
		kitRoot, kitOperator, kitNobody,
		{UserID: "alice@pve"},
		{UserID: "alice@pve", TokenID: "alice@pve!ci"},
	} {
		for _, priv := range []string{"", "VM.Audit", "VM.PowerMgmt", "Datastore.Audit"} {
			got := k.c.Visible(auth, paths, priv)
			for i, p := range paths {
				want := k.c.HasAnyPriv(auth, p)
				if priv != "" {
					want = k.c.HasPriv(auth, p, priv)
				}
				if got[i] != want {
					t.Errorf("%s %q on %s: Visible %v, path by path %v", auth.ID(), priv, p, got[i], want)
				}
			}
		}
	}
}

package ui_test

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/ui"
)

// The summary counts missing privileges; a warning about a grant held
// only on /vms/<vmid> names a privilege that is held, so it does not
// count.
func TestWriteDoctor_missingCount(t *testing.T) {
	reqs := []doctor.Requirement{
		{Path: "/vms/105", Priv: "VM.Allocate", Operation: "create web", Why: "w", App: "web"},
		{Path: "/storage/local-lvm", Priv: "Datastore.AllocateSpace", Operation: "allocate web's rootfs", Why: "w", App: "web"},
	}
	acc := doctor.Access{TokenID: "a@pve!t", Token: doctor.Perms{"/vms/105": {"VM.Allocate": 1}, "/vms": {}}}
	fs := doctor.Evaluate(reqs, acc)
	if len(fs) != 2 {
		t.Fatalf("want one error and one warning, got %+v", fs)
	}
	var b strings.Builder
	ui.WriteDoctor(&b, &doctor.Report{TokenID: acc.TokenID, Requirements: reqs, Findings: fs})
	if want := "privileges: 2 checks on 2 paths, 1 missing\n"; !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
}

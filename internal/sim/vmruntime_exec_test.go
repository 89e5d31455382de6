package sim

import (
	"encoding/json"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// TestParseExecStatus: qemu-ga's guest-exec-status answer becomes the
// status PVE reports: out-data and err-data decoded from base64, the
// fields qemu-ga leaves out left unset.
func TestParseExecStatus(t *testing.T) {
	one, nine := 1, 9
	for _, tc := range []struct {
		raw  string
		want model.GuestExecStatus
	}{
		{`{"exited":false}`, model.GuestExecStatus{}},
		{`{"exited":true,"exitcode":1,"out-data":"aGVsbG8K","err-data":"b29wcwo=","out-truncated":true}`,
			model.GuestExecStatus{Exited: true, ExitCode: &one, Out: []byte("hello\n"), Err: []byte("oops\n"), OutTrunc: true}},
		{`{"exited":true,"signal":9}`, model.GuestExecStatus{Exited: true, Signal: &nine}},
	} {
		got, err := parseExecStatus(json.RawMessage(tc.raw))
		if err != nil {
			t.Fatal(err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(tc.want)
		if string(g) != string(w) {
			t.Errorf("%s: %s, want %s", tc.raw, g, w)
		}
	}
}

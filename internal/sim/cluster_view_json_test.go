package sim

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// A resource list is written byte for byte as the generic envelope path
// writes it.
func TestResourceListEnvelopeMatchesGeneric(t *testing.T) {
	t.Parallel()
	l := model.ResourceList{
		{ID: "lxc/101", Type: "lxc", Node: "pve", Status: "running", VMID: 101, Name: "web", Tags: "corral", CPU: 0.25, MaxCPU: 1, MaxMem: 1 << 29},
		{ID: "node/pve", Type: "node", Node: "pve", Status: "online", MaxCPU: 2},
	}
	fast := httptest.NewRecorder()
	writeData(fast, l)
	want, err := json.Marshal(envelope{Data: l})
	if err != nil {
		t.Fatal(err)
	}
	if fast.Body.String() != string(want) {
		t.Errorf("got  %s\nwant %s", fast.Body.String(), want)
	}
	empty := httptest.NewRecorder()
	writeData(empty, model.ResourceList{})
	if empty.Body.String() != `{"data":[]}` {
		t.Errorf("empty list: %s", empty.Body.String())
	}
}

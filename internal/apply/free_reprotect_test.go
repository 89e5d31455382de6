package apply_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
)

// protectWrites counts a run's keeper config writes that set the
// protection again, and fails the one that also deletes a volume (the
// free's last write) when refuse is set, as a PVE that answers it with
// an error would.
type protectWrites struct {
	base   http.RoundTripper
	refuse bool

	mu      sync.Mutex
	alone   int // protection=1 writes without a delete (reprotect's own)
	withDel int // protection=1 writes that delete unusedN
}

func (p *protectWrites) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		if form.Get("protection") == "1" {
			del := strings.Contains(form.Get("delete"), "unused")
			p.mu.Lock()
			if del {
				p.withDel++
			} else {
				p.alone++
			}
			p.mu.Unlock()
			if del && p.refuse {
				return nil, errors.New("refused by the test")
			}
		}
	}
	return p.base.RoundTrip(r)
}

// TestFreeSetsProtectionInItsLastWrite: freeing a keeper's volumes sets
// its protection again in the write that deletes them, with no write of
// its own after it (issue 30: a read and a write less per free); when
// that write fails, the keeper is still protected again by a write of
// its own.
func TestFreeSetsProtectionInItsLastWrite(t *testing.T) {
	t.Parallel()
	base := newRig(t)
	if _, err := base.run(cycle[0], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := base.run(phase{name: "destroy", memory: "512", template: debian12, destroy: true}, 0); err != nil {
		t.Fatal(err)
	}
	frozen := base.freeze()
	for _, tc := range []struct {
		refuse         bool
		alone, withDel int
	}{
		{false, 0, 1},
		{true, 1, 1},
	} {
		r := thaw(t, frozen)
		pw := &protectWrites{base: r.srv.HTTPClient().Transport, refuse: tc.refuse}
		c := pvetest.Client(t, r.srv, r.srv.Credentials().OperatorToken, pvetest.Transport(pw), fastRetry)
		obs := r.observe()
		var volid string
		for _, v := range records(obs) {
			volid = v
			break
		}
		p, err := plan.FreeVolumes("apply", nil, obs, []string{volid}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = (&apply.Executor{Client: c}).FreeVolumes(t.Context(), p, obs)
		if (err != nil) != tc.refuse {
			t.Fatalf("refuse %v: free of %s: %v", tc.refuse, volid, err)
		}
		if pw.alone != tc.alone || pw.withDel != tc.withDel {
			t.Errorf("refuse %v: %d reprotect writes of their own and %d with the deletes, want %d and %d", tc.refuse, pw.alone, pw.withDel, tc.alone, tc.withDel)
		}
		if k := r.observe().Keepers["pve"][0]; !k.Protected {
			t.Errorf("refuse %v: keeper %d is not protected after the free", tc.refuse, k.VMID)
		}
	}
}

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
	"github.com/corralhq/corral/internal/sim/model"
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

// keeperPuts counts a run's config writes and those PVE refused.
type keeperPuts struct {
	base http.RoundTripper

	mu            sync.Mutex
	puts, refused int
}

func (k *keeperPuts) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := k.base.RoundTrip(r)
	if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/config") {
		k.mu.Lock()
		k.puts++
		if err == nil && resp.StatusCode >= 400 {
			k.refused++
		}
		k.mu.Unlock()
	}
	return resp, err
}

// TestSeededKeeperWriteStartsAgainWhenTheKeeperChanged: the lease's write
// starts from the observation's read of the keeper and its digest
// (issue 30); when the keeper changed after that read (here its
// protection cleared by hand), PVE refuses that write, and the lock is
// taken from a fresh read without undoing the change. With the keeper
// unchanged the first write is taken.
func TestSeededKeeperWriteStartsAgainWhenTheKeeperChanged(t *testing.T) {
	t.Parallel()
	base := newRig(t)
	if _, err := base.run(cycle[0], 0); err != nil {
		t.Fatal(err)
	}
	frozen := base.freeze()
	for _, changed := range []bool{false, true} {
		r := thaw(t, frozen)
		obs := r.observe()
		vmid := obs.Keepers["pve"][0].VMID
		if changed {
			if err := r.srv.Cluster().UpdateCTConfig(model.Auth{UserID: "root@pam"}, "pve", vmid, map[string]string{"protection": "0"}); err != nil {
				t.Fatal(err)
			}
		}
		kp := &keeperPuts{base: r.srv.HTTPClient().Transport}
		c := pvetest.Client(t, r.srv, r.srv.Credentials().OperatorToken, pvetest.Transport(kp), fastRetry)
		l, err := (&apply.Executor{Client: c}).Lock(t.Context(), obs, []string{"pve"}, apply.LockOptions{Command: "test"})
		if err != nil {
			t.Fatalf("changed %v: lock: %v", changed, err)
		}
		after := r.observe().Keepers["pve"][0]
		l.Release()
		wantRefused := 0
		if changed {
			wantRefused = 1
		}
		// The lease's write(s) and the release's.
		if kp.puts != 2+wantRefused || kp.refused != wantRefused {
			t.Errorf("changed %v: %d config writes, %d refused; want %d and %d", changed, kp.puts, kp.refused, 2+wantRefused, wantRefused)
		}
		if after.Lease == nil {
			t.Errorf("changed %v: no lease in keeper %d after the lock", changed, vmid)
		}
		if after.Protected == changed {
			t.Errorf("changed %v: keeper %d protected %v after the lease's write", changed, vmid, after.Protected)
		}
	}
}

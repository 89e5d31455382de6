package apply_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
)

// leaseEndManifest is one app whose volume a destroy --delete-volumes
// frees.
const leaseEndManifest = `apps:
  - name: db
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 512
    volumes:
      - name: data
        size: 1G
        mount: /var/lib/db
        reclaim: delete
`

// countingTransport counts the requests sent through it.
type countingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	n    int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.base.RoundTrip(r)
}

func (c *countingTransport) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestDestroysLastFreeEndsTheLease: a destroy --delete-volumes under the
// lock (EndLeaseInLastWrite) releases the lease in its last write, the
// free's, so the lock's release reads and writes nothing after it (issue
// 30: a keeper read and write less), and the lock is not taken for
// broken by its renewals meanwhile. When that write fails, the lease is
// still there after the destroy, and the release takes it out.
func TestDestroysLastFreeEndsTheLease(t *testing.T) {
	t.Parallel()
	for _, refuse := range []bool{false, true} {
		srv := pvetest.Start(t).Server
		apps := loadAppsText(t, leaseEndManifest)
		c := pvetest.Client(t, srv, srv.Credentials().OperatorToken)
		obs, err := apply.Observe(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Make(apps, obs)
		if err != nil {
			t.Fatal(err)
		}
		if err := (&apply.Executor{Client: c}).Apply(t.Context(), p, obs); err != nil {
			t.Fatal(err)
		}
		pw := &protectWrites{base: srv.HTTPClient().Transport, refuse: refuse}
		ct := &countingTransport{base: pw}
		c = pvetest.Client(t, srv, srv.Credentials().OperatorToken, pvetest.Transport(ct), fastRetry)
		if obs, err = apply.Observe(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		keeper := obs.Keepers["pve"][0].VMID
		ex := &apply.Executor{Client: c}
		// Renewed every second: the wait below sees renewals run after
		// the lease was released.
		ttl := 3 * time.Second
		l, err := ex.Lock(t.Context(), obs, []string{"pve"}, apply.LockOptions{Command: "destroy", TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		if p, err = plan.Destroy(apps, obs, true); err != nil {
			t.Fatal(err)
		}
		freed, err := ex.Destroy(apply.EndLeaseInLastWrite(t.Context(), l), p, obs)
		if (err != nil) != refuse || (len(freed) == 1) == refuse {
			t.Fatalf("refuse %v: destroy freed %v: %v", refuse, freed, err)
		}
		if got := leaseIn(t, srv, keeper); (got == nil) == refuse {
			t.Errorf("refuse %v: lease after the destroy %+v", refuse, got)
		}
		select {
		case <-l.Lost():
			t.Fatalf("refuse %v: lock lost after the destroy: %v", refuse, l.Err())
		case <-time.After(ttl / 2):
		}
		before := ct.count()
		l.Release()
		if got := leaseIn(t, srv, keeper); got != nil {
			t.Errorf("refuse %v: lease after the release %+v", refuse, got)
		}
		// Released already: nothing to read or write; else a read and a write.
		want := 0
		if refuse {
			want = 2
		}
		if n := ct.count() - before; n != want {
			t.Errorf("refuse %v: the release made %d requests, want %d", refuse, n, want)
		}
	}
}

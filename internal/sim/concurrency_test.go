package sim

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentCreates: several clients each ask /cluster/nextid and
// create with the answer, as PVE clients do. nextid reserves nothing (as
// in PVE), so two may be told the same id; the create lock lets exactly
// one win and the other gets PVE's "already exists" (from
// check_vmid_unused, or with "unable to create CT <vmid> - " from
// create_and_lock_config when it lost the race later) and tries again. No
// VMID is ever handed to two CTs. Run with -race.
func TestConcurrentCreates(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	const workers, each = 6, 4
	var (
		mu       sync.Mutex
		created  = map[int]int{} // vmid -> worker
		upids    = map[int]string{}
		clashes  int
		problems []string
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < each; {
				var id json1
				r := k.do(k.op(), http.MethodGet, "/cluster/nextid", nil)
				if r.status != 200 {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("nextid: %d %q", r.status, r.msg))
					mu.Unlock()
					return
				}
				id.parse(r.data)
				vmid := id.int()
				p := url.Values{"vmid": {strconv.Itoa(vmid)}, "ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"},
					"rootfs": {"local-lvm:1"}, "unprivileged": {"1"}}
				r = k.do(k.op(), http.MethodPost, "/nodes/pve/lxc", p)
				mu.Lock()
				switch {
				case r.status == 200:
					if prev, dup := created[vmid]; dup {
						problems = append(problems, fmt.Sprintf("vmid %d created by workers %d and %d", vmid, prev, w))
					}
					created[vmid] = w
					upids[vmid] = strings.Trim(string(r.data), `"`)
					n++
				case r.status == 500 && r.msg == fmt.Sprintf("CT %d already exists on node 'pve'\n", vmid),
					// lost the race after check_vmid_unused: create_and_lock_config's error with $emsg
					r.status == 500 && r.msg == fmt.Sprintf("unable to create CT %d - CT %d already exists on node 'pve'\n", vmid, vmid):
					clashes++
				default:
					problems = append(problems, fmt.Sprintf("create %d: %d %q %v", vmid, r.status, r.msg, r.errs))
					n = each
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	if len(created) != workers*each {
		t.Fatalf("%d CTs created, want %d", len(created), workers*each)
	}
	t.Logf("%d creates, %d clashes on a vmid nextid had offered twice", len(created), clashes)

	var list []struct {
		VMID int `json:"vmid"`
	}
	k.ok(k.op(), http.MethodGet, "/nodes/pve/lxc", nil, &list)
	seen := map[int]bool{}
	for _, ct := range list {
		if seen[ct.VMID] {
			t.Errorf("vmid %d listed twice", ct.VMID)
		}
		seen[ct.VMID] = true
	}
	for vmid := range created {
		if !seen[vmid] {
			t.Errorf("created CT %d not listed", vmid)
		}
	}
	var ids []int
	for vmid := range created {
		ids = append(ids, vmid)
	}
	// Every rootfs is its own volume (once the create tasks are done:
	// until then a config holds only "lock: create").
	vols := map[string]int{}
	for vmid := range created {
		k.wait(k.op(), upids[vmid])
		conf := k.config(strconv.Itoa(vmid), false)
		vols[fmt.Sprint(conf["rootfs"])]++
	}
	for v, n := range vols {
		if n > 1 {
			t.Errorf("rootfs %s used by %d CTs", v, n)
		}
	}
	// A taken vmid is refused by nextid as PVE does.
	for vmid := range created {
		r := k.do(k.op(), http.MethodGet, "/cluster/nextid", url.Values{"vmid": {strconv.Itoa(vmid)}})
		if r.status != 400 || r.errs["vmid"] != fmt.Sprintf("VM %d already exists", vmid) {
			t.Errorf("nextid vmid=%d: %d %q %v", vmid, r.status, r.msg, r.errs)
		}
		break
	}

	// Parallel config writes to one CT and to several all land (PUT
	// config is synchronous and serialized per CT).
	shared := strconv.Itoa(ids[0])
	var wg2 sync.WaitGroup
	errs := make(chan string, 100)
	for w := range workers {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			own := strconv.Itoa(ids[1+w])
			for i := range 5 {
				for _, c := range []struct{ vmid, key, val string }{
					{shared, "description", fmt.Sprintf("w%d-%d", w, i)},
					{own, "cores", strconv.Itoa(1 + i%4)},
					{own, "mp" + strconv.Itoa(i), "local-lvm:1,mp=/d" + strconv.Itoa(i)},
				} {
					r := k.do(k.op(), http.MethodPut, "/nodes/pve/lxc/"+c.vmid+"/config", url.Values{c.key: {c.val}})
					if r.status != 200 {
						errs <- fmt.Sprintf("PUT %s %s=%s: %d %q %v", c.vmid, c.key, c.val, r.status, r.msg, r.errs)
					}
				}
			}
		}()
	}
	wg2.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for w := range workers {
		conf := k.config(strconv.Itoa(ids[1+w]), false)
		for i := range 5 {
			want := fmt.Sprintf("local-lvm:vm-%d-disk-%d,mp=/d%d,size=1G", ids[1+w], i+1, i)
			if conf["mp"+strconv.Itoa(i)] != want {
				t.Errorf("CT %d mp%d = %v, want %s", ids[1+w], i, conf["mp"+strconv.Itoa(i)], want)
			}
		}
	}
}

// json1 decodes nextid's answer, which PVE sends as a string or number.
type json1 struct{ v any }

func (j *json1) parse(raw []byte) { _ = jsonUnmarshal(raw, &j.v) }
func (j *json1) int() int {
	switch x := j.v.(type) {
	case string:
		n, _ := strconv.Atoi(x)
		return n
	case float64:
		return int(x)
	}
	return 0
}

package guest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	client "github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// api drives a sim.Server over its PVE API as corral does, with the
// root token.
type api struct {
	t     *testing.T
	s     *sim.Server
	hc    *http.Client
	token string
}

func (a *api) do(method, path string, form url.Values) json.RawMessage {
	a.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, a.s.URL()+"/api2/json"+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "PVEAPIToken="+a.token)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		a.t.Fatalf("%s %s: %s %s", method, path, resp.Status, raw)
	}
	var env struct{ Data json.RawMessage }
	if err := json.Unmarshal(raw, &env); err != nil {
		a.t.Fatal(err)
	}
	return env.Data
}

// task runs a task-returning call and waits until it ends OK.
func (a *api) task(method, path string, form url.Values) {
	a.t.Helper()
	if _, status := a.taskWait(method, path, form); status != "OK" {
		a.t.Fatalf("%s %s: task ended %q", method, path, status)
	}
}

// taskWait runs a task-returning call and waits for the task's end; it
// returns the task's UPID and exit status (task and taskEnd share it).
func (a *api) taskWait(method, path string, form url.Values) (upid, status string) {
	a.t.Helper()
	if err := json.Unmarshal(a.do(method, path, form), &upid); err != nil {
		a.t.Fatal(err)
	}
	var st struct{ Status, Exitstatus string }
	testenv.WaitFor(a.t, method+" "+path+": the task's end", func() bool {
		json.Unmarshal(a.do("GET", "/nodes/pve/tasks/"+url.PathEscape(upid)+"/status", nil), &st)
		return st.Status == "stopped"
	})
	return upid, st.Exitstatus
}

// endpoint is the CT's SSH address as corral would find it: eth0's
// address from GET .../interfaces, and the port from the env file.
func (a *api) endpoint(vmid int) string {
	a.t.Helper()
	var ifs []struct{ Name, Inet string }
	json.Unmarshal(a.do("GET", "/nodes/pve/lxc/"+strconv.Itoa(vmid)+"/interfaces", nil), &ifs)
	// The port a served emulator's env file exports; this one serves no
	// API port, so its env file has none to give.
	port := strconv.Itoa(a.s.Guests().Port())
	for _, ifc := range ifs {
		if ifc.Name == "eth0" && port != "" {
			ip, _, _ := strings.Cut(ifc.Inet, "/")
			return net.JoinHostPort(ip, port)
		}
	}
	a.t.Fatalf("no endpoint: interfaces %+v, port %q", ifs, port)
	return ""
}

func TestServer_guestOverTheAPI(t *testing.T) {
	t.Parallel()
	zero := 0.0
	s, err := sim.New(sim.Options{Dir: t.TempDir(), Listener: sim.ListenNone, TimeScale: &zero, GuestSSHPort: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := &api{t: t, s: s, hc: s.HTTPClient(), token: s.Credentials().RootToken}
	signer, pub, err := client.NewKey("corral")
	if err != nil {
		t.Fatal(err)
	}
	// The retained volume belongs to a placeholder VMID, so destroying
	// the workload leaves it.
	var vol string
	json.Unmarshal(a.do("POST", "/nodes/pve/storage/local-lvm/content", url.Values{"vmid": {"900"}, "filename": {"vm-900-disk-0"}, "size": {"1G"}}), &vol)
	giveToCTRoot(t, s.Cluster(), vol)
	create := url.Values{
		"vmid": {"120"}, "ostemplate": {model.DefaultTemplate}, "rootfs": {"local-lvm:1"}, "hostname": {"hermes"},
		"net0": {"name=eth0,bridge=vmbr0,ip=dhcp"}, "features": {"nesting=1"}, "ssh-public-keys": {pub},
		"mp0": {vol + ",mp=/home/hermes"}, "start": {"1"},
	}
	a.task("POST", "/nodes/pve/lxc", create)

	dial := func(policy client.HostKeyPolicy) (*client.Client, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		policy.VMID = 120
		return client.Dial(ctx, a.endpoint(120), client.Config{User: "root", Signer: signer, HostKey: policy, RetryMin: 10 * time.Millisecond})
	}
	c, err := dial(client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pinned := client.AuthorizedKey(c.HostKey())
	testenv.NeedGuestExec(t, s.Guests().ExecUnavailable())
	out, err := run(t, c, "echo x > /root/x; echo y > /home/hermes/y; echo hi; exit 3")
	var ee *client.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || out != "stdout: hi" {
		t.Fatalf("err = %v, output %q; want hi and exit status 3", err, out)
	}
	c.Close()

	a.task("POST", "/nodes/pve/lxc/120/status/stop", url.Values{})
	a.task("DELETE", "/nodes/pve/lxc/120", nil)
	a.task("POST", "/nodes/pve/lxc", create)

	if _, err := dial(client.HostKeyPolicy{Pinned: pinned}); err == nil || !strings.Contains(err.Error(), "CT 120 presents SSH host key") {
		t.Fatalf("pinned dial to the recreated CT: %v", err)
	}
	c, err = dial(client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err = run(t, c, "cat /home/hermes/y; ls /root/x 2>/dev/null; true")
	if err != nil || out != "stdout: y" {
		t.Fatalf("after recreate: %v, output %q; want y from the volume and no /root/x", err, out)
	}
}

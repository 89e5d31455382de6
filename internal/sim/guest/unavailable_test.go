package guest

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	client "github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/sim/model"
)

// Where the machine allows no mount namespace, a command fails with 126
// and says why, instead of running outside the CT's view.
func TestExec_unavailable(t *testing.T) {
	t.Parallel()
	c, err := model.Open(model.Options{Dir: t.TempDir(), HasTimeScale: true, TimeScale: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	m, err := Start(c, Options{Port: port, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.sbOnce.Do(func() { m.sb = sandbox{err: errors.New("user namespaces are disabled")} })
	signer, pub, err := client.NewKey("")
	if err != nil {
		t.Fatal(err)
	}
	auth := model.Auth{UserID: "root@pam"}
	wait := func(upid string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if task, err := c.WaitTask(context.Background(), "pve", upid); err != nil || task.ExitStatus != "OK" {
			t.Fatalf("task: %v %v", task.ExitStatus, err)
		}
	}
	wait(c.CreateCT(auth, "pve", map[string]string{"vmid": "130", "ostemplate": model.DefaultTemplate, "rootfs": "local-lvm:1",
		"features": "nesting=1", "net0": "name=eth0,bridge=vmbr0,ip=dhcp", "ssh-public-keys": pub}))
	wait(c.StartCT(auth, "pve", 130, nil))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, "127.1.0.130:"+strconv.Itoa(m.Port()), client.Config{User: "root", Signer: signer,
		HostKey: client.HostKeyPolicy{VMID: 130, TrustOnFirstUse: true}, RetryMin: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var lines []string
	err = cl.Run(ctx, "echo should not run", nil, func(_ client.Stream, l string) { lines = append(lines, l) })
	var ee *client.ExitError
	if !errors.As(err, &ee) || ee.Code != 126 {
		t.Fatalf("err = %v, want exit status 126", err)
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "guest exec unavailable: user namespaces are disabled") {
		t.Errorf("output %q", lines)
	}
}

package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/sim"
)

// simProc is a standalone emulator process, `corral sim serve`, as a user
// runs it: the benchmark and the measured commands talk to it over HTTPS
// like to a Proxmox VE node.
type simProc struct {
	cmd   *exec.Cmd
	state string
	// env is what DIR/env exports: the endpoint, tokens, fingerprint.
	env  map[string]string
	hc   *http.Client
	done chan struct{}
}

// startSim starts `corral sim serve` on a free loopback port with task
// durations × scale and waits until it answers. runtime, when not empty
// and CORRAL_SIM_RUNTIME is unset, selects the emulator's guest runtime
// ("view" for the --scale run: thousands of running containers measure
// the API, not LXC, and would not fit on a small machine as real ones).
func startSim(ctx context.Context, corral, dir string, scale float64, nodes int, runtime string) (*simProc, error) {
	state := filepath.Join(dir, "sim")
	logf, err := os.Create(filepath.Join(dir, "sim.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(corral, "sim", "serve", "--listen", "127.0.0.1:0", "--state", state,
		"--time-scale", strconv.FormatFloat(scale, 'g', -1, 64), "--nodes", strconv.Itoa(nodes), "--guest-ssh-port", "0")
	if os.Getenv("CORRAL_SIM_REAL_TEMPLATES") == "" {
		// The figures are of the stand-in template, as before sim serve
		// made the real one its default where it can. Its CTs run no
		// init beyond a sleep and hold almost no memory, so the nodes'
		// memory admission (a --apps 100 run is 50 GiB of configured
		// memory) is lifted: bench measures corral, not the admission.
		cmd.Args = append(cmd.Args, "--real-templates=false", "--node-memory=16T")
	}
	cmd.Stderr = logf
	if runtime != "" && os.Getenv("CORRAL_SIM_RUNTIME") == "" {
		cmd.Env = append(os.Environ(), "CORRAL_SIM_RUNTIME="+runtime)
		if runtime == "view" {
			// The view runs guest commands on this host, unisolated: the
			// emulator starts no CT there without this opt-in.
			cmd.Env = append(cmd.Env, "CORRAL_SIM_UNISOLATED=1")
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s sim serve: %w (is --corral a corral binary?)", corral, err)
	}
	p := &simProc{cmd: cmd, state: state, done: make(chan struct{})}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if strings.Contains(sc.Text(), "credentials:") {
				ready <- true
			}
		}
		ready <- false
	}()
	go func() { cmd.Wait(); close(p.done) }()
	select {
	case ok := <-ready:
		if !ok {
			p.Close()
			return nil, fmt.Errorf("corral sim serve exited before it was ready: see %s", filepath.Join(dir, "sim.log"))
		}
	case <-time.After(60 * time.Second):
		p.Close()
		return nil, errors.New("corral sim serve not ready after 60s")
	case <-ctx.Done():
		p.Close()
		return nil, ctx.Err()
	}
	data, err := os.ReadFile(filepath.Join(state, "env"))
	if err != nil {
		p.Close()
		return nil, err
	}
	p.env = map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if kv, ok := strings.CutPrefix(line, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			p.env[k] = strings.ReplaceAll(strings.Trim(v, "'"), `'\''`, "'")
		}
	}
	p.hc = pinnedClient(p.env["PROXMOX_VE_FINGERPRINT"])
	return p, nil
}

// pinnedClient trusts exactly the certificate with fingerprint fp (the
// emulator's self-signed one), as corral does with --fingerprint.
func pinnedClient(fp string) *http.Client {
	want := strings.ToUpper(strings.ReplaceAll(fp, ":", ""))
	tr := &http.Transport{
		MaxIdleConnsPerHost: 64,
		TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, // replaced by the pin below
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("no server certificate")
				}
				sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
				if fmt.Sprintf("%X", sum[:]) != want {
					return errors.New("server certificate does not match the emulator's fingerprint")
				}
				return nil
			},
		},
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// Endpoint is the emulator's base URL (https://127.0.0.1:PORT).
func (p *simProc) Endpoint() string { return p.env["PROXMOX_VE_ENDPOINT"] }

// Close stops the emulator as Ctrl-C does, and kills it if it lingers.
func (p *simProc) Close() {
	if p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// RSS is the emulator process's resident memory (VmRSS) in bytes.
func (p *simProc) RSS() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read the emulator's resident memory: %w (needs Linux /proc)", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc/PID/status")
}

// call does one API request with token and decodes "data" into out.
func (p *simProc) call(ctx context.Context, method, path, token string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, p.Endpoint()+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "PVEAPIToken="+token)
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(body))
	}
	if out == nil {
		return nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return json.Unmarshal(env.Data, out)
}

// admin calls the emulator's /_corral/ admin API as root.
func (p *simProc) admin(ctx context.Context, method, path string, out any) error {
	return p.call(ctx, method, "/_corral/"+path, p.env["PVE_ROOT_TOKEN"], out)
}

// tasks lists the tasks the emulator keeps, with their times.
func (p *simProc) tasks(ctx context.Context) ([]sim.TaskTime, error) {
	var ts []sim.TaskTime
	err := p.admin(ctx, "GET", "tasks", &ts)
	return ts, err
}

// requests is the number of API requests since the last reset, in all
// and per endpoint.
func (p *simProc) requests(ctx context.Context) (int, map[string]int, error) {
	var r struct {
		Endpoints []sim.EndpointStats `json:"endpoints"`
		Total     int                 `json:"total"`
	}
	if err := p.admin(ctx, "GET", "requests", &r); err != nil {
		return 0, nil, err
	}
	by := map[string]int{}
	for _, e := range r.Endpoints {
		by[e.Endpoint] = e.Count
	}
	return r.Total, by, nil
}

func (p *simProc) resetRequests(ctx context.Context) error {
	return p.admin(ctx, "POST", "requests/reset", nil)
}

// names maps each guest's VMID to its name (hostname), as root sees them.
func (p *simProc) names(ctx context.Context) (map[string]string, error) {
	var rows []struct {
		VMID int    `json:"vmid"`
		Name string `json:"name"`
	}
	if err := p.call(ctx, "GET", "/api2/json/cluster/resources?type=vm", p.env["PVE_ROOT_TOKEN"], &rows); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range rows {
		out[strconv.Itoa(r.VMID)] = r.Name
	}
	return out, nil
}

package sim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/sim/model"
)

// Benchmarks of the emulator's scaling (issue 13): read throughput over
// HTTPS with 1,000 CTs, and what one change costs with 100 and with 1,000
// CTs. Run them alone, e.g.
//
//	go test ./internal/sim -run '^$' -bench . -benchtime 3s

// benchServer starts an emulator (HTTPS, instant tasks) holding n CTs,
// every other one running, created through the model by root.
func benchServer(b *testing.B, n int) *Server { return benchCluster(b, n, 1) }

// benchCluster is benchServer over nodes nodes, CT i on node i%nodes.
func benchCluster(b *testing.B, n, nodes int) *Server {
	b.Helper()
	model.SetJournalCheck(false) // the test binaries' after-save check is O(state)
	b.Cleanup(func() { model.SetJournalCheck(true) })
	// The filesystem view, as corral bench --scale runs it: the API is
	// measured, not 500 lxc-start monitors.
	b.Setenv("CORRAL_SIM_RUNTIME", "view")
	b.Setenv("CORRAL_SIM_UNISOLATED", "1")
	// 500 running CTs of 512 MiB: lift the memory admission (the tiny
	// template's CTs hold almost no memory).
	srv, err := New(Options{Dir: b.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), NodeMemory: 1 << 40, Nodes: nodes})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	c := srv.Cluster()
	root := model.Auth{UserID: "root@pam"}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			vmid := 1000 + i
			node := benchNode(i, nodes)
			upid, err := c.CreateCT(root, node, map[string]string{
				"vmid": strconv.Itoa(vmid), "ostemplate": model.DefaultTemplate, "rootfs": "local-lvm:1",
				"net0": "name=eth0,bridge=vmbr0,ip=dhcp", "unprivileged": "1", "hostname": fmt.Sprintf("app%d", i),
				"tags": "corral",
			})
			if err == nil {
				_, err = c.WaitTask(ctx, node, upid)
			}
			if err == nil && i%2 == 0 {
				if upid, err = c.StartCT(root, node, vmid, nil); err == nil {
					_, err = c.WaitTask(ctx, node, upid)
				}
			}
			if err != nil {
				errs <- fmt.Errorf("CT %d: %w", vmid, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return srv
}

// benchNode is the node of CT i on a cluster of nodes nodes.
func benchNode(i, nodes int) string {
	if nodes == 1 {
		return "pve"
	}
	return "pve" + strconv.Itoa(1+i%nodes)
}

// BenchmarkReads measures GET throughput with 1,000 CTs (500 running)
// over HTTPS with keep-alive, with as many clients in parallel as
// GOMAXPROCS×4; it reports requests per second of wall time.
func BenchmarkReads(b *testing.B) {
	const n = 1000
	srv := benchServer(b, n)
	hc := srv.HTTPClient()
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	token := "PVEAPIToken=" + srv.Credentials().OperatorToken
	for _, bc := range []struct {
		name    string
		path    func(i int) string
		writing bool // a writer changes CT configs meanwhile
	}{
		{"status", func(i int) string { return fmt.Sprintf("/nodes/pve/lxc/%d/status/current", 1000+i%n) }, false},
		{"status-while-writing", func(i int) string { return fmt.Sprintf("/nodes/pve/lxc/%d/status/current", 1000+i%n) }, true},
		{"config", func(i int) string { return fmt.Sprintf("/nodes/pve/lxc/%d/config", 1000+i%n) }, false},
		{"mixed", func(i int) string {
			switch i % 20 {
			case 0:
				return "/cluster/resources?type=vm"
			case 1:
				return "/nodes/pve/lxc"
			case 2, 3, 4, 5, 6, 7:
				return fmt.Sprintf("/nodes/pve/lxc/%d/config", 1000+i%n)
			default:
				return fmt.Sprintf("/nodes/pve/lxc/%d/status/current", 1000+i%n)
			}
		}, false},
		{"cluster-resources", func(int) string { return "/cluster/resources" }, false},
		{"lxc-list", func(int) string { return "/nodes/pve/lxc" }, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.writing {
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					root := model.Auth{UserID: "root@pam"}
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						srv.Cluster().UpdateCTConfig(root, "pve", 1000+i%n, map[string]string{"description": "w" + strconv.Itoa(i)})
					}
				}()
				defer func() { close(stop); <-done }()
			}
			var next atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := int(next.Add(1))
					req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/api2/json"+bc.path(i), nil)
					req.Header.Set("Authorization", token)
					resp, err := hc.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("GET %s: %s", bc.path(i), resp.Status)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}
}

// BenchmarkChange measures one persisted change (a config write through
// the model, journal included) with 100 and with 1,000 CTs: the cost must
// not grow with the cluster.
func BenchmarkChange(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(strconv.Itoa(n)+"-cts", func(b *testing.B) {
			srv := benchServer(b, n)
			c := srv.Cluster()
			root := model.Auth{UserID: "root@pam"}
			b.ResetTimer()
			for i := range b.N {
				vmid := 1000 + i%n
				if err := c.UpdateCTConfig(root, "pve", vmid, map[string]string{"description": "change " + strconv.Itoa(i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCreateStart measures creating and starting CTs from nothing
// (instant tasks) until there are 100 or 1,000 of them: ns/op is the
// cost per CT, which must stay flat as N grows.
func BenchmarkCreateStart(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(strconv.Itoa(n)+"-cts", func(b *testing.B) {
			model.SetJournalCheck(false)
			defer model.SetJournalCheck(true)
			var total time.Duration
			for range b.N {
				b.StopTimer()
				srv, err := New(Options{Dir: b.TempDir(), Listener: ListenNone, TimeScale: zeroScale()})
				if err != nil {
					b.Fatal(err)
				}
				c := srv.Cluster()
				root := model.Auth{UserID: "root@pam"}
				ctx := context.Background()
				b.StartTimer()
				start := time.Now()
				for i := range n {
					vmid := 1000 + i
					upid, err := c.CreateCT(root, "pve", map[string]string{
						"vmid": strconv.Itoa(vmid), "ostemplate": model.DefaultTemplate, "rootfs": "local-lvm:1",
						"net0": "name=eth0,bridge=vmbr0,ip=dhcp", "unprivileged": "1",
					})
					if err == nil {
						_, err = c.WaitTask(ctx, "pve", upid)
					}
					if err == nil {
						if upid, err = c.StartCT(root, "pve", vmid, nil); err == nil {
							_, err = c.WaitTask(ctx, "pve", upid)
						}
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				total += time.Since(start)
				b.StopTimer()
				srv.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*n), "ns/ct")
		})
	}
}

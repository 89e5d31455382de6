package sim

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// refreshRound is internal/bench's MixedRound (docs/benchmarks.md, issue
// 30): what one round of a refresh by real clients reads, {node} and
// {vmid} naming the round's CT. The bench package imports this one, so
// the table is repeated here rather than shared.
var refreshRound = []struct {
	path   string
	weight int
}{
	{"/cluster/resources?type=vm", 1},
	{"/nodes", 1},
	{"/nodes/{node}/lxc", 1},
	{"/nodes/{node}/lxc/{vmid}/status/current", 5},
	{"/nodes/{node}/lxc/{vmid}/config", 5},
	{"/nodes/{node}/lxc/{vmid}/pending", 3},
	{"/nodes/{node}/storage/local-lvm/content", 1},
	{"/nodes/{node}/tasks", 1},
	{"/cluster/status", 1},
	{"/version", 1},
}

var readMixProfile = flag.String("readmix.cpuprofile", "", "BenchmarkReadMix: write a CPU profile of the reads (not the setup) to this file")

// BenchmarkReadMix measures the mixed read mix over HTTPS with 1,000
// CTs on 5 nodes, 8 clients, the operator token (whose privileges are
// checked, unlike root's): the emulator's side of `corral bench
// --scale`'s mixed figure, in-process, for profiling:
//
//	go test ./internal/sim -run '^$' -bench ReadMix -benchtime 5s -cpuprofile /tmp/cpu.out
//
// Building the 1,000 CTs takes most of the time; with -benchtime Nx it
// is done once, and -readmix.cpuprofile FILE profiles the reads alone.
func BenchmarkReadMix(b *testing.B) {
	const n, nodes = 1000, 5
	srv := benchCluster(b, n, nodes)
	var paths []string
	for i := range n {
		r := strings.NewReplacer("{node}", benchNode(i, nodes), "{vmid}", fmt.Sprint(1000+i))
		for _, e := range refreshRound {
			for range e.weight {
				paths = append(paths, "/api2/json"+r.Replace(e.path))
			}
		}
	}
	hc := srv.HTTPClient()
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	token := "PVEAPIToken=" + srv.Credentials().OperatorToken
	var next atomic.Int64
	b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0))) // 8 clients, as corral bench --scale
	if *readMixProfile != "" {
		f, err := os.Create(*readMixProfile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p := paths[int(next.Add(1))%len(paths)]
			req, _ := http.NewRequest(http.MethodGet, srv.URL()+p, nil)
			req.Header.Set("Authorization", token)
			resp, err := hc.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("GET %s: %s", p, resp.Status)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

package metrics

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// started is about when this process started: its package init.
var started = time.Now()

// runtimeFamilies are client_golang's HELP and TYPE lines of the process
// and Go metrics AddRuntime writes (its process and Go collectors,
// v1.25.0).
var runtimeFamilies = []string{
	"# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge",
	"# HELP go_info Information about the Go environment.\n# TYPE go_info gauge",
	"# HELP go_memstats_alloc_bytes Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.\n# TYPE go_memstats_alloc_bytes gauge",
	"# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes\n# TYPE go_memstats_heap_inuse_bytes gauge",
	"# HELP go_memstats_sys_bytes Number of bytes obtained from system. Equals to /memory/classes/total:byte.\n# TYPE go_memstats_sys_bytes gauge",
	"# HELP go_threads Number of OS threads created.\n# TYPE go_threads gauge",
	"# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter",
	"# HELP process_max_fds Maximum number of open file descriptors.\n# TYPE process_max_fds gauge",
	"# HELP process_open_fds Number of open file descriptors.\n# TYPE process_open_fds gauge",
	"# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge",
	"# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n# TYPE process_start_time_seconds gauge",
	"# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n# TYPE process_virtual_memory_bytes gauge",
}

func values(t *testing.T, text string) map[string]float64 {
	t.Helper()
	samples, err := Parse(text)
	if err != nil {
		t.Fatalf("Check: %v\n%s", err, text)
	}
	m := map[string]float64{}
	for _, s := range samples {
		m[s.Name] = s.Value
	}
	return m
}

// The runtime and process metrics, beside the golden registry's: named,
// typed and described as client_golang does, valid, with sane values.
func TestAddRuntime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the process metrics read Linux's /proc")
	}
	r := goldenRegistry()
	r.AddRuntime()
	out := text(t, r)
	for _, f := range runtimeFamilies {
		if !strings.Contains(out, f+"\n") {
			t.Errorf("no\n%s\nin\n%s", f, out)
		}
	}
	if !strings.Contains(out, "\ngo_info{version=\""+runtime.Version()+"\"} 1\n") {
		t.Errorf("no go_info of %s:\n%s", runtime.Version(), out)
	}
	v := values(t, out)
	now := float64(time.Now().UnixNano()) / 1e9
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"process_start_time_seconds within a minute before this package's init", v["process_start_time_seconds"] <= float64(started.Unix())+1 &&
			v["process_start_time_seconds"] > float64(started.Unix())-60},
		{"process_start_time_seconds not after now", v["process_start_time_seconds"] <= now},
		{"resident memory above 1 MiB", v["process_resident_memory_bytes"] > 1<<20},
		{"virtual memory at least the resident", v["process_virtual_memory_bytes"] >= v["process_resident_memory_bytes"]},
		{"CPU time not negative", v["process_cpu_seconds_total"] >= 0},
		{"open fds at least stdin, stdout and stderr", v["process_open_fds"] >= 3},
		{"max fds at least the open ones", v["process_max_fds"] >= v["process_open_fds"]},
		{"goroutines", v["go_goroutines"] >= 1},
		{"threads", v["go_threads"] >= 1},
		{"heap allocated", v["go_memstats_alloc_bytes"] > 0},
		{"heap in use at least allocated", v["go_memstats_heap_inuse_bytes"] >= v["go_memstats_alloc_bytes"]},
		{"obtained from the system at least the heap in use", v["go_memstats_sys_bytes"] >= v["go_memstats_heap_inuse_bytes"]},
	} {
		if !c.ok {
			t.Errorf("not so: %s\n%s", c.what, out)
		}
	}
}

// The process files are read as procfs reads them (a command name with
// spaces and parentheses, unlimited fds); a file that cannot be read
// leaves its metrics out, and the scrape goes on.
func TestAddRuntime_procFiles(t *testing.T) {
	proc := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(proc, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := NewRegistry()
	r.addRuntime(proc)
	v := values(t, text(t, r))
	for name := range v {
		if strings.HasPrefix(name, "process_") {
			t.Errorf("%s without its /proc file", name)
		}
	}
	if _, ok := v["go_goroutines"]; !ok {
		t.Errorf("no go_goroutines when the process files are missing")
	}

	// Fields 3 to 24 of proc(5): utime 14 = 250, stime 15 = 50,
	// starttime 22 = 1234, vsize 23, rss 24 = 10 pages.
	write("self/stat", "4242 (corral (x) y) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 9 0 1234 104857600 10 18446744073709551615 1 2 3\n")
	write("stat", "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n")
	write("self/limits", "Limit                     Soft Limit           Hard Limit           Units     \n"+
		"Max processes             63448                63448                processes \n"+
		"Max open files            unlimited            unlimited            files     \n")
	for _, fd := range []string{"0", "1", "2", "7"} {
		write("self/fd/"+fd, "")
	}
	v = values(t, text(t, r))
	for name, want := range map[string]float64{
		"process_cpu_seconds_total":     3,
		"process_virtual_memory_bytes":  104857600,
		"process_resident_memory_bytes": 10 * float64(os.Getpagesize()),
		"process_start_time_seconds":    1700000000 + 1234.0/100,
		"process_open_fds":              4,
		"process_max_fds":               18446744073709551615,
	} {
		if got, ok := v[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	write("self/limits", "Max open files            1024                 4096                 files     \n")
	write("stat", "cpu 1 2 3\n") // no btime: no start time
	v = values(t, text(t, r))
	if _, ok := v["process_start_time_seconds"]; ok || v["process_max_fds"] != 1024 || v["process_cpu_seconds_total"] != 3 {
		t.Errorf("without btime and with 1024 fds: %v", v)
	}
	write("self/stat", "4242 (corral) S 1 2\n") // too short
	if v = values(t, text(t, r)); v["process_cpu_seconds_total"] != 0 || v["process_max_fds"] != 1024 {
		t.Errorf("with a short stat: %v", v)
	}
	if _, ok := v["process_cpu_seconds_total"]; ok {
		t.Errorf("process_cpu_seconds_total from a short stat")
	}
}

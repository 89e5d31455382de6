package metrics

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// AddRuntime registers the process and Go runtime metrics that
// dashboards use, under client_golang's names, types and help texts
// (its process and Go collectors): process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_start_time_seconds, process_open_fds, process_max_fds (read
// from /proc/self; one that cannot be read is left out of that scrape,
// which never fails), go_goroutines, go_threads, go_info and
// go_memstats_alloc_bytes, go_memstats_heap_inuse_bytes and
// go_memstats_sys_bytes.
func (r *Registry) AddRuntime() { r.addRuntime("/proc") }

// addRuntime is AddRuntime reading the process's files under proc (a
// test's own tree in tests).
func (r *Registry) addRuntime(proc string) {
	cpu := r.scrapedFamily("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", counterKind)
	openFDs := r.scrapedFamily("process_open_fds", "Number of open file descriptors.", gaugeKind)
	maxFDs := r.scrapedFamily("process_max_fds", "Maximum number of open file descriptors.", gaugeKind)
	vsize := r.scrapedFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.", gaugeKind)
	rss := r.scrapedFamily("process_resident_memory_bytes", "Resident memory size in bytes.", gaugeKind)
	start := r.scrapedFamily("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", gaugeKind)
	goroutines := r.scrapedFamily("go_goroutines", "Number of goroutines that currently exist.", gaugeKind)
	threads := r.scrapedFamily("go_threads", "Number of OS threads created.", gaugeKind)
	info := r.scrapedFamily("go_info", "Information about the Go environment.", gaugeKind, "version")
	alloc := r.scrapedFamily("go_memstats_alloc_bytes",
		"Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", gaugeKind)
	heapInuse := r.scrapedFamily("go_memstats_heap_inuse_bytes",
		"Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", gaugeKind)
	sys := r.scrapedFamily("go_memstats_sys_bytes", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", gaugeKind)

	r.Collect(func(s *Scrape) {
		if st, err := readProcStat(proc); err == nil {
			s.set(cpu, st.cpuSeconds)
			s.set(vsize, st.vsize)
			s.set(rss, st.rss)
			if boot, err := bootTime(proc); err == nil {
				s.set(start, boot+st.startTicks/userHZ)
			}
		}
		if n, err := openFDCount(proc); err == nil {
			s.set(openFDs, n)
		}
		if n, err := maxOpenFiles(proc); err == nil {
			s.set(maxFDs, n)
		}

		s.set(goroutines, float64(runtime.NumGoroutine()))
		n, _ := runtime.ThreadCreateProfile(nil)
		s.set(threads, float64(n))
		s.set(info, 1, runtime.Version())
		// runtime.ReadMemStats, not runtime/metrics: the same values (the
		// help texts say which), without runtime/metrics' package init
		// in every start of corral.
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s.set(alloc, float64(ms.Alloc))
		s.set(heapInuse, float64(ms.HeapInuse))
		s.set(sys, float64(ms.Sys))
	})
}

// userHZ is the clock tick of /proc's times: 100 on every Linux
// platform Go runs on (procfs assumes it too).
const userHZ = 100

type procStat struct {
	cpuSeconds, vsize, rss, startTicks float64
}

// readProcStat reads this process's /proc/self/stat: CPU time (utime +
// stime), virtual and resident size, and start time in ticks since boot.
func readProcStat(proc string) (procStat, error) {
	b, err := os.ReadFile(proc + "/self/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields that follow start after the last ')', with field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, os.ErrInvalid
	}
	f := strings.Fields(string(b[i+1:]))
	field := func(n int) (float64, error) { // n: the field's number in proc(5)
		if n-3 >= len(f) {
			return 0, os.ErrInvalid
		}
		return strconv.ParseFloat(f[n-3], 64)
	}
	var st procStat
	var v [5]float64
	for k, n := range []int{14, 15, 22, 23, 24} { // utime stime starttime vsize rss
		if v[k], err = field(n); err != nil {
			return procStat{}, err
		}
	}
	st.cpuSeconds = (v[0] + v[1]) / userHZ
	st.startTicks = v[2]
	st.vsize = v[3]
	st.rss = v[4] * float64(os.Getpagesize())
	return st, nil
}

// bootTime is the system's boot time (Unix seconds), /proc/stat's btime.
func bootTime(proc string) (float64, error) {
	f, err := os.Open(proc + "/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, os.ErrNotExist
}

// openFDCount counts /proc/self/fd's entries: the directory's size where
// procfs reports the count there (Linux 6.2 on), else its names.
func openFDCount(proc string) (float64, error) {
	if proc == "/proc" {
		if fi, err := os.Stat(proc + "/self/fd"); err == nil && fi.Size() > 0 {
			return float64(fi.Size()), nil
		}
	}
	d, err := os.Open(proc + "/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	return float64(len(names)), nil
}

// maxOpenFiles is the soft limit of open files, /proc/self/limits' "Max
// open files" (unlimited as 2^64-1, as procfs reads it).
func maxOpenFiles(proc string) (float64, error) {
	b, err := os.ReadFile(proc + "/self/limits")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		if f[0] == "unlimited" {
			return 18446744073709551615, nil
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		return float64(n), err
	}
	return 0, os.ErrNotExist
}

package guest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// processesIn lists the PIDs whose mount namespace is ns (as readlink
// /proc/PID/ns/mnt prints it) and whose root is root: the processes of a
// CT session, found even after they left its process group.
func processesIn(ns, root string) []int {
	if ns == "" {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := "/proc/" + e.Name()
		if l, err := os.Readlink(dir + "/ns/mnt"); err != nil || l != ns {
			continue
		}
		if l, err := os.Readlink(dir + "/root"); err != nil || l != root {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// killNamespaces SIGKILLs every process of the given session namespaces
// until none is left (a dying parent may still fork), for at most a
// few rounds.
func killNamespaces(nss []string, root string) {
	if len(nss) == 0 || root == "" {
		return
	}
	for round := 0; round < 20; round++ {
		n := 0
		for _, ns := range nss {
			for _, pid := range processesIn(ns, root) {
				syscall.Kill(pid, syscall.SIGKILL)
				n++
			}
		}
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// removeWork deletes a session's overlay work directory. The kernel
// makes its work/ subdirectory with mode 0, so permissions are opened
// first (needed without root).
func removeWork(work string) {
	filepath.WalkDir(work, func(path string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(path, 0o700)
		}
		return nil
	})
	os.RemoveAll(work)
	os.Remove(filepath.Dir(work)) // .corral-ovl, when empty
}

package bench

import (
	"os"
	"runtime"
	"syscall"
)

// maxRSS is the peak resident memory of an ended process in bytes, from
// its rusage (ru_maxrss is in KiB on Linux, bytes on macOS); 0 where the
// system does not say.
func maxRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) * 1024
}

package testenv

import "syscall"

// Exit ends a test binary with code, for TestMain after m.Run: as
// os.Exit does, but without the race detector's pause. Built with -race,
// a process that exits with code 0 waits one second first, so that a
// goroutine still running can report a race; every test binary of
// `go test -race ./...` paid it, 34 seconds of the run's package slots
// (issue 30). Races found while the tests ran already fail them, and
// m.Run has written its output and profiles by the time it returns.
func Exit(code int) {
	syscall.Exit(code)
}

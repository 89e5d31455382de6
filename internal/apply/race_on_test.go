//go:build race

package apply_test

// raceDetector is true in a -race build, where the emulator and corral run
// several times slower: the move crash test then tries a sample of its
// kill points (see TestMoveCrashAtEveryAPICall).
const raceDetector = true

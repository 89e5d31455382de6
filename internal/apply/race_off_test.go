//go:build !race

package apply_test

const raceDetector = false

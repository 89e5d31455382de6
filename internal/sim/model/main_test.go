package model_test

import (
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// TestMain ends the binary without the race detector's one-second pause
// at exit (testenv.Exit). Every test but one (which sets PATH with
// t.Setenv) has a cluster of its own and runs beside the others, 4 at
// once unless -parallel says otherwise: one after another they held the
// last slot of a newcomer's first `go test -race ./...` for 20 s, with
// the machine's other core idle (issue 30).
func TestMain(m *testing.M) {
	testenv.DefaultParallel(4)
	testenv.Exit(m.Run())
}

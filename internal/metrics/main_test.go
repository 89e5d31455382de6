package metrics

import (
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// TestMain ends the binary without the race detector's one-second pause
// at exit (testenv.Exit).
func TestMain(m *testing.M) { testenv.Exit(m.Run()) }

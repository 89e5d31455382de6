package cli

import (
	"testing"

	"github.com/corralhq/corral/internal/lazyre"
)

// TestLazyRegexpsCompile compiles every package-level regular expression
// of the packages this binary links, which are all that have them
// (archtest's TestLazyRegexpsLinkedByCLI): they compile at first use, not
// at init (lazyre), so a bad pattern would otherwise hide until the code
// that uses it runs.
func TestLazyRegexpsCompile(t *testing.T) {
	if err := lazyre.CompileAll(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d regular expressions compile", lazyre.Count())
}

package cli

import (
	"context"
	"io"
	"os"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/sim/prereq"
	"github.com/corralhq/corral/internal/ui"
)

// serveRealTemplates decides whether `corral sim serve` makes Debian 12
// a real Debian (model.EnsureRealTemplate): --real-templates when given,
// else CORRAL_SIM_REAL_TEMPLATES (1 or 0), else wherever this machine can
// build and boot it (prereq.RealTemplates: root, lxc, mmdebstrap, zstd,
// or already built). When the answer is no by default, one line on w
// says what CTs get instead and how to get the real one. In-process
// emulators (sim.New: tests, the embedded one) keep the stand-in unless
// asked: only the served emulator's default is the real one. A default
// real template that fails to build gives the stand-in, saying why.
func serveRealTemplates(ctx context.Context, flagSet, flag bool, w io.Writer) bool {
	if flagSet {
		if !flag && os.Getenv(model.RealTemplateEnv) == "1" {
			os.Setenv(model.RealTemplateEnv, "0") // the flag beats the environment (sim.New reads it)
		}
		return flag
	}
	switch os.Getenv(model.RealTemplateEnv) {
	case "1":
		return true
	case "0":
		return false
	}
	ok, why := prereq.RealTemplates()
	if !ok {
		ui.WriteStandInTemplate(w, why)
		return false
	}
	// Built here rather than in sim.New, so that a default that cannot be
	// built (no mirror) serves the stand-in instead of failing.
	if _, err := model.EnsureRealTemplate(ctx, w); err != nil {
		if ctx.Err() != nil {
			return false // interrupted: sim serve stops anyway
		}
		ui.WriteStandInTemplateFailed(w, err)
		return false
	}
	return true
}

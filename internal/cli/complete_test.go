package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Shell completion offers the manifest's app names (issue 16, item 15).
func TestCompleteAppNames(t *testing.T) {
	m := writeManifest(t, threeVolumes("alpha")+strings.TrimPrefix(threeVolumes("beta"), "apps:\n"))
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "logs", "-f", m, ""}, []string{"alpha", "beta"}},
		{[]string{"__complete", "backup", "-f", m, "al"}, []string{"alpha"}},
		{[]string{"__complete", "destroy", "-f", m, "alpha", ""}, []string{"beta"}},
		{[]string{"__complete", "rollback", "-f", m, "alpha", ""}, nil},
	} {
		var out, errb bytes.Buffer
		Run(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line != "" && !strings.HasPrefix(line, ":") {
				got = append(got, line)
			}
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%v: got %v, want %v\n%s", tc.args, got, tc.want, out.String())
		}
	}
}

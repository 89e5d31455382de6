package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"version"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("version: exit %d\n%s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "corral ") || !strings.Contains(out.String(), "built with "+runtime.Version()) {
		t.Errorf("version output:\n%s", out.String())
	}
	out.Reset()
	if code := Run(context.Background(), []string{"version", "-o", "json"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("version -o json: exit %d", code)
	}
	var v buildVersion
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Go != runtime.Version() || v.Version == "" {
		t.Errorf("version -o json: %s (%v)", out.String(), err)
	}
	if code := Run(context.Background(), []string{"version", "-o", "yaml"}, strings.NewReader(""), &out, &errb); code != ExitError {
		t.Errorf("version -o yaml: exit %d, want 1", code)
	}
}

// TestVersion_flag: corral --version prints what corral version prints.
func TestVersion_flag(t *testing.T) {
	run := func(args ...string) string {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errb.String())
		}
		return out.String()
	}
	cmd, flag := run("version"), run("--version")
	if first, _, _ := strings.Cut(cmd, "\n"); !strings.HasPrefix(flag, first+"\n") {
		t.Errorf("corral --version:\n%s\nwant the first line of corral version:\n%s", flag, cmd)
	}
	if flag != cmd {
		t.Errorf("corral --version:\n%s\ncorral version:\n%s", flag, cmd)
	}
}

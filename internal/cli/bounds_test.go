package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
)

// Issue 27: corral agent status checks the agent's answer against size
// and depth limits before decoding it, and says which limit fired.
func TestGetAgentJSON_bounded(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"deep", strings.Repeat("[", 1000) + strings.Repeat("]", 1000), "nested more than 32 levels deep"},
		{"too large", `{"a":"` + strings.Repeat("x", 16<<20) + `"}`, "more than 16777216 bytes"},
		{"many values", "[" + strings.Repeat("0,", 1<<17) + "0]", "more than 131072 values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			var v any
			err := getAgentJSON(context.Background(), srv.Client(), srv.URL, "", &v)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--url") {
				t.Fatalf("getAgentJSON() = %v, want %q and a hint", err, tc.want)
			}
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"mode":"watch","apps":[{"name":"web"}]}`))
	}))
	defer srv.Close()
	var v map[string]any
	if err := getAgentJSON(context.Background(), srv.Client(), srv.URL, "", &v); err != nil || v["mode"] != "watch" {
		t.Fatalf("getAgentJSON() = %v, %v", v, err)
	}
}

// Issue 27: validate -o json lists the first manifest.MaxProblems
// problems and, last, how many more there are.
func TestValidateJSON_problemsCapped(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("apps:\n  - name: web\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n")
	for i := range 150 {
		fmt.Fprintf(&b, "    bogus%d: 1\n", i)
	}
	m := writeManifest(t, b.String())
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"validate", "-f", m, "-o", "json"}, strings.NewReader(""), &out, &errb)
	var v struct{ Problems []string }
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || code != ExitError {
		t.Fatalf("exit %d, %v:\n%s%s", code, err, out.String(), errb.String())
	}
	if got, want := len(v.Problems), manifest.MaxProblems+1; got != want {
		t.Fatalf("%d problems listed, want %d", got, want)
	}
	if got := v.Problems[len(v.Problems)-1]; !strings.HasPrefix(got, "… and 50 more problems") {
		t.Errorf("last entry %q", got)
	}
}

package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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

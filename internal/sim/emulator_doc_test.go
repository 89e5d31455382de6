package sim

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEmulatorDoc keeps docs/emulator.md's endpoint lists in step with the
// route table: every served route is listed as `METHOD /path`, every
// notServed endpoint appears with its reason, and the page names no
// endpoint as served that the table does not serve.
func TestEmulatorDoc(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/emulator.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(page)
	srv, err := New(Options{Dir: t.TempDir(), Listener: ListenNone, TimeScale: zeroScale()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	routes := srv.Routes()
	slices.Sort(routes)
	for _, r := range routes {
		if !strings.Contains(doc, "\n- `"+r+"`\n") {
			t.Errorf("docs/emulator.md does not list served route %s (as a line \"- `%s`\")", r, r)
		}
	}
	for r, why := range notServed {
		if !strings.Contains(doc, "| `"+r+"` | "+why+" |") {
			t.Errorf("docs/emulator.md does not list %s as not served with its reason %q", r, why)
		}
	}
	listed := regexp.MustCompile("(?m)^- `([A-Z]+ /[^`]*)`$").FindAllStringSubmatch(doc, -1)
	for _, m := range listed {
		if !slices.Contains(routes, m[1]) {
			t.Errorf("docs/emulator.md lists %s as served, but the route table has no such route", m[1])
		}
	}
	if len(listed) != len(routes) {
		t.Errorf("docs/emulator.md lists %d served routes, the table has %d", len(listed), len(routes))
	}
}

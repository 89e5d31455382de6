package apply

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testutil/memcap"
)

// Issue 27: parseConfigText reads an archive's config (PVE's
// extractconfig answer) without a slice of its lines: 1 MiB of empty
// lines allocated 16 MiB of string headers before.
func TestParseConfigText_bounded(t *testing.T) {
	text := "hostname: web\ntags: corral;corral-app-web\n" + strings.Repeat("\n", 1<<20) + "#d%41\n[snap]\nhostname: old\n"
	var conf map[string]string
	n := memcap.Allocated(func() { conf = parseConfigText(text) })
	if conf["hostname"] != "web" || conf["tags"] != "corral;corral-app-web" || conf["description"] != "dA\n" {
		t.Fatalf("parseConfigText() = %q", conf)
	}
	if n > 1<<20 {
		t.Errorf("parseConfigText of %d KiB allocated %d KiB", len(text)>>10, n>>10)
	}
}

// FuzzParseConfigText: any config text parses without panicking, within
// 8 times its size and 64 KiB, and every key comes from a "key: value"
// line of the main section.
func FuzzParseConfigText(f *testing.F) {
	for _, s := range []string{
		"arch: amd64\nhostname: web\nrootfs: local-lvm:vm-100-disk-0,size=8G\ntags: corral;corral-app-web\n#My%20app\n[vzdump]\nhostname: x\n",
		"", "\n\n", ": v\n", "#%zz\n", "[", "k: v: w\n", strings.Repeat("\n", 5000), strings.Repeat("#"+strings.Repeat("%41", 100)+"\n", 100),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var conf map[string]string
		memcap.Run(t, 8*uint64(len(text))+64<<10, len(text), func() { conf = parseConfigText(text) })
		main, _, _ := strings.Cut("\n"+text, "\n[")
		for k := range conf {
			if k != "description" && !strings.Contains(main, "\n"+k+": ") {
				t.Fatalf("key %q not from a line of the main section", k)
			}
		}
	})
}

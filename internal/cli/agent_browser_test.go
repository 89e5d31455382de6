package cli

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/testenv"
)

const browserManifest = `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    volumes:
      - {name: data, size: 1G, mount: /srv/data}
    health:
      - name: site answers
        command: test ! -e /srv/data/broken
        retries: 0
  - name: notes
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    volumes:
      - {name: db, size: 2G, mount: /var/lib/notes}
    backup: {keep: 3, schedule: "30 3 * * *"}
`

// chromiumPath finds Debian's chromium, or skips (fails with
// CORRAL_REQUIRE_BROWSER=1, as CI sets it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Lack(t, testenv.Browser, "chromium is not installed: apt-get install chromium to run the status page in a headless browser (.ci/run does)")
	return ""
}

// The status page in a real headless browser at a phone's size: a row per
// app with its state, the failing health check shown as failing, the
// stopped app as stopped, the backup, nodes and events. With
// CORRAL_UPDATE_SCREENSHOT=1 it writes docs/agent-status.png.
func TestAgent_statusPageInBrowser(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "the emulator's guest view")
	chromium := chromiumPath(t)
	c := newGuestCluster(t)
	m := writeManifest(t, browserManifest)
	if r := c.run("apply", "-f", m, "--auto-approve"); r.code != 0 {
		needGuestExec(t, r.stderr)
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	st := c.status(m)
	var webVol string
	notesVMID := 0
	for _, a := range st.Apps {
		switch a.App {
		case "web":
			webVol = a.Volumes[0].VolID
		case "notes":
			notesVMID = a.Containers[0].VMID
		}
	}
	if err := os.WriteFile(c.file(webVol, "broken"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := c.newAgentRig(m, "observe", time.Now(), func(a *agentArgs) { a.healthFailures = 1000 })
	r.tick() // web's check fails; notes is backed up (its window has no archive)
	ctx := context.Background()
	pc := c.pveClient()
	upid, err := pc.StopContainer(ctx, "pve", notesVMID)
	if err == nil {
		_, err = pc.WaitTask(ctx, upid, pve.WaitOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Add(time.Minute)
	r.tick()

	srv := httptest.NewServer(r.ag.Handler(""))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	b := startBrowser(t, chromium)

	type row struct {
		Name, State, Health, Drift, Backup, Node string
		Checks                                   []string
	}
	if err := b.navigate(ctx, srv.URL+"/"); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if err := b.waitVisible(ctx, `#apps section.app`); err != nil {
		t.Fatalf("browser: %v", err)
	}
	var rows []row
	if err := b.eval(ctx, `[...document.querySelectorAll('section.app')].map(s => ({
			Name: s.querySelector('.name').textContent,
			State: s.querySelector('.state').textContent,
			Health: s.querySelector('.health') ? s.querySelector('.health').textContent : '',
			Drift: s.querySelector('.drift').textContent,
			Backup: s.querySelector('.backup').textContent,
			Node: s.querySelector('.node').textContent,
			Checks: [...s.querySelectorAll('li.check')].map(li => li.dataset.status + ' ' + getComputedStyle(li).color + ' ' + li.textContent),
		}))`, &rows); err != nil {
		t.Fatalf("browser: %v", err)
	}
	nodes, err := b.text(ctx, `#nodes`)
	if err != nil {
		t.Fatal(err)
	}
	events, err := b.text(ctx, `#events`)
	if err != nil {
		t.Fatal(err)
	}
	var external bool
	if err := b.eval(ctx, `[...document.querySelectorAll('[src],link[href]')].some(e => /^https?:/.test(e.getAttribute('src') || e.getAttribute('href')))`, &external); err != nil {
		t.Fatal(err)
	}
	shot, err := b.fullScreenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]row{}
	for _, rw := range rows {
		got[rw.Name] = rw
	}
	web, notes := got["web"], got["notes"]
	if len(rows) != 2 || web.State != "running" || notes.State != "stopped" {
		t.Errorf("app rows: %+v", rows)
	}
	if web.Health != "unhealthy" || len(web.Checks) != 1 || !strings.HasPrefix(web.Checks[0], "unhealthy rgb(207, 34, 46) site answers: unhealthy") {
		t.Errorf("web's failing health check is not shown as failing (red): %+v", web)
	}
	if notes.Health != "" || !strings.Contains(notes.Backup, "ok") || !strings.Contains(notes.Backup, "30 3 * * *") {
		t.Errorf("notes: %+v", notes)
	}
	if !strings.Contains(web.Node, "pve") || !strings.Contains(web.Drift, "none") {
		t.Errorf("web: %+v", web)
	}
	if !strings.Contains(nodes, "pve") || !strings.Contains(nodes, "online") {
		t.Errorf("nodes: %q", nodes)
	}
	if !strings.Contains(events, `health check "site answers" of app web failed`) || !strings.Contains(events, "scheduled backup of app notes") {
		t.Errorf("events: %q", events)
	}
	if external {
		t.Errorf("the page loads external assets")
	}
	if len(shot) < 1000 {
		t.Errorf("screenshot of %d bytes", len(shot))
	}
	if os.Getenv("CORRAL_UPDATE_SCREENSHOT") == "1" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "agent-status.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

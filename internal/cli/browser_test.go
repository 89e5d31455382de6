package cli

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// browser is a headless chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: commands on the browser's fd 3, answers
// and events on its fd 4, each message JSON ended by a NUL byte), with
// one page attached. The status page test needs four commands of the
// protocol; a client library for all of it (chromedp, 70 packages) was
// a tenth of a newcomer's first compile of internal/cli's tests.
type browser struct {
	cmd     *exec.Cmd
	in      io.WriteCloser // the browser's fd 3
	session string         // the page's flattened session

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan cdpReply
	readErr error
	stderr  string // the file of the browser's stderr
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// startBrowser starts chromium (path) headless at a phone's size with a
// blank page, and stops it when the test ends.
func startBrowser(t *testing.T, path string) *browser {
	t.Helper()
	toBrowser, in, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, fromBrowser, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{in: in, waiting: map[int]chan cdpReply{}, stderr: filepath.Join(t.TempDir(), "chromium.stderr")}
	stderr, err := os.Create(b.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	b.cmd = exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-default-apps", "--disable-extensions",
		"--disable-sync", "--disable-domain-reliability", "--no-proxy-server", "--metrics-recording-only", "--mute-audio",
		"--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(), "--window-size=412,915", "--remote-debugging-pipe", "about:blank")
	b.cmd.ExtraFiles = []*os.File{toBrowser, fromBrowser}
	b.cmd.Stderr = stderr
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	toBrowser.Close()
	fromBrowser.Close()
	go b.read(out)
	t.Cleanup(func() {
		b.call(context.Background(), "", "Browser.close", nil, nil)
		in.Close()
		done := make(chan struct{})
		go func() { b.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			b.cmd.Process.Kill()
			<-done
		}
		out.Close()
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var targets struct {
		TargetInfos []struct {
			TargetID string `json:"targetId"`
			Type     string `json:"type"`
		} `json:"targetInfos"`
	}
	if err := b.call(ctx, "", "Target.getTargets", nil, &targets); err != nil {
		t.Fatal(err)
	}
	page := ""
	for _, ti := range targets.TargetInfos {
		if ti.Type == "page" {
			page = ti.TargetID
		}
	}
	if page == "" {
		var created struct {
			TargetID string `json:"targetId"`
		}
		if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &created); err != nil {
			t.Fatal(err)
		}
		page = created.TargetID
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": page, "flatten": true}, &attached); err != nil {
		t.Fatal(err)
	}
	b.session = attached.SessionID
	return b
}

// read delivers the browser's answers to their callers; events (no id)
// are dropped.
func (b *browser) read(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			msg, _ := os.ReadFile(b.stderr)
			b.readErr = fmt.Errorf("the browser's pipe: %w; its stderr:\n%s", err, msg)
			for id, ch := range b.waiting {
				close(ch)
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		var m struct {
			ID *int `json:"id"`
			cdpReply
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == nil {
			continue
		}
		b.mu.Lock()
		if ch := b.waiting[*m.ID]; ch != nil {
			ch <- m.cdpReply
			delete(b.waiting, *m.ID)
		}
		b.mu.Unlock()
	}
}

// call sends method with params, to the page's session unless session is
// "" (the browser), and decodes its result into result (if not nil).
func (b *browser) call(ctx context.Context, session, method string, params, result any) error {
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return b.readErr
	}
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := b.in.Write(append(data, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			b.mu.Lock()
			defer b.mu.Unlock()
			return fmt.Errorf("%s: %w", method, b.readErr)
		}
		if r.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, r.Error.Message, r.Error.Code)
		}
		if result != nil {
			return json.Unmarshal(r.Result, result)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// navigate loads url in the page.
func (b *browser) navigate(ctx context.Context, url string) error {
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.call(ctx, b.session, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("navigate to %s: %s", url, r.ErrorText)
	}
	return nil
}

// eval evaluates the JavaScript expression in the page (a promise is
// awaited) and decodes its value into result.
func (b *browser) eval(ctx context.Context, expr string, result any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := b.call(ctx, b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("evaluate %q: %s %s", expr, e.Text, e.Exception.Description)
	}
	if len(r.Result.Value) == 0 {
		return errors.New("evaluate " + expr + ": no value")
	}
	return json.Unmarshal(r.Result.Value, result)
}

// waitVisible waits until an element matching selector is rendered with
// a size.
func (b *browser) waitVisible(ctx context.Context, selector string) error {
	q, _ := json.Marshal(selector)
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden' })()`, q)
	for {
		var visible bool
		if err := b.eval(ctx, expr, &visible); err != nil {
			return err
		}
		if visible {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never became visible: %w", selector, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// text is the rendered text of the first element matching selector.
func (b *browser) text(ctx context.Context, selector string) (string, error) {
	q, _ := json.Marshal(selector)
	var s string
	err := b.eval(ctx, fmt.Sprintf(`document.querySelector(%s).innerText`, q), &s)
	return strings.TrimSpace(s), err
}

// fullScreenshot is a PNG of the whole page, beyond the window.
func (b *browser) fullScreenshot(ctx context.Context) ([]byte, error) {
	var metrics struct {
		CSSContentSize struct {
			Width  float64 `json:"width"`
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	if err := b.call(ctx, b.session, "Page.getLayoutMetrics", nil, &metrics); err != nil {
		return nil, err
	}
	size := metrics.CSSContentSize
	var shot struct {
		Data string `json:"data"`
	}
	if err := b.call(ctx, b.session, "Page.captureScreenshot", map[string]any{
		"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": size.Width, "height": size.Height, "scale": 1},
	}, &shot); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(shot.Data)
}

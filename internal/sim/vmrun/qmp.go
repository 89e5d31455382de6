package vmrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// QMP and the guest agent speak the same line protocol: one JSON object
// per line, {"execute": ..., "arguments": ...} answered by {"return": ...}
// or {"error": {"class", "desc"}}; QMP interleaves {"event": ...} lines.

// exchange sends cmd on c and reads lines until the answer.
func exchange(c net.Conn, rd *bufio.Reader, cmd string, args any) (json.RawMessage, error) {
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
			Event string `json:"event"`
		}
		if err := json.Unmarshal(line, &resp); err != nil || resp.Event != "" {
			continue // an event, or the agent's 0xff resync byte
		}
		if resp.Error != nil {
			return nil, &AgentError{Class: resp.Error.Class, Desc: resp.Error.Desc}
		}
		if resp.Return != nil {
			return resp.Return, nil
		}
	}
}

// AgentError is a QMP or guest agent error answer: PVE reports an
// agent's as "Agent error: <Desc>" (qemu-server's check_agent_error).
type AgentError struct{ Class, Desc string }

func (e *AgentError) Error() string { return e.Class + ": " + e.Desc }

// dial connects to a unix socket with ctx's deadline (or 5 seconds).
func dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(5 * time.Second)
	}
	c.SetDeadline(dl)
	return c, nil
}

// qmp runs one QMP command on a connection of its own.
func (vm *VM) qmp(ctx context.Context, cmd string, args any) (json.RawMessage, error) {
	c, err := dial(ctx, vm.spec.QMPSocket())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	if _, err := rd.ReadBytes('\n'); err != nil { // the greeting
		return nil, err
	}
	if _, err := exchange(c, rd, "qmp_capabilities", nil); err != nil {
		return nil, err
	}
	return exchange(c, rd, cmd, args)
}

// Status is QMP's query-status: "running", "paused", "shutdown"...
func (vm *VM) Status(ctx context.Context) (string, error) {
	r, err := vm.qmp(ctx, "query-status", nil)
	if err != nil {
		return "", err
	}
	var st struct {
		Status string `json:"status"`
	}
	return st.Status, json.Unmarshal(r, &st)
}

// ErrAgentNotRunning is PVE's answer when the guest's agent does not
// answer (qemu-server's agent_cmd, "QEMU guest agent is not running").
var ErrAgentNotRunning = errors.New("QEMU guest agent is not running")

// Agent runs one guest agent command and returns its "return" value.
// It first syncs (guest-sync with a fresh id) so that a stale answer
// from an earlier, timed-out client is never taken for this one's.
func (vm *VM) Agent(ctx context.Context, cmd string, args any) (json.RawMessage, error) {
	if !vm.spec.Agent {
		return nil, errors.New("No QEMU guest agent configured")
	}
	vm.agentMu.Lock()
	defer vm.agentMu.Unlock()
	c, err := dial(ctx, vm.spec.AgentSocket())
	if err != nil {
		return nil, ErrAgentNotRunning
	}
	defer c.Close()
	if _, ok := ctx.Deadline(); !ok {
		c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	rd := bufio.NewReader(c)
	id := time.Now().UnixNano() & 0x7fffffff
	for {
		r, err := exchange(c, rd, "guest-sync", map[string]any{"id": id})
		if err != nil {
			return nil, ErrAgentNotRunning
		}
		var got int64
		if json.Unmarshal(r, &got) == nil && got == id {
			break
		}
	}
	r, err := exchange(c, rd, cmd, args)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) {
			return nil, ErrAgentNotRunning
		}
		return nil, fmt.Errorf("agent %s: %w", cmd, err)
	}
	return r, nil
}

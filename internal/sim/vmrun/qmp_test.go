package vmrun

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"testing"
)

// TestExchange_guestExec: guest-exec goes out as one JSON line with
// its arguments; the agent's return comes back raw, its error as an
// *AgentError (PVE's "Agent error: <desc>"), and lines that are no
// answer (an event, the agent's 0xff resync byte) are skipped.
func TestExchange_guestExec(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		ret          string
		err          *AgentError
	}{
		{"return", "\xff\n{\"event\":\"X\"}\n{\"return\":{\"pid\":1234}}\n", `{"pid":1234}`, nil},
		{"error", `{"error":{"class":"GenericError","desc":"Invalid parameter 'pid'"}}` + "\n", "", &AgentError{"GenericError", "Invalid parameter 'pid'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, agent := net.Pipe()
			defer client.Close()
			got := make(chan map[string]any, 1)
			go func() {
				defer agent.Close()
				line, _ := bufio.NewReader(agent).ReadBytes('\n')
				var req map[string]any
				json.Unmarshal(line, &req)
				got <- req
				agent.Write([]byte(tc.answer))
			}()
			args := map[string]any{"path": "sh", "arg": []string{"-c", "true"}, "capture-output": true}
			ret, err := exchange(client, bufio.NewReader(client), "guest-exec", args)
			req := <-got
			if b, _ := json.Marshal(req); string(b) != `{"arguments":{"arg":["-c","true"],"capture-output":true,"path":"sh"},"execute":"guest-exec"}` {
				t.Errorf("request %s", b)
			}
			var ae *AgentError
			switch {
			case tc.err == nil && (err != nil || string(ret) != tc.ret):
				t.Fatalf("return %s, %v; want %s", ret, err, tc.ret)
			case tc.err != nil && (!errors.As(err, &ae) || *ae != *tc.err):
				t.Fatalf("error %v, want %v", err, tc.err)
			}
		})
	}
}

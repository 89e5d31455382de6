package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/bounded"
	"github.com/corralhq/corral/internal/ui"
)

// newAgentStatusCmd is `corral agent status`: what a running agent
// knows, read from its API.
func newAgentStatusCmd(st *streams) *cobra.Command {
	var url, token string
	var ff fileFlags
	var cf connFlags
	var trust bool
	cmd := &cobra.Command{
		Use:         "status",
		Annotations: jsonForm(),
		Short:       "Show what a running corral agent knows: apps, health, backups, recent events",
		Long: `status reads a running agent's API: the one at --url, or with -f the
agent corral agent install put on the cluster for that manifest's
project (its address and bearer token are read from its container over
SSH, and never printed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := ff.json()
			if err != nil {
				return err
			}
			show := func(url, token string, hc *http.Client) error {
				if token == "" {
					token = os.Getenv("CORRAL_AGENT_TOKEN")
				}
				var s agent.Status
				var ev struct {
					Events []agent.Event `json:"events"`
				}
				base := strings.TrimSuffix(url, "/")
				if err := getAgentJSON(cmd.Context(), hc, base+"/api/v1/apps", token, &s); err != nil {
					return err
				}
				if err := getAgentJSON(cmd.Context(), hc, base+"/api/v1/events", token, &ev); err != nil {
					return err
				}
				if asJSON {
					return writeJSON(st, map[string]any{"status": s, "events": ev.Events})
				}
				ui.WriteAgentStatus(st.out, s, ev.Events)
				return nil
			}
			if cmd.Flags().Changed("file") && !cmd.Flags().Changed("url") {
				// The installed agent, reached from inside its container.
				return installedAgent(cmd.Context(), st, ff, cf, trust, func(u, tok string, hc *http.Client) error {
					if token != "" {
						tok = token
					}
					return show(u, tok, hc)
				})
			}
			return show(url, token, http.DefaultClient)
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:9120", "the agent's address (its --listen)")
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	cmd.Flags().BoolVar(&trust, "trust-host-key", false, "-f: accept the agent container's SSH host key when corral has none pinned")
	cmd.Flags().StringVar(&token, "auth-token", "", "the agent's bearer token (env CORRAL_AGENT_TOKEN)")
	return cmd
}

func getAgentJSON(ctx context.Context, hc *http.Client, url, token string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("reach the agent: %w; is `corral agent` running, and is --url its --listen address?", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return errors.New("the agent wants its token: pass --auth-token or set CORRAL_AGENT_TOKEN")
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, int64(agentAnswerLimits.Size)+1))
	if err != nil {
		return fmt.Errorf("GET %s: read the answer: %w", url, err)
	}
	if err := bounded.JSON(raw, agentAnswerLimits); err != nil {
		return fmt.Errorf("GET %s: the answer crosses a limit of what corral reads from an agent (%w): is --url the agent's --listen address?", url, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("GET %s: not the agent's JSON: %w", url, err)
	}
	return nil
}

// agentAnswerLimits bound what corral agent status reads from the
// agent's API before decoding it (issue 27): its status and events nest
// a few levels and hold a few thousand values.
var agentAnswerLimits = bounded.Limits{Size: 16 << 20, Depth: 32, Values: 1 << 17}

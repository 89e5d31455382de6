package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{"elapsed", context.Background(), time.Millisecond, nil},
		{"cancelled before a long wait", cancelled, time.Hour, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Sleep(tc.ctx, tc.d); !errors.Is(err, tc.want) {
				t.Errorf("Sleep = %v, want %v", err, tc.want)
			}
		})
	}
}

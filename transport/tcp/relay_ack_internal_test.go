package tcp

import "testing"

// A relayed frame's destination acknowledges after a sixteenth of the
// resend log, never less than on a connection nor more than a sixteenth
// of the default log, and always well before the origin's log of the
// same size fills (a quarter of it, as ackBytes is of minResendBuffer):
// the origin never waits for an acknowledgement that the destination
// holds back.
func TestRelayAckBytes(t *testing.T) {
	for _, tc := range []struct {
		resend int
		want   uint64
	}{
		{minResendBuffer, ackBytes},
		{4 << 20, ackBytes},
		{8 << 20, 512 << 10},
		{DefaultResendBuffer, 4 << 20},
		{1 << 30, 4 << 20},
	} {
		cfg := DefaultConfig()
		cfg.ResendBuffer = tc.resend
		tr := &Transport{cfg: cfg}
		got := tr.relayAckBytes()
		if got != tc.want {
			t.Errorf("ResendBuffer %d: relayAckBytes %d, want %d", tc.resend, got, tc.want)
		}
		if got > uint64(tc.resend)/4 {
			t.Errorf("ResendBuffer %d: relayAckBytes %d is more than a quarter of the log", tc.resend, got)
		}
	}
}

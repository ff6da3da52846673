package workers_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/workers"
)

// TestWebhookErrorsDoNotQuoteTheURL: a webhook's URL is often its
// credential, and a failed delivery's error is stored and shown to every
// reader of the Alerts page, so it says what went wrong without it.
func TestWebhookErrorsDoNotQuoteTheURL(t *testing.T) {
	t.Parallel()
	// A server that hangs up on every request. (A port closed after
	// listening on it is no failure to count on: a test running beside
	// this one may be given the port meanwhile, and its server answers.)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	addr := l.Addr().String()
	sender, err := workers.NewAlertSender(nil, []string{"127.0.0.1"}, 2*time.Second)
	require.NoError(t, err)
	const secret = "services/T0SECRET/B0SECRET/XXsecretXX"
	err = sender.Send(context.Background(), domain.Notification{Channel: domain.ChannelWebhook, WebhookURL: "http://" + addr + "/" + secret})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "SECRET")
	require.Contains(t, err.Error(), "webhook: post: ")
}

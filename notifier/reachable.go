package notifier

import (
	"context"
	"net"
)

// Reachable reports whether the webhook's host accepts a TCP connection,
// without sending a request: a cheap way to notice that an app that refused
// connections is listening again. The connection is closed at once. A proxy
// from the environment is not used: the app is probed directly.
func (w *Webhook) Reachable(ctx context.Context) bool {
	port := w.url.Port()
	if port == "" {
		port = "80"
		if w.url.Scheme == "https" {
			port = "443"
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(w.url.Hostname(), port))
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

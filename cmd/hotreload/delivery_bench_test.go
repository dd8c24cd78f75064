package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/e2etest"
)

// BenchmarkAppBack measures how soon an app that was down is reloaded once
// it listens again: the app goes down, the volume changes, the app stays
// down for 5s and comes back. It prints the time from the app's return to
// the reload request, and the reload requests made while it was down (each
// one refused), with the reachability probe (a TCP connect every 200ms
// after a refused connection, the default) and without it
// (--webhook-probe-interval=0, the behaviour before the probe), with the
// default --webhook-max-backoff of 5s.
func BenchmarkAppBack(b *testing.B) {
	const (
		down   = 5 * time.Second
		rounds = 3
	)
	for _, bc := range []struct {
		name, flag, expect string
	}{
		{"probe=200ms", "--webhook-probe-interval=200ms", "target <= 0.5s"},
		{"probe=off", "--webhook-probe-interval=0", "baseline: the backoff, up to 5s"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var backs []time.Duration
			var refused []float64
			for round := range rounds {
				app := e2etest.NewApp(b)
				vol := benchVolume(b, e2etest.Payload("key", "v0"))
				p := benchStart(b, app, []string{vol.Dir}, bc.flag)
				failure := map[string]string{"target": app.URL("/-/reload"), "result": "failure"}

				app.Down()
				e2etest.Write(b, vol, true, e2etest.Payload("key", fmt.Sprintf("v%d", round+1)))
				time.Sleep(down) // the scenario: the app is down this long
				upAt := time.Now()
				app.Up()
				req := app.WaitAfter(upAt, 30*time.Second)
				backs = append(backs, req.Start.Sub(upAt))
				n, _ := p.Metric("hotreload_reloads_total", failure)
				refused = append(refused, n)
				p.Stop()
			}
			slices.Sort(backs)
			slices.Sort(refused)
			report(b, fmt.Sprintf("app back after %s down (%s), %d rounds: reload %.0fms / %.0fms / %.0fms (min/median/max) after it listens again; %.0f / %.0f / %.0f reload requests refused while down",
				down, bc.name, rounds, ms(backs[0]), ms(backs[rounds/2]), ms(backs[rounds-1]),
				refused[0], refused[rounds/2], refused[rounds-1])+"; "+bc.expect,
				map[string]float64{"ms-back-median": ms(backs[rounds/2]), "ms-back-max": ms(backs[rounds-1]), "refused-requests-max": refused[rounds-1]})
		})
	}
}

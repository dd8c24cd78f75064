package config

import (
	"fmt"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotreload/hotreload/watcher"
)

// NewWatcher builds the watcher of c. Its errors name the flag: the watcher
// package names its options, not hotreload's flags; Parse has refused every
// other bad value before.
func NewWatcher(logger log.Logger, reg prometheus.Registerer, c *Config) (*watcher.Watcher, error) {
	dirs, flags := c.watchDirs()
	w, err := watcher.New(logger, reg, watcher.Options{
		Dirs:           dirs,
		OptionalDirs:   c.OptionalDirs,
		ResyncInterval: c.ResyncInterval,
		PollInterval:   c.PollInterval,
		Poll:           c.Poll,
	})
	if de, ok := err.(*watcher.DirError); ok {
		return nil, fmt.Errorf("%s: %w", flags[de.Dir], de.Err)
	}
	return w, err
}

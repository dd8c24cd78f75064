package watcher

// idle reports whether no volume is dirty or being hashed. Tests use it
// as a sync point.
func (w *Watcher) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.vols {
		if v.dirty || v.running {
			return false
		}
	}
	return true
}

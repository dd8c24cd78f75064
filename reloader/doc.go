// Package reloader decides when to reload: it takes content changes from the
// watcher, waits for a burst to settle (debounce, with an upper bound), and
// asks every target for the content the volumes now hold. Each target has
// its own delivery loop: at most one attempt in flight, retries with backoff,
// and latest wins, so a change that arrives during a delivery folds into one
// follow-up and a superseded change is never retried on its own.
//
// A target is given content, not events: the loop remembers, per target, the
// content it last delivered (a hash per volume) and delivers only when the
// content asked for differs from it. A burst that ends on what the app
// already has reloads nothing, a failed change that is reverted to the
// delivered content is dropped, and one that stays changed is re-sent. At
// start the delivered content is the startup content (the app has just read
// it), or what a state file says was delivered before a restart.
//
// It is a library: it knows nothing of hotreload's command line. Its errors
// say what is wrong and leave it to the caller to name the option, and
// Options.Hint lets the caller add advice in its own terms to the log line
// of a failed reload.
package reloader

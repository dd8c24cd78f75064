// Package notifier delivers a reload to one target. A Notifier makes a
// single attempt; the retry policy (Backoff) is applied by the caller, which
// also decides when to reload. Nothing here knows about files.
//
// It is a library: it knows nothing of hotreload's command line. An error
// about an option names it by its field in the options struct (URL, CAFile),
// as an *OptionError; a program maps those names to its own, as hotreload's
// internal/config does with Explain to name its flags (--webhook-url,
// --webhook-ca-file). The signal and reloader packages report their options
// the same way.
package notifier

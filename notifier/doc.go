// Package notifier delivers a reload to one target. A Notifier makes a
// single attempt; the retry policy (Backoff) is applied by the caller, which
// also decides when to reload. Nothing here knows about files.
//
// It is a library: it knows nothing of hotreload's command line. A program
// that takes the options from its users checks each first with ParseURL,
// CheckMethod, CheckStatusCode and ParseHeader, and says what is wrong in
// its own terms, as hotreload's internal/config does with its flags. A
// failed attempt is an ordinary error whose cause errors.Is and errors.As
// see (a refused connection, an unknown certificate authority, a
// RedirectError).
package notifier

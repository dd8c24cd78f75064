// Package view runs hotreload's views: for each --view, it chooses which
// revision of a ConfigMap or Secret the app runs (the pod's revision
// annotation, the source volume, the stable copy's volume: see Choose),
// writes that revision into the app's directory (package appdir), and
// hands the reloader a change of that directory, so that delivering it
// (debounce, retries, latest wins, the state file) is the reloader's as for
// any volume. When the app refuses a revision, the view puts the previous
// one back (last-known-good) and does not try the refused one again until
// the content or the annotation changes.
//
// The rules, the annotation file's format and $(VAR) expansion are pure
// functions (Choose, ParseAnnotations, Revisions, Expand); docs/design/fleet.md
// is the contract they implement.
package view

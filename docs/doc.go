// Package docs holds no code: its test checks that every relative link and
// anchor in the repository's Markdown files (README.md, CONTRIBUTING.md,
// docs/, examples/, charts/) points at a file and a heading that exist.
package docs

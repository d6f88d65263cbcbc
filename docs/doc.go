// Package docs holds locktest's user documentation: the pages next to this
// file, linked from the repository's README.md. It has no code; its tests
// keep every relative link and #anchor of README.md, docs/*.md and the
// packages' README.md files pointing at a file and heading that exist, keep
// README.md a front door under 15 KB, and keep the scheme, fault and
// command tables in step with the registries they describe.
package docs

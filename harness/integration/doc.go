// Package integration holds more of the harness's real-server tests: the
// schedule replays, the docker backend's cells, the MySQL cells and the
// --client-cmd adapters. They are a package of their own only so that go
// test runs them beside the harness package's tests (it runs at most
// -parallel tests of one package at a time, and -p packages at once); the
// helpers both share are in harness/harnesstest.
package integration

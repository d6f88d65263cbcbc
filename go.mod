module github.com/locktest/locktest

go 1.26.8

require golang.org/x/sys v0.49.0 // indirect

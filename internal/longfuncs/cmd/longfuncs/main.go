// Command longfuncs lists the functions longer than -max lines in the
// packages named (directories), longest first:
//
//	go run ./internal/longfuncs/cmd/longfuncs -max 80 harness nemesis cmd/locktest
//
// It always exits 0 when it could read them: a list to work from, not a
// gate.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/locktest/locktest/internal/longfuncs"
)

func main() {
	limit := flag.Int("max", 80, "list functions longer than this many lines")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: longfuncs [-max N] DIR...")
		os.Exit(2)
	}
	fs, err := longfuncs.Over(*limit, flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "longfuncs:", err)
		os.Exit(1)
	}
	for _, f := range fs {
		fmt.Println(f)
	}
	fmt.Printf("%d functions over %d lines\n", len(fs), *limit)
}

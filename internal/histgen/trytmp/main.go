package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/internal/histgen"
)

func main() {
	for _, cfg := range []histgen.Config{
		{Seed: 1, Clients: 5, Ops: 2000, Resource: true},
		{Seed: 2, Clients: 5, Ops: 2000, Resource: true, Indeterminate: 0.05, Lease: true},
		{Seed: 3, Clients: 5, Ops: 2000, Resource: true, Indeterminate: 0.05, DoubleHolders: 2, ForeignReleases: 1, LostUpdates: 2},
		{Seed: 4, Clients: 50, Ops: 10000, Resource: true, Fence: true, DoubleHolders: 3},
	} {
		t0 := time.Now()
		out := histgen.Generate(cfg)
		h, err := out.History()
		if err != nil {
			panic(err)
		}
		gt := time.Since(t0)
		r := checker.Check(h, checker.Options{})
		fmt.Printf("gen %v events=%d injected=%+v\n", gt, len(out.Events), out.Injected)
		b, _ := json.MarshalIndent(r, "", " ")
		if len(b) > 6000 {
			b = b[:6000]
		}
		os.Stdout.Write(b)
		fmt.Println()
	}
}

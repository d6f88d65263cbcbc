package main

import (
	"encoding/csv"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// paramsFlag is --param KEY=VALUE (or, named, --image KIND=IMAGE),
// repeatable, or KEY=VALUE,KEY=VALUE in one (read as pflag's
// string-to-string flag reads it), into a map; a key given twice is an
// error, never the last one winning.
type paramsFlag struct {
	m    *map[string]string
	name string // the flag's name, "param" when empty
}

func (f paramsFlag) Set(val string) error {
	var pairs []string
	switch strings.Count(val, "=") {
	case 0:
		return fmt.Errorf("%s must be formatted as key=value", val)
	case 1:
		pairs = []string{strings.Trim(val, `"`)}
	default:
		var err error
		if pairs, err = csv.NewReader(strings.NewReader(val)).Read(); err != nil {
			return err
		}
	}
	if *f.m == nil {
		*f.m = map[string]string{}
	}
	for _, pair := range pairs {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("%s must be formatted as key=value", pair)
		}
		if old, seen := (*f.m)[k]; seen {
			name := f.name
			if name == "" {
				name = "param"
			}
			return fmt.Errorf("--%s %s given twice (%q, then %q): give each key once", name, k, old, v)
		}
		(*f.m)[k] = v
	}
	return nil
}

func (f paramsFlag) String() string {
	if f.m == nil {
		return "[]"
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(*f.m)) {
		out = append(out, k+"="+(*f.m)[k])
	}
	return "[" + strings.Join(out, ",") + "]"
}

func (paramsFlag) Type() string { return "stringToString" }
